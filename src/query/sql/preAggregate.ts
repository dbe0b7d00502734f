/**
 * Counting per time bucket, pre-aggregated by receive time: a statement shaped like
 *
 *     SELECT date_trunc('minute', p_timestamp) AS minute, count(*) AS n FROM logs [WHERE …] GROUP BY 1 [ORDER BY …] [LIMIT …]
 *
 * runs as
 *
 *     SELECT date_trunc('minute', p_timestamp) AS minute, CAST(sum(__lh_rows) AS BIGINT) AS n
 *     FROM (SELECT p_timestamp, count(*) AS __lh_rows FROM logs [WHERE …] GROUP BY p_timestamp) AS logs
 *     GROUP BY 1 [ORDER BY …] [LIMIT …]
 *
 * Why: DuckDB evaluates `date_trunc` once per row (~20–30 ns on this machine: two thirds of the
 * histogram's time over 1M rows), while a dataset's receive time has one value per request, so the
 * inner grouping (cheap: the column comes dictionary-encoded) leaves a few thousand values to truncate.
 *
 * Why the answer is the same for every input: every grouping key and every non-aggregate select item
 * is a deterministic expression of the one column (no other column, no aggregate, window, subquery or
 * volatile function such as random()), so it takes the same value on every row of an inner group and
 * the outer groups are exactly the original ones; each outer group's count is the sum of its inner
 * groups' counts (exact integers, cast back to count's BIGINT); NULLs form one inner group as they form
 * one outer group; the WHERE clause filters the same rows, inside. Names and types of the result
 * columns are the original's (count(*) keeps its alias, or DuckDB's own name for it, `count_star()`).
 * Time zones, DST and precision change nothing: the expressions themselves are not rewritten, only
 * evaluated once per distinct value instead of once per row. Row order: ORDER BY is kept; rows it
 * leaves tied come in no defined order either way, as without ORDER BY.
 *
 * Anything else is left as written: other aggregates, HAVING, QUALIFY, DISTINCT, grouping sets,
 * joins, CTEs, subqueries in FROM, set operations, GROUP BY ALL, non-constant LIMIT. Whether it pays is decided
 * per query from the snapshot (executor.ts): only when the dataset's time column is the receive time
 * and its files prove few distinct values.
 */
import { isLosslessNumber } from 'lossless-json';
import { cloneTree } from './parseTree.ts';

type Node = Record<string, unknown>;

/** The inner count's name: no dataset column starts with `__` (names.ts reserves nothing, but the outer query sees only this subquery). */
export const INNER_COUNT = '__lh_rows';

/** DuckDB's name for an unaliased `count(*)` / `count()` result column. */
const COUNT_STAR_NAME = 'count_star()';

/** Expression classes whose evaluation depends only on their children. */
const PURE_CLASSES = new Set(['CONSTANT', 'FUNCTION', 'CAST', 'OPERATOR', 'CASE', 'COMPARISON', 'CONJUNCTION', 'BETWEEN', 'COLUMN_REF', 'COLLATE']);

const lower = (s: string) => s.replace(/[A-Z]+/g, (m) => m.toLowerCase());

export interface PreAggregateContext {
  /** The one column the statement may group on (compared ASCII case-insensitively, as DuckDB binds names). */
  column: string;
  /**
   * Functions a grouping expression may call (lower case): scalar functions whose value depends on
   * their arguments alone — no aggregate (nor a macro wrapping one), no volatile function such as random().
   */
  deterministic: ReadonlySet<string>;
}

/** The dialect's macros (dialect.ts) that are scalar functions of their arguments (not the approx_* aggregates). */
export const SCALAR_DIALECT_MACROS = ['date_bin', 'to_timestamp', 'to_timestamp_seconds', 'to_timestamp_millis', 'to_timestamp_micros', 'to_timestamp_nanos', 'from_unixtime', 'to_unixtime', 'to_date', 'to_char', 'date_format'];

