import { DuckDBInstance } from '@duckdb/node-api';
import { DIALECT_SQL } from './dialect.ts';
import { parseTree, serializeSql } from './parseTree.ts';

/*
 * What a statement costs once DuckDB expands its macros (the sandbox's size rule, sandbox.ts): a macro
 * copies its argument once per use of its parameter, so nested calls multiply. Also the ASCII case
 * folding every name rule of the sandbox compares with, and the once-per-process read both use.
 */

export type Node = Record<string, unknown>;

/** DuckDB folds identifiers' case in ASCII only; JavaScript's toLowerCase folds Unicode too. */
export const asciiLower = (s: string) => s.replace(/[A-Z]+/g, (m) => m.toLowerCase());

/**
 * Most expressions a statement may bind once macros are expanded: ~8 µs of DuckDB's binder each, so
 * about half a second at worst. A statement without macros stays far below it (64 KiB of SQL is at
 * most ~30,000 expressions); four nested `to_timestamp` are ~18,000, five ~110,000.
 */
export const MAX_EXPANDED_EXPRESSIONS = 50_000;

/**
 * `read` run once per process, by the first caller (what it reads is fixed per DuckDB build); a read
 * that failed (the storage DuckDB out of memory, say) is tried again by the next caller.
 */
export function readOnce<A extends unknown[], T>(read: (...args: A) => Promise<T>): (...args: A) => Promise<T> {
  let value: Promise<T> | undefined;
  return (...args) => {
    if (!value) {
      value = read(...args);
      value.catch(() => (value = undefined));
    }
    return value;
  };
}

/** What expanding a macro costs: copies of each argument, and expressions of its own body. */
export interface MacroCost {
  /** The most times any parameter appears in the body, nested macros expanded (at least 1). */
  factor: number;
  /** Expressions in the body, nested macros expanded. */
  size: number;
}

const isExpression = (n: Node) => typeof n.class === 'string' || typeof n.type === 'string';

/** The macro a function node calls, if any (unqualified or in DuckDB's own schemas). */
function macroCalled(n: Node, costs: ReadonlyMap<string, MacroCost>): MacroCost | undefined {
  if (n.class !== 'FUNCTION') return undefined;
  const schema = String(n.schema ?? '');
  if (schema && schema !== 'main') return undefined;
  return costs.get(asciiLower(String(n.function_name ?? '')));
}

/** Costs of macros from their parsed bodies (table-driven tests feed this directly). */
export function macroCosts(defs: ReadonlyMap<string, { params: string[]; body: Node }[]>): Map<string, MacroCost> {
  const costs = new Map<string, MacroCost>();
  const pending = new Set<string>();
  const cost = (name: string): MacroCost => {
    const known = costs.get(name);
    if (known) return known;
    // A macro that reaches itself (DuckDB refuses to run one) is taken as a plain function.
    if (pending.has(name)) return { factor: 1, size: 1 };
    pending.add(name);
    let factor = 1;
    let size = 1;
    for (const { params, body } of defs.get(name) ?? []) {
      for (const p of params) factor = Math.max(factor, uses(asciiLower(p), body));
      size = Math.max(size, sizeOf(body));
    }
    pending.delete(name);
    const c = { factor, size };
    costs.set(name, c);
    return c;
  };
  const callee = (n: Node) => (n.class === 'FUNCTION' && defs.has(asciiLower(String(n.function_name ?? ''))) ? cost(asciiLower(String(n.function_name))) : undefined);
  const uses = (param: string, value: unknown): number => {
    if (Array.isArray(value)) return value.reduce((sum: number, v) => sum + uses(param, v), 0);
    if (value === null || typeof value !== 'object') return 0;
    const n = value as Node;
    const names = n.column_names as string[] | undefined;
    if (n.class === 'COLUMN_REF' && names?.length === 1 && asciiLower(names[0]) === param) return 1;
    const inner = Object.values(n).reduce((sum: number, v) => sum + uses(param, v), 0);
    return inner * (callee(n)?.factor ?? 1);
  };
  const sizeOf = (value: unknown): number => {
    if (Array.isArray(value)) return value.reduce((sum: number, v) => sum + sizeOf(v), 0);
    if (value === null || typeof value !== 'object') return 0;
    const n = value as Node;
    const c = callee(n);
    const inner = Object.values(n).reduce((sum: number, v) => sum + sizeOf(v), 0);
    return c ? c.size + c.factor * inner : (isExpression(n) ? 1 : 0) + inner;
  };
  for (const name of defs.keys()) cost(name);
  return costs;
}

/** Expressions a parsed statement binds once its macros are expanded (stops counting past `limit`). */
export function expandedSize(statement: Node, costs: ReadonlyMap<string, MacroCost>, limit: number): number {
  let total = 0;
  const walk = (value: unknown, copies: number): void => {
    if (total > limit) return;
    if (Array.isArray(value)) {
      for (const v of value) walk(v, copies);
      return;
    }
    if (value === null || typeof value !== 'object') return;
    const n = value as Node;
    const m = macroCalled(n, costs);
    total += copies * (m ? m.size : isExpression(n) ? 1 : 0);
    for (const v of Object.values(n)) walk(v, m ? copies * m.factor : copies);
  };
  walk(statement, 1);
  return total;
}

/** Costs of every macro a query worker has: DuckDB's own and the dialect's (read once, in a scratch instance). */
const macros = readOnce(loadMacroCosts);
export const macroCostsOfDialect = macros;

async function loadMacroCosts(): Promise<ReadonlyMap<string, MacroCost>> {
  const instance = await DuckDBInstance.create(':memory:');
  const conn = await instance.connect();
  try {
    for (const sql of DIALECT_SQL) await conn.run(sql);
    const rows = (
      await conn.runAndReadAll(
        `SELECT lower(function_name) AS name, to_json(parameters)::VARCHAR AS params, macro_definition AS body FROM duckdb_functions() WHERE function_type = 'macro'`,
      )
    ).getRowObjects();
    const defs = new Map<string, { params: string[]; body: Node }[]>();
    for (const row of rows) {
      const ast = parseTree<{ error: boolean; statements?: Node[] }>(await serializeSql(conn, `SELECT ${String(row.body)}`, 'setup'));
      const name = String(row.name);
      // A body this parser cannot read (none today) still counts as a macro of factor 1.
      const body = ast.error ? {} : (ast.statements?.[0] ?? {});
      defs.set(name, [...(defs.get(name) ?? []), { params: JSON.parse(String(row.params)) as string[], body }]);
    }
    return macroCosts(defs);
  } finally {
    conn.closeSync();
    instance.closeSync();
  }
}
