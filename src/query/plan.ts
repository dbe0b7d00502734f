import type { DuckDBConnection } from '@duckdb/node-api';
import { invalidInput } from '../errors.ts';

/** Table functions a query may call in FROM: they compute values and touch no file. */
const ALLOWED_TABLE_FUNCTIONS = new Set(['unnest', 'range', 'generate_series']);

export interface QueryPlan {
  /** Names in FROM that are not CTEs: each must be a dataset. */
  tables: string[];
}

type Node = Record<string, unknown>;

/** Plans depend only on the SQL text; dashboards repeat the same statements, so keep recent ones. */
const cache = new Map<string, QueryPlan>();
const CACHE_ENTRIES = 500;

/**
 * Parses the SQL with DuckDB's own parser (`json_serialize_sql`) and checks it before anything runs:
 * exactly one SELECT statement (json_serialize_sql refuses every other kind), no schema- or
 * catalog-qualified names, no table functions but the allowed ones (`read_csv`, `read_parquet`,
 * `query`… would bypass dataset permissions and time ranges). Returns the table names it reads.
 */
export async function planQuery(conn: DuckDBConnection, sql: string): Promise<QueryPlan> {
  const cached = cache.get(sql);
  if (cached) return cached;
  const plan = await parsePlan(conn, sql);
  if (cache.size >= CACHE_ENTRIES) cache.delete(cache.keys().next().value!);
  cache.set(sql, plan);
  return plan;
}

async function parsePlan(conn: DuckDBConnection, sql: string): Promise<QueryPlan> {
  const reader = await conn.runAndReadAll('SELECT json_serialize_sql($1::VARCHAR) AS ast', [sql]);
  const ast = JSON.parse(String(reader.getRowObjects()[0].ast)) as {
    error: boolean;
    error_type?: string;
    error_message?: string;
    statements?: Node[];
  };
  if (ast.error) {
    if (ast.error_type === 'not implemented' || /only select/i.test(ast.error_message ?? '')) {
      throw invalidInput('only read-only SELECT statements are allowed');
    }
    throw invalidInput(ast.error_message ?? 'invalid SQL');
  }
  const statements = ast.statements ?? [];
  if (statements.length !== 1) throw invalidInput('exactly one SELECT statement is allowed per query');
  const tables = new Set<string>();
  const ctes = new Set<string>();
  const visit = (value: unknown): void => {
    if (Array.isArray(value)) {
      for (const v of value) visit(v);
      return;
    }
    if (value === null || typeof value !== 'object') return;
    const node = value as Node;
    if (node.type === 'BASE_TABLE' && typeof node.table_name === 'string') {
      if (node.schema_name || node.catalog_name) {
        throw invalidInput(`qualified table names are not allowed: "${[node.catalog_name, node.schema_name, node.table_name].filter(Boolean).join('.')}"`);
      }
      tables.add(node.table_name);
    }
    if (node.type === 'TABLE_FUNCTION') {
      const fn = node.function as Node | undefined;
      const name = String(fn?.function_name ?? '').toLowerCase();
      if (!ALLOWED_TABLE_FUNCTIONS.has(name)) throw invalidInput(`table function "${name}" is not allowed; read datasets by name in FROM`);
    }
    const cteMap = node.cte_map as { map?: { key: string }[] } | undefined;
    for (const entry of cteMap?.map ?? []) ctes.add(entry.key.toLowerCase());
    for (const key of Object.keys(node)) visit(node[key]);
  };
  visit(statements[0]);
  return { tables: [...tables].filter((t) => !ctes.has(t.toLowerCase())) };
}