/** A top-level `count(*)` / `count()` with nothing attached. */
function isCountStar(e: Node): boolean {
  const orders = (e.order_bys as { orders?: unknown[] } | undefined)?.orders ?? [];
  return (
    e.class === 'FUNCTION' &&
    lower(String(e.function_name ?? '')) === 'count_star' &&
    !e.schema &&
    !e.catalog &&
    ((e.children as unknown[] | undefined) ?? []).length === 0 &&
    e.filter == null &&
    !e.distinct &&
    !e.export_state &&
    orders.length === 0
  );
}

/** Positional reference (`GROUP BY 1`, `ORDER BY 2`): its 1-based index, else undefined. */
function position(e: Node): number | undefined {
  if (e.class !== 'CONSTANT') return undefined;
  const v = e.value as { type?: { id?: string }; is_null?: boolean; value?: unknown } | undefined;
  if (!v || v.is_null || !/INT/.test(String(v.type?.id ?? ''))) return undefined;
  const n = Number(v.value);
  return Number.isSafeInteger(n) ? n : undefined;
}

/**
 * Whether `e` is a deterministic expression whose only column is `column` (bare, or qualified by
 * `tableAlias`), with no aggregate, window, subquery, star, lambda or parameter anywhere in it.
 */
function ofColumnOnly(e: unknown, ctx: PreAggregateContext, tableAlias: string): boolean {
  if (Array.isArray(e)) return e.every((x) => ofColumnOnly(x, ctx, tableAlias));
  if (e === null || typeof e !== 'object') return true;
  const n = e as Node;
  if (typeof n.class === 'string') {
    if (!PURE_CLASSES.has(n.class)) return false;
    if (n.class === 'COLUMN_REF') {
      const names = ((n.column_names as string[] | undefined) ?? []).map(lower);
      const col = lower(ctx.column);
      return (names.length === 1 && names[0] === col) || (names.length === 2 && names[0] === tableAlias && names[1] === col);
    }
    if (n.class === 'FUNCTION') {
      const name = lower(String(n.function_name ?? ''));
      // DuckDB itself qualifies the functions it expands syntax into (AT TIME ZONE → main.timezone).
      const builtin = ['', 'main'].includes(String(n.schema ?? '')) && ['', 'system'].includes(String(n.catalog ?? ''));
      if (!ctx.deterministic.has(name) || !builtin || n.filter != null || n.distinct || n.export_state) return false;
      if (((n.order_bys as { orders?: unknown[] } | undefined)?.orders ?? []).length) return false;
    }
  }
  return Object.entries(n).every(([k, v]) => k === 'value' || ofColumnOnly(v, ctx, tableAlias));
}

/**
 * The statement with its per-row grouping pre-aggregated by `ctx.column` (module comment), or
 * undefined when its shape is not one this rewrite keeps exact. `names`: aliases the statement uses
 * bare in GROUP BY or ORDER BY (lower case); the rewrite holds only for a dataset with no column of
 * those names (DuckDB would bind the column there, and the subquery hides the dataset's columns). `skeleton` is the parse tree of
 * `SELECT CAST(sum(__lh_rows) AS BIGINT) FROM (SELECT <column>, count(*) AS __lh_rows FROM x GROUP BY <column>) AS x`
 * (made by DuckDB's own parser, so the grafted nodes are in its current format). Pure: neither input is changed.
 */
export function preAggregate(statement: Node, ctx: PreAggregateContext, skeleton: Node): { statement: Node; names: string[] } | undefined {
  const shape = selectShape(statement);
  if (!shape) return undefined;
  const { node, from, tableAlias } = shape;
  const items = (node.select_list as Node[] | undefined) ?? [];
  if (!items.some(isCountStar)) return undefined;
  if (!items.every((e) => isCountStar(e) || ofColumnOnly(e, ctx, tableAlias))) return undefined;
  const refs = new ItemRefs(items, ctx, tableAlias, new Set([tableAlias, lower(String(from.table_name ?? ''))]));
  if (!groupsKept(node, refs) || !modifiersKept(node, refs)) return undefined;
  return { statement: graft(statement, node, from, skeleton), names: [...refs.named] };
}

