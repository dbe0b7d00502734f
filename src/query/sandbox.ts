import type { DuckDBConnection } from '@duckdb/node-api';
import { invalidInput, tooLarge } from '../errors.ts';

/**
 * The first line of the SQL sandbox: what a statement may say, decided from DuckDB's own parse tree
 * (`json_serialize_sql`) before anything runs. The second line is the query worker, whose DuckDB can
 * open only the files of the datasets this statement was allowed to read (see `worker.ts`).
 *
 * Rules:
 * - exactly one SELECT statement (json_serialize_sql refuses to serialise any other kind);
 * - every table reference is either a CTE in scope at that point or a dataset name; scopes follow
 *   SQL: a CTE is visible in its own WITH's body and in the CTEs after it, to itself only when the WITH
 *   is recursive, never outside the query that defines it;
 * - no schema- or catalog-qualified names (tables or functions), so `pg_catalog.*`, `main.*`,
 *   `system.*` and attached catalogs are unreachable;
 * - table functions only from a short list that touches no file and no catalog;
 * - no scalar function that reads settings, the environment or catalog metadata;
 * - bounded size and nesting (DuckDB's optimiser is exponential in scalar-subquery depth: depth 20
 *   plans in ~0.3 s, 30 in minutes), checked before parsing for size and bracket depth, after for the
 *   depth of nested queries.
 */

export interface SandboxLimits {
  /** Longest statement accepted, in bytes. */
  maxSqlBytes: number;
  /** Deepest nesting of queries (subqueries, CTE bodies, set operations) accepted. */
  maxDepth: number;
}

export interface QueryPlan {
  /** Dataset names the statement reads, as written (resolved case-insensitively later). */
  tables: string[];
  /** The most rows the statement can return, when its parse tree alone proves a bound. */
  rowBound?: number;
}

type Node = Record<string, unknown>;

/** Table functions a statement may call in FROM: they compute values and touch no file or catalog. */
const ALLOWED_TABLE_FUNCTIONS = new Set(['unnest', 'range', 'generate_series']);

/**
 * Scalar functions refused anywhere in a statement: they disclose settings (and with them the data
 * directory), the environment, or catalog objects whose definitions name files.
 */
const DENIED_FUNCTIONS = new Set(['current_setting', 'getenv', 'getvariable', 'current_query', 'txid_current', 'col_description', 'obj_description', 'shobj_description', 'format_type']);
const DENIED_FUNCTION_PREFIXES = ['duckdb_', 'pg_', 'sqlite_', 'has_', 'pragma_', 'parquet_', 'read_', 'sniff_', 'glob', 'json_execute'];

/** Query nodes: each level of these counts towards the nesting limit. */
const QUERY_NODES = new Set(['SELECT_NODE', 'SET_OPERATION_NODE', 'RECURSIVE_CTE_NODE', 'CTE_NODE']);

/** Table references a statement may use; others (SHOW_REF for DESCRIBE/SUMMARIZE, …) are refused. */
const ALLOWED_TABLE_REFS = new Set(['BASE_TABLE', 'JOIN', 'SUBQUERY', 'TABLE_FUNCTION', 'EMPTY', 'EXPRESSION_LIST', 'PIVOT']);

/**
 * Cheap checks on the text before DuckDB's parser sees it: size, and bracket depth outside string
 * literals, quoted identifiers and comments (a parser fed 10,000 nested brackets would recurse deeply).
 */
export function checkSqlText(sql: string, limits: SandboxLimits): void {
  const bytes = Buffer.byteLength(sql);
  if (bytes > limits.maxSqlBytes) throw tooLarge(`the statement is ${bytes} bytes; at most ${limits.maxSqlBytes} are accepted (P_QUERY_MAX_SQL_BYTES)`);
  // Brackets beyond a few per query level are never needed: allow generous room for expressions.
  const maxBrackets = limits.maxDepth * 4;
  let depth = 0;
  for (let i = 0; i < sql.length; i++) {
    const ch = sql[i];
    if (ch === "'" || ch === '"') {
      const end = sql.indexOf(ch, i + 1);
      // Doubled quotes inside a literal are two adjacent literals for this scan: same result.
      i = end < 0 ? sql.length : end;
    } else if (ch === '-' && sql[i + 1] === '-') {
      const end = sql.indexOf('\n', i);
      i = end < 0 ? sql.length : end;
    } else if (ch === '/' && sql[i + 1] === '*') {
      const end = sql.indexOf('*/', i + 2);
      i = end < 0 ? sql.length : end + 1;
    } else if (ch === '(' || ch === '[' || ch === '{') {
      if (++depth > maxBrackets) throw invalidInput(`the statement nests brackets deeper than ${maxBrackets} levels`);
    } else if (ch === ')' || ch === ']' || ch === '}') depth--;
  }
}

/** Names of DuckDB's aggregate functions (fixed per DuckDB build: read once). */
let aggregateNames: Promise<ReadonlySet<string>> | undefined;

