import { BytesLru } from './parsedTrees.ts';
import { quotedIdentifier, type DuckDBConnection } from '@duckdb/node-api';
import { invalidInput, tooLarge } from '../../errors.ts';
import { TIME_COLUMN } from '../../model.ts';
import { preAggregate, SCALAR_DIALECT_MACROS, skeletonSql } from './preAggregate.ts';
import { parseTree, serializeSql, treeJson } from './parseTree.ts';
import { rangeInputs } from './timeRange.ts';
import { asciiLower, expandedSize, macroCostsOfDialect, MAX_EXPANDED_EXPRESSIONS, readOnce, type Node } from './macroCost.ts';

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
 *   depth of nested queries and for the size of the statement once macros are expanded (a macro
 *   copies its argument once per use of its parameter: `to_timestamp` six times, so eight nested calls
 *   in 131 bytes bind 1.7 million copies);
 * - names (tables, CTEs, functions) are ASCII and compared with ASCII case folding, as DuckDB compares
 *   them: with Unicode folding a CTE named with K (KELVIN SIGN) would hide the catalog view `duckdb_views`.
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
  /**
   * The same statement with its per-row grouping pre-aggregated by receive time (preAggregate.ts),
   * when its shape allows: run instead when the snapshot shows it pays (executor.ts).
   */
  preAggregated?: PreAggregated;
  /**
   * What time-range extraction reads of the parse tree (timeRange.ts rangeInputs), as JSON: absent
   * when the statement's shape gives no range. Kept so the statement is not parsed again for it.
   */
  rangeTree?: string;
}

/** A statement pre-aggregated by receive time, and the names it holds for only if they are no dataset column. */
export interface PreAggregated {
  sql: string;
  names: string[];
}


/** Table functions a statement may call in FROM: they compute values and touch no file or catalog. */
const ALLOWED_TABLE_FUNCTIONS = new Set(['unnest', 'range', 'generate_series']);

/**
 * Scalar functions refused anywhere in a statement: they disclose settings (and with them the data
 * directory), the environment, or catalog objects whose definitions name files.
 */
const DENIED_FUNCTIONS = new Set([
  'current_setting',
  'getenv',
  'getvariable',
  'current_query',
  'txid_current',
  'col_description',
  'obj_description',
  'shobj_description',
  'format_type',
  // Functions that bind SQL text given as a value, out of this walker's sight.
  'query',
  'query_table',
  'sql_auto_complete',
  'which_secret',
]);
const DENIED_FUNCTION_PREFIXES = [
  'duckdb_',
  'pg_',
  'sqlite_',
  'has_',
  'pragma_',
  'parquet_',
  'read_',
  'sniff_',
  'glob',
  // json_serialize_sql/_plan, json_deserialize_sql, json_execute_serialized_sql bind SQL text.
  'json_execute',
  'json_serialize',
  'json_deserialize',
];

/** A name compared with the rules here must be ASCII, so no folding rule can tell two apart differently. */
function asciiName(kind: string, name: string): string {
  if (/[^\x00-\x7f]/.test(name)) throw invalidInput(`${kind} names must be ASCII: "${name}"`);
  return asciiLower(name);
}

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

/** Names of DuckDB's aggregate functions. */
const aggregates = readOnce(async (conn: DuckDBConnection): Promise<ReadonlySet<string>> => {
  const r = await conn.runAndReadAll(`SELECT DISTINCT function_name AS name FROM duckdb_functions() WHERE function_type = 'aggregate'`);
  return new Set(r.getRowObjects().map((row) => String(row.name).toLowerCase()));
});

/** Names of scalar functions whose value depends on their arguments alone (see preAggregate.ts). */
const deterministic = readOnce(async (conn: DuckDBConnection): Promise<ReadonlySet<string>> => {
  const r = await conn.runAndReadAll(
    `SELECT function_name AS name FROM duckdb_functions() GROUP BY function_name
     HAVING bool_and(function_type = 'scalar' AND stability IS DISTINCT FROM 'VOLATILE')`,
  );
  return new Set([...r.getRowObjects().map((row) => String(row.name).toLowerCase()), ...SCALAR_DIALECT_MACROS]);
});

/** The parse tree preAggregate grafts into. */
const skeletonTree = readOnce(async (conn: DuckDBConnection): Promise<Record<string, unknown>> => {
  return parseTree<{ statements: Node[] }>(await serializeSql(conn, skeletonSql(quotedIdentifier(TIME_COLUMN.json)), 'setup')).statements[0];
});

async function preAggregated(conn: DuckDBConnection, statement: Node): Promise<PreAggregated | undefined> {
  const rewritten = preAggregate(statement, { column: TIME_COLUMN.json, deterministic: await deterministic(conn) }, await skeletonTree(conn));
  if (!rewritten) return undefined;
  const reader = await conn.runAndReadAll('SELECT json_deserialize_sql($1::JSON) AS sql', [treeJson({ error: false, statements: [rewritten.statement] })]);
  return { sql: String(reader.getRowObjects()[0].sql), names: rewritten.names };
}