/** A plain SELECT of one dataset (no CTE, HAVING, QUALIFY, sample, parameters, schema or column aliases). */
function selectShape(statement: Node): { node: Node; from: Node; tableAlias: string } | undefined {
  const node = statement.node as Node | undefined;
  if (!node || node.type !== 'SELECT_NODE') return undefined;
  if (((node.cte_map as { map?: unknown[] } | undefined)?.map ?? []).length) return undefined;
  if (node.having != null || node.qualify != null || node.sample != null || node.aggregate_handling !== 'STANDARD_HANDLING') return undefined;
  if (((statement.named_param_map as unknown[] | undefined) ?? []).length) return undefined;
  const from = node.from_table as Node | undefined;
  if (!from || from.type !== 'BASE_TABLE' || from.schema_name || from.catalog_name || from.sample != null || from.at_clause != null) return undefined;
  if (((from.column_name_alias as unknown[] | undefined) ?? []).length) return undefined;
  const tableAlias = lower(String(from.alias || from.table_name || ''));
  return tableAlias ? { node, from, tableAlias } : undefined;
}

/** What GROUP BY and ORDER BY may name: select items by position, aliases, and the names found bare. */
class ItemRefs {
  /** Aliases of the column's expressions (not of a count). */
  readonly aliases: Set<string>;
  readonly countAliases: Set<string>;
  /** Aliases the statement names bare (the dataset must have no column of those names). */
  readonly named = new Set<string>();
  constructor(
    readonly items: Node[],
    readonly ctx: PreAggregateContext,
    readonly tableAlias: string,
    /** A bare name that is the table's binds to the whole row (a struct) before any alias. */
    readonly tableNames: Set<string>,
  ) {
    this.aliases = new Set(items.filter((e) => !isCountStar(e)).map((e) => lower(String(e.alias ?? ''))).filter(Boolean));
    this.countAliases = new Set(items.filter(isCountStar).map((e) => lower(String(e.alias ?? ''))).filter(Boolean));
  }

  bareName(e: Node): string | undefined {
    const names = e.class === 'COLUMN_REF' ? ((e.column_names as string[] | undefined) ?? []) : [];
    return names.length === 1 ? lower(names[0]) : undefined;
  }

  /** Whether `name` is an alias the rewrite may keep (not the column itself, not the table's name). */
  aliasOk(name: string | undefined, withCounts: boolean): name is string {
    if (name === undefined || name === lower(this.ctx.column) || this.tableNames.has(name)) return false;
    return withCounts ? this.aliases.has(name) || this.countAliases.has(name) : this.aliases.has(name) && !this.countAliases.has(name);
  }
}

/** One plain grouping set holding every GROUP BY expression, each a function of the column only. */
function groupsKept(node: Node, refs: ItemRefs): boolean {
  const groups = (node.group_expressions as Node[] | undefined) ?? [];
  const sets = (node.group_sets as number[][] | undefined) ?? [];
  // Not ROLLUP, CUBE or GROUPING SETS.
  if (!groups.length || sets.length !== 1 || sets[0].length !== groups.length || !groups.every((_, i) => sets[0].includes(i))) return false;
  for (const g of groups) {
    const p = position(g);
    const name = refs.bareName(g);
    if (p !== undefined) {
      // A position names a select item: it must be one of the column's expressions, not the count.
      if (p < 1 || p > refs.items.length || isCountStar(refs.items[p - 1])) return false;
    } else if (refs.aliasOk(name, false)) {
      // GROUP BY an alias (`GROUP BY t`): DuckDB binds a dataset column of that name first, so the
      // rewrite holds only if there is none — checked against the schema when it runs.
      refs.named.add(name);
    } else if (!ofColumnOnly(g, refs.ctx, refs.tableAlias)) return false;
  }
  return true;
}