async function aggregates(conn: DuckDBConnection): Promise<ReadonlySet<string>> {
  aggregateNames ??= conn
    .runAndReadAll(`SELECT DISTINCT function_name AS name FROM duckdb_functions() WHERE function_type = 'aggregate'`)
    .then((r) => new Set(r.getRowObjects().map((row) => String(row.name).toLowerCase())));
  aggregateNames.catch(() => (aggregateNames = undefined));
  return aggregateNames;
}

/** Parses with DuckDB's parser and applies the rules above. */
export async function planStatement(conn: DuckDBConnection, sql: string, limits: SandboxLimits): Promise<QueryPlan> {
  checkSqlText(sql, limits);
  const aggregateFunctions = await aggregates(conn);
  const reader = await conn.runAndReadAll('SELECT json_serialize_sql($1::VARCHAR) AS ast', [sql]);
  const ast = JSON.parse(String(reader.getRowObjects()[0].ast)) as { error: boolean; error_type?: string; error_message?: string; statements?: Node[] };
  if (ast.error) {
    if (ast.error_type === 'not implemented' || /only select/i.test(ast.error_message ?? '')) throw invalidInput('only read-only SELECT statements are allowed');
    throw invalidInput(ast.error_message ?? 'invalid SQL');
  }
  const statements = ast.statements ?? [];
  if (statements.length !== 1) throw invalidInput('exactly one SELECT statement is allowed per query');
  const plan = analyzeStatement(statements[0], limits.maxDepth);
  const bound = rowBound(statements[0], aggregateFunctions);
  return bound === undefined ? plan : { ...plan, rowBound: bound };
}

/** Functions that turn one value into several rows. */
const ROW_MULTIPLIERS = new Set(['unnest', 'unlist', 'generate_subscripts']);

/**
 * The most rows a statement can return, from its top-level query alone, or undefined when the parse
 * tree does not bound it: a constant LIMIT; one row for a query without FROM or an aggregate without
 * GROUP BY, when no select item can multiply rows (unnest) or is a window function. Conservative:
 * anything else (GROUP BY, set operations without LIMIT, aggregates wrapped in macros) is unbounded.
 */
export function rowBound(statement: Node, aggregateFunctions: ReadonlySet<string>): number | undefined {
  const node = (statement.node ?? statement) as Node;
  let bound: number | undefined;
  for (const m of (node.modifiers as Node[] | undefined) ?? []) {
    if (m.type !== 'LIMIT_MODIFIER') continue;
    const limit = m.limit as Node | null;
    const value = (limit?.value as Node | undefined)?.value;
    if (limit?.class !== 'CONSTANT') continue;
    const n = Number(value);
    if (Number.isSafeInteger(n) && n >= 0) bound = Math.min(bound ?? n, n);
  }
  if (node.type !== 'SELECT_NODE') return bound;
  const items = (node.select_list as Node[] | undefined) ?? [];
  const groups = ((node.group_expressions as unknown[] | undefined) ?? []).length + ((node.group_sets as unknown[] | undefined) ?? []).length;
  if (!items.length || groups > 0 || node.aggregate_handling !== 'STANDARD_HANDLING') return bound;
  /** Walks an expression (not into subqueries, whose scalar value is one row anyway). */
  const has = (value: unknown, test: (n: Node) => boolean): boolean => {
    if (Array.isArray(value)) return value.some((v) => has(v, test));
    if (value === null || typeof value !== 'object') return false;
    const n = value as Node;
    if (typeof n.type === 'string' && QUERY_NODES.has(n.type)) return false;
    return test(n) || Object.values(n).some((v) => has(v, test));
  };
  const fn = (n: Node) => (n.class === 'FUNCTION' ? String(n.function_name ?? '').toLowerCase() : '');
  if (items.some((e) => has(e, (n) => n.class === 'WINDOW' || ROW_MULTIPLIERS.has(fn(n))))) return bound;
  const from = node.from_table as Node | undefined;
  const noFrom = !from || from.type === 'EMPTY';
  if (noFrom || items.every((e) => has(e, (n) => aggregateFunctions.has(fn(n))))) bound = Math.min(bound ?? 1, 1);
  return bound;
}