/**
 * Parses with DuckDB's parser and applies the rules above. `parsed`: the tree the service's own parser
 * already made of exactly `sql` (a PostgreSQL statement's one parse, executor.ts `parsePg`), never a
 * tree from a query worker.
 */
export async function planStatement(conn: DuckDBConnection, sql: string, limits: SandboxLimits, parsed?: string): Promise<QueryPlan> {
  checkSqlText(sql, limits);
  const aggregateFunctions = await aggregates(conn);
  const macroCostMap = await macroCostsOfDialect();
  const tree = parsed ?? (await serializeSql(conn, sql, 'sandbox'));
  const ast = parseTree<{ error: boolean; error_type?: string; error_message?: string; statements?: Node[] }>(tree);
  if (ast.error) {
    if (ast.error_type === 'not implemented' || /only select/i.test(ast.error_message ?? '')) throw invalidInput('only read-only SELECT statements are allowed');
    throw invalidInput(ast.error_message ?? 'invalid SQL');
  }
  const statements = ast.statements ?? [];
  if (statements.length !== 1) throw invalidInput('exactly one SELECT statement is allowed per query');
  const plan = analyzeStatement(statements[0], limits.maxDepth);
  const expanded = expandedSize(statements[0], macroCostMap, MAX_EXPANDED_EXPRESSIONS);
  if (expanded > MAX_EXPANDED_EXPRESSIONS) {
    throw invalidInput(`the statement is too large once its macros (such as to_timestamp) are expanded: over ${MAX_EXPANDED_EXPRESSIONS} expressions; nest such functions less deeply`);
  }
  const bound = rowBound(statements[0], aggregateFunctions);
  const pre = plan.tables.length === 1 ? await preAggregated(conn, statements[0]) : undefined;
  const range = rangeInputs(statements[0]);
  return {
    ...plan,
    ...(bound === undefined ? {} : { rowBound: bound }),
    ...(pre === undefined ? {} : { preAggregated: pre }),
    ...(range === undefined ? {} : { rangeTree: treeJson(range) }),
  };
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
  const fn = (n: Node) => (n.class === 'FUNCTION' ? asciiLower(String(n.function_name ?? '')) : '');
  if (items.some((e) => has(e, (n) => n.class === 'WINDOW' || ROW_MULTIPLIERS.has(fn(n))))) return bound;
  const from = node.from_table as Node | undefined;
  const noFrom = !from || from.type === 'EMPTY';
  if (noFrom || items.every((e) => has(e, (n) => aggregateFunctions.has(fn(n))))) bound = Math.min(bound ?? 1, 1);
  return bound;
}

/**
 * The nesting limit alone, counted as `analyzeStatement` counts it: for catalog statements, whose
 * names and functions the catalog database checks (catalogRewrite.ts), but whose depth costs the same.
 */
export function checkNesting(statement: Node, maxDepth: number): void {
  const walk = (value: unknown, depth: number): void => {
    if (Array.isArray(value)) {
      for (const v of value) walk(v, depth);
      return;
    }
    if (value === null || typeof value !== 'object') return;
    const n = value as Node;
    const query = typeof n.type === 'string' && QUERY_NODES.has(n.type);
    const d = query ? depth + 1 : depth;
    if (d > maxDepth) throw invalidInput(`queries are nested deeper than ${maxDepth} levels (P_QUERY_MAX_DEPTH)`);
    for (const [k, v] of Object.entries(n)) {
      // Both sides of a set operation are queries at its own level.
      walk(v, query && n.type === 'SET_OPERATION_NODE' && (k === 'left' || k === 'right') ? d - 1 : d);
    }
  };
  walk(statement.node ?? statement, 0);
}

/** The scope walk over one parsed statement (exported for table-driven tests). */
export function analyzeStatement(statement: Node, maxDepth: number): QueryPlan {
  const tables = new Set<string>();

  const checkFunction = (node: Node) => {
    const name = asciiName('function', String(node.function_name ?? ''));
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
      if (!scope.has(asciiName('table', name))) tables.add(name);
    } else if (type === 'TABLE_FUNCTION') {
      const fn = ref.function as Node | undefined;
      const name = asciiName('function', String(fn?.function_name ?? ''));
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
      const name = asciiName('CTE', key);
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
export class PlanCache extends BytesLru<QueryPlan> {
  constructor(maxBytes: number) {
    super(maxBytes, (sql, plan) => 2 * sql.length + 2 * (plan.preAggregated?.sql.length ?? 0) + 2 * (plan.rangeTree?.length ?? 0) + plan.tables.reduce((s, t) => s + 2 * t.length + 16, 64));
  }
}