/** ORDER BY positions, aliases or functions of the column, and constant LIMIT/OFFSET; nothing else. */
function modifiersKept(node: Node, refs: ItemRefs): boolean {
  for (const m of (node.modifiers as Node[] | undefined) ?? []) {
    if (m.type === 'ORDER_MODIFIER') {
      if (!((m.orders as { expression: Node }[] | undefined) ?? []).every((o) => orderKept(o.expression, refs))) return false;
    } else if (m.type === 'LIMIT_MODIFIER') {
      for (const k of ['limit', 'offset']) {
        const v = m[k] as Node | null | undefined;
        if (v != null && v.class !== 'CONSTANT') return false;
      }
    } else return false; // DISTINCT, LIMIT … PERCENT
  }
  return true;
}

function orderKept(e: Node, refs: ItemRefs): boolean {
  const p = position(e);
  if (p !== undefined) return p >= 1 && p <= refs.items.length;
  // A bare name is a select item's alias or the column itself (the alias, too, must not be a
  // dataset column: checked when it runs).
  const name = refs.bareName(e);
  if (refs.aliasOk(name, true)) {
    refs.named.add(name);
    return true;
  }
  return ofColumnOnly(e, refs.ctx, refs.tableAlias);
}

/**
 * Graft: the skeleton's subquery reads the statement's own table and WHERE; the outer query is the
 * statement itself reading that subquery under the table's name, its count(*) items summed.
 */
function graft(statement: Node, node: Node, from: Node, skeleton: Node): Node {
  const sk = cloneTree(skeleton.node as Node);
  const sum = (sk.select_list as Node[])[0];
  const sub = sk.from_table as Node;
  const inner = (sub.subquery as Node).node as Node;
  inner.from_table = cloneTree(from);
  inner.where_clause = cloneTree(node.where_clause ?? null);
  sub.alias = String(from.alias || from.table_name);

  const outer = cloneTree(node);
  outer.from_table = sub;
  outer.where_clause = null;
  outer.select_list = (outer.select_list as Node[]).map((e) => (isCountStar(e) ? { ...cloneTree(sum), alias: String(e.alias || COUNT_STAR_NAME) } : e));
  return withoutLocations({ ...cloneTree(statement), node: outer }) as Node;
}

/**
 * The tree without `query_location` (positions in the SQL text, for error messages): optional in
 * DuckDB's format, and meaningless in a tree rewritten. (Constants keep their exact text: parseTree.ts.)
 */
function withoutLocations(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutLocations);
  if (value === null || typeof value !== 'object' || isLosslessNumber(value)) return value;
  return Object.fromEntries(Object.entries(value).filter(([k]) => k !== 'query_location').map(([k, v]) => [k, withoutLocations(v)]));
}

/** The SQL of the skeleton `preAggregate` grafts into, for `column` (quoted). */
export function skeletonSql(quotedColumn: string): string {
  return `SELECT CAST(sum("${INNER_COUNT}") AS BIGINT) FROM (SELECT ${quotedColumn}, count(*) AS "${INNER_COUNT}" FROM x GROUP BY ${quotedColumn}) AS x`;
}

/**
 * Whether pre-aggregating a snapshot pays: at least `factor` rows per distinct receive time, by an
 * upper bound on the distinct values that the catalog proves (receive times are whole milliseconds,
 * so a file holds at most min(rows, its span in ms + 1) of them; WAL rows count as all distinct).
 */
export function preAggregationPays(files: { rows: number; minMs: number; maxMs: number }[], segments: { rows: number }[], factor = 16): boolean {
  let rows = 0;
  let distinct = 0;
  for (const f of files) {
    rows += f.rows;
    distinct += Math.min(f.rows, Math.max(0, f.maxMs - f.minMs) + 1);
  }
  for (const s of segments) {
    rows += s.rows;
    distinct += s.rows;
  }
  return rows > 0 && distinct * factor <= rows;
}