/** The scope walk over one parsed statement (exported for table-driven tests). */
export function analyzeStatement(statement: Node, maxDepth: number): QueryPlan {
  const tables = new Set<string>();

  const checkFunction = (node: Node) => {
    const name = String(node.function_name ?? '').toLowerCase();
    // DuckDB itself qualifies some built-ins it expands syntax into (`[1, 2]` → main.list_value).
    const schema = String(node.schema ?? '');
    const catalog = String(node.catalog ?? '');
    if ((schema && schema !== 'main') || (catalog && catalog !== 'system')) {
      throw invalidInput(`qualified function names are not allowed: "${[catalog, schema, name].filter(Boolean).join('.')}"`);
    }
    if (DENIED_FUNCTIONS.has(name) || DENIED_FUNCTION_PREFIXES.some((p) => name.startsWith(p))) throw invalidInput(`function "${name}" is not allowed`);
  };

  const checkTableRef = (ref: Node, scope: ReadonlySet<string>, depth: number) => {
    const type = String(ref.type);
    if (!ALLOWED_TABLE_REFS.has(type)) throw invalidInput(`${type.toLowerCase().replace(/_ref$/, '')} is not allowed in FROM; read datasets by name`);
    if (type === 'BASE_TABLE') {
      const name = String(ref.table_name ?? '');
      if (ref.schema_name || ref.catalog_name) {
        throw invalidInput(`qualified table names are not allowed: "${[ref.catalog_name, ref.schema_name, name].filter(Boolean).join('.')}"`);
      }
      // A name that is not a CTE in scope must be a dataset: anything else (a file path DuckDB would
      // read by replacement scan, a catalog view) fails the dataset lookup later.
      if (!scope.has(name.toLowerCase())) tables.add(name);
    } else if (type === 'TABLE_FUNCTION') {
      const fn = ref.function as Node | undefined;
      const name = String(fn?.function_name ?? '').toLowerCase();
      if (!ALLOWED_TABLE_FUNCTIONS.has(name) || fn?.schema || fn?.catalog) throw invalidInput(`table function "${name}" is not allowed; read datasets by name in FROM`);
    }
    for (const key of Object.keys(ref)) {
      const child = ref[key];
      if (key === 'left' || key === 'right' || key === 'source') {
        if (child && typeof child === 'object') checkTableRef(child as Node, scope, depth);
      } else if (key !== 'function') visit(child, scope, depth);
      else visitChildren(child as Node, scope, depth);
    }
  };

  const visitChildren = (node: Node, scope: ReadonlySet<string>, depth: number) => {
    for (const key of Object.keys(node)) visit(node[key], scope, depth);
  };

  const visit = (value: unknown, scope: ReadonlySet<string>, depth: number): void => {
    if (Array.isArray(value)) {
      for (const v of value) visit(v, scope, depth);
      return;
    }
    if (value === null || typeof value !== 'object') return;
    const node = value as Node;
    if (typeof node.type === 'string' && QUERY_NODES.has(node.type)) {
      visitQuery(node, scope, depth + 1);
      return;
    }
    if (node.class === 'FUNCTION' || node.type === 'FUNCTION') checkFunction(node);
    visitChildren(node, scope, depth);
  };

  const visitQuery = (node: Node, outer: ReadonlySet<string>, depth: number) => {
    if (depth > maxDepth) throw invalidInput(`queries are nested deeper than ${maxDepth} levels (P_QUERY_MAX_DEPTH)`);
    let scope = outer;
    const ctes = (node.cte_map as { map?: { key: string; value: { query?: { node?: Node } } }[] } | undefined)?.map ?? [];
    for (const { key, value } of ctes) {
      const body = value.query?.node;
      const name = key.toLowerCase();
      // A CTE sees the ones before it; itself only when recursive (DuckDB parses a recursive CTE's
      // body as RECURSIVE_CTE_NODE; a self-reference anywhere else is an error, not a CTE).
      if (body) visitQuery(body, body.type === 'RECURSIVE_CTE_NODE' ? new Set([...scope, name]) : scope, depth + 1);
      scope = new Set([...scope, name]);
    }
    for (const key of Object.keys(node)) {
      if (key === 'cte_map') continue;
      const child = node[key];
      if (key === 'from_table') {
        if (child && typeof child === 'object') checkTableRef(child as Node, scope, depth);
      } else if ((key === 'left' || key === 'right') && child && typeof child === 'object') {
        // Set operations and recursive CTEs: both sides are queries in the same scope.
        visitQuery(child as Node, scope, depth);
      } else visit(child, scope, depth);
    }
  };

  visit(statement.node ?? statement, new Set(), 0);
  return { tables: [...tables] };
}

/**
 * Plans keyed by SQL text, bounded in bytes (the SQL is the key, so a cache of entries alone could
 * hold hundreds of megabytes of distinct large statements). Least recently used out first.
 */
export class PlanCache {
  private entries = new Map<string, QueryPlan>();
  private bytes = 0;

  constructor(private readonly maxBytes: number) {}

  private static cost(sql: string, plan: QueryPlan): number {
    return 2 * sql.length + plan.tables.reduce((s, t) => s + 2 * t.length + 16, 64);
  }

  get(sql: string): QueryPlan | undefined {
    const plan = this.entries.get(sql);
    if (plan) {
      this.entries.delete(sql);
      this.entries.set(sql, plan);
    }
    return plan;
  }

  set(sql: string, plan: QueryPlan): void {
    const cost = PlanCache.cost(sql, plan);
    if (cost > this.maxBytes / 8 || this.entries.has(sql)) return;
    this.entries.set(sql, plan);
    this.bytes += cost;
    for (const [key, old] of this.entries) {
      if (this.bytes <= this.maxBytes) break;
      this.entries.delete(key);
      this.bytes -= PlanCache.cost(key, old);
    }
  }

  get size(): { entries: number; bytes: number } {
    return { entries: this.entries.size, bytes: this.bytes };
  }
}
