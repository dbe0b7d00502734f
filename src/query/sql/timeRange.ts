import type { DuckDBConnection } from '@duckdb/node-api';
import { cloneTree, treeJson } from './parseTree.ts';
import { withPrepared, type BoundParam } from './boundParams.ts';

/**
 * The time range of a statement that has no range beside it (the PostgreSQL front door): taken from
 * its dataset's time-column conditions in WHERE, as Grafana's `$__timeFilter`, Metabase and Superset
 * write them (`=`, `<`, `<=`, `>`, `>=`, `BETWEEN`, against constants such as literals, casts, `now() -
 * interval '1 hour'`). The range only chooses which files are read — the WHERE itself still filters
 * rows — so it must never be narrower than what WHERE accepts. Hence the rule is conservative:
 *
 * - the statement reads exactly one table reference, which is the top-level SELECT's FROM (a second
 *   reference of the same dataset, e.g. in a subquery, would see the narrowed view too);
 * - only AND-ed conditions directly in that SELECT's WHERE count (under OR or NOT they do not bound);
 * - a condition's other side must be constant: literals, casts, and a few time functions; it is
 *   evaluated by DuckDB, rounded outwards to whole milliseconds;
 * - anything else leaves that side of the range open (the whole dataset, under the usual limits).
 */

type Node = Record<string, unknown>;

export interface TimeRange {
  startMs: number;
  endMs: number;
}

/** The widest range a query may name (years 1 to 9999, end exclusive). */
export const WHOLE_RANGE: TimeRange = { startMs: new Date('0001-01-01T00:00:00Z').getTime(), endMs: new Date('9999-12-31T23:59:59.999Z').getTime() };

/** Functions allowed in a bound's constant expression (all cheap, none reads data). */
const CONSTANT_FUNCTIONS = new Set(['+', '-', 'now', 'current_timestamp', 'get_current_timestamp', 'transaction_timestamp', 'current_date', 'today', 'date_trunc', 'to_timestamp', 'epoch_ms', 'make_timestamp', 'timezone', 'strptime', 'date_add', 'date_sub', 'to_days', 'to_hours', 'to_minutes', 'to_seconds']);

/** `$n` of a statement run with bound values (a PostgreSQL Bind): 1-based, within the values. */
function paramIndex(node: Node, params: readonly BoundParam[] | undefined): number | undefined {
  const n = Number(node.identifier);
  return params && Number.isInteger(n) && n >= 1 && n <= params.length ? n : undefined;
}

function isConstant(n: unknown, params?: readonly BoundParam[]): boolean {
  if (n === null || typeof n !== 'object') return true;
  if (Array.isArray(n)) return n.every((v) => isConstant(v, params));
  const node = n as Node;
  switch (node.class) {
    case 'CONSTANT':
      return true;
    case 'PARAMETER':
      // A bound value is a constant of this statement (DuckDB binds it when the bound is evaluated).
      return paramIndex(node, params) !== undefined;
    case 'CAST':
      return isConstant(node.child, params);
    case 'FUNCTION':
      return CONSTANT_FUNCTIONS.has(String(node.function_name).toLowerCase()) && !node.schema && isConstant(node.children, params);
    default:
      return false;
  }
}

type Bound = { side: 'low' | 'high' | 'both'; inclusive: boolean; expr: Node };

const FLIP: Record<string, string> = {
  COMPARE_GREATERTHAN: 'COMPARE_LESSTHAN',
  COMPARE_LESSTHAN: 'COMPARE_GREATERTHAN',
  COMPARE_GREATERTHANOREQUALTO: 'COMPARE_LESSTHANOREQUALTO',
  COMPARE_LESSTHANOREQUALTO: 'COMPARE_GREATERTHANOREQUALTO',
  COMPARE_EQUAL: 'COMPARE_EQUAL',
};

/** Conditions of the WHERE tree that bound `isTime` columns, as (side, constant expression). */
function bounds(where: Node | null | undefined, isTime: (col: Node) => boolean, isConstant: (n: unknown) => boolean): Bound[] {
  if (!where) return [];
  if (where.class === 'CONJUNCTION' && where.type === 'CONJUNCTION_AND') return ((where.children as Node[]) ?? []).flatMap((c) => bounds(c, isTime, isConstant));
  if (where.class === 'BETWEEN') {
    const input = where.input as Node;
    if (!isTime(input)) return [];
    const out: Bound[] = [];
    if (isConstant(where.lower)) out.push({ side: 'low', inclusive: true, expr: where.lower as Node });
    if (isConstant(where.upper)) out.push({ side: 'high', inclusive: true, expr: where.upper as Node });
    return out;
  }
  if (where.class === 'COMPARISON') {
    let type = String(where.type);
    let col = where.left as Node;
    let other = where.right as Node;
    if (!isTime(col)) {
      [col, other] = [other, col];
      type = FLIP[type] ?? '';
      if (!isTime(col)) return [];
    }
    if (!isConstant(other)) return [];
    switch (type) {
      case 'COMPARE_EQUAL': return [{ side: 'both', inclusive: true, expr: other }];
      case 'COMPARE_GREATERTHAN': return [{ side: 'low', inclusive: false, expr: other }];
      case 'COMPARE_GREATERTHANOREQUALTO': return [{ side: 'low', inclusive: true, expr: other }];
      case 'COMPARE_LESSTHAN': return [{ side: 'high', inclusive: false, expr: other }];
      case 'COMPARE_LESSTHANOREQUALTO': return [{ side: 'high', inclusive: true, expr: other }];
      default: return [];
    }
  }
  return [];
}

/** Table references anywhere in the tree (BASE_TABLE nodes). */
function countTables(n: unknown): number {
  if (n === null || typeof n !== 'object') return 0;
  if (Array.isArray(n)) return n.reduce((s: number, v) => s + countTables(v), 0);
  const node = n as Node;
  return (node.type === 'BASE_TABLE' ? 1 : 0) + Object.values(node).reduce((s: number, v) => s + countTables(v), 0);
}

/**
 * The part of a statement's parse tree `timeRangeOf` reads (its FROM and WHERE), or undefined when
 * the statement's shape can give no range. The sandbox keeps it with the statement's plan, so the
 * range comes from the one parse that checked the statement (issue 35), at a fraction of the tree's size.
 */
export function rangeInputs(statement: Node): Node | undefined {
  const node = (statement.node ?? statement) as Node;
  if (node.type !== 'SELECT_NODE' || countTables(statement) !== 1) return undefined;
  const from = node.from_table as Node | undefined;
  if (from?.type !== 'BASE_TABLE' || !node.where_clause) return undefined;
  return { node: { type: 'SELECT_NODE', from_table: from, where_clause: node.where_clause } };
}

/**
 * The statement's range, given its parse tree (json_serialize_sql) and the time column of each
 * dataset by lower-case name. `conn` evaluates the constant bounds.
 */
export async function timeRangeOf(conn: DuckDBConnection, statement: Node, timeColumns: ReadonlyMap<string, string>, params?: readonly BoundParam[]): Promise<TimeRange> {
  const node = (statement.node ?? statement) as Node;
  if (node.type !== 'SELECT_NODE' || countTables(statement) !== 1) return WHOLE_RANGE;
  const from = node.from_table as Node | undefined;
  if (from?.type !== 'BASE_TABLE') return WHOLE_RANGE;
  const table = String(from.table_name).toLowerCase();
  const timeColumn = timeColumns.get(table)?.toLowerCase();
  if (!timeColumn) return WHOLE_RANGE;
  const qualifiers = new Set([table, String(from.alias ?? '').toLowerCase()].filter(Boolean));
  const isTime = (col: Node) => {
    if (col?.class !== 'COLUMN_REF') return false;
    const names = (col.column_names as string[]).map((s) => s.toLowerCase());
    if (names[names.length - 1] !== timeColumn) return false;
    // `t.ts`, `logs.ts`, `public.logs.ts`: the qualifier must name this table.
    return names.length === 1 || qualifiers.has(names[names.length - 2]);
  };
  const found = bounds(node.where_clause as Node | null, isTime, (n) => isConstant(n, params));
  if (!found.length) return WHOLE_RANGE;
  let { startMs, endMs } = WHOLE_RANGE;
  for (const b of found) {
    const us = await evaluateMicros(conn, b.expr, params);
    if (us === undefined) continue;
    // Outwards to whole milliseconds: floor for a lower bound, past the value for an upper one.
    const floorMs = Math.floor(us / 1000);
    if (b.side === 'low' || b.side === 'both') startMs = Math.max(startMs, floorMs);
    if (b.side === 'high' || b.side === 'both') endMs = Math.min(endMs, floorMs + 1);
  }
  // An empty range (contradictory conditions) stays a valid one: nothing matches WHERE anyway.
  if (endMs < startMs) endMs = startMs;
  return { startMs, endMs };
}

/**
 * The expression with its `$n` numbered from 1 in order of appearance, and the values they take: the
 * values are bound by DuckDB, never written into the text evaluated.
 */
function renumbered(expr: Node, params: readonly BoundParam[] | undefined): { expr: Node; values: BoundParam[] } {
  const values: BoundParam[] = [];
  const walk = (n: unknown): void => {
    if (n === null || typeof n !== 'object') return;
    if (Array.isArray(n)) return n.forEach(walk);
    const node = n as Node;
    const i = node.class === 'PARAMETER' ? paramIndex(node, params) : undefined;
    if (i !== undefined) {
      values.push(params![i - 1]);
      node.identifier = String(values.length);
      return;
    }
    Object.values(node).forEach(walk);
  };
  const copy = cloneTree(expr);
  walk(copy);
  return { expr: copy, values };
}

/** A constant expression's value as microseconds since the epoch (as a TIMESTAMP), or undefined. */
async function evaluateMicros(conn: DuckDBConnection, bound: Node, params?: readonly BoundParam[]): Promise<number | undefined> {
  const { expr, values } = renumbered(bound, params);
  const statement = {
    error: false,
    statements: [
      {
        node: {
          type: 'SELECT_NODE',
          modifiers: [],
          cte_map: { map: [] },
          select_list: [expr],
          from_table: { type: 'EMPTY', alias: '', sample: null },
          where_clause: null,
          group_expressions: [],
          group_sets: [],
          aggregate_handling: 'STANDARD_HANDLING',
          having: null,
          sample: null,
          qualify: null,
        },
        named_param_map: [],
      },
    ],
  };
  try {
    const json = treeJson(statement);
    const sqlReader = await conn.runAndReadAll('SELECT json_deserialize_sql($1::JSON) AS s', [json]);
    const sql = String(sqlReader.getRowObjects()[0].s);
    const r = await withPrepared(conn, `SELECT epoch_us(CAST(v AS TIMESTAMP)) AS us FROM (${sql}) AS t(v)`, values, (prepared) => prepared.runAndReadAll());
    const v = r.getRowObjects()[0]?.us;
    if (v === null || v === undefined) return undefined;
    const n = Number(v as bigint);
    return Number.isFinite(n) ? n : undefined;
  } catch {
    // Not a time (a number compared with the time column, a string DuckDB cannot read): no bound.
    return undefined;
  }
}
