/**
 * Reading PostgreSQL clients' statements with DuckDB: is a statement about the catalog, and the
 * parse-tree rewrites that make DuckDB read it as PostgreSQL would (see catalog.ts, which runs them).
 */
import { invalidInput } from '../../errors.ts';
import { forEachNode, type Node } from './ast.ts';
import { RELATION_MACROS } from './catalogSql.ts';

const CATALOG_SCHEMAS = new Set(['pg_catalog', 'information_schema']);

/** Functions that ask about the catalog or the session: a statement calling one is a catalog statement. */
const CATALOG_FUNCTIONS = new Set([
  'version', 'current_schema', 'current_schemas', 'current_database', 'current_catalog', 'current_user', 'session_user', 'user',
  'current_setting', 'set_config', 'format_type', 'obj_description', 'col_description', 'shobj_description', 'current_query', 'inet_server_addr', 'inet_server_port',
]);
const CATALOG_FUNCTION_PREFIXES = ['pg_', 'has_'];

/** Casts PostgreSQL clients use on catalog values, which DuckDB lacks: the macro each becomes. */
const REG_CASTS: Record<string, string> = {
  regclass: '__pg_regclass',
  regtype: '__pg_regtype',
  regproc: '__pg_oid',
  regprocedure: '__pg_oid',
  regnamespace: '__pg_regnamespace',
  regrole: '__pg_oid',
  regoper: '__pg_oid',
  regconfig: '__pg_oid',
  oid: '__pg_oid',
  xid: '__pg_oid',
  name: '__pg_name',
};

/**
 * Walks a parse tree: does it touch the catalog, and rewrites in place what DuckDB reads differently
 * (reports whether it did).
 */
export function inspect(ast: Node, datasets: ReadonlySet<string>, database: string, columns: ReadonlySet<string> = new Set()): { catalog: boolean; rewritten: boolean } {
  const inspector = new Inspector(datasets, database, columns);
  inspector.visit(ast);
  nameRenamedColumns(ast, inspector.renamedFrom);
  return { catalog: inspector.catalog, rewritten: inspector.rewritten };
}

/** Replaces a node's contents in place (its parent keeps pointing at it). */
function replaceNode(n: Node, by: Node): void {
  for (const k of Object.keys(n)) delete n[k];
  Object.assign(n, by);
}

/** One walk of `inspect`: what it found, and each kind of node's check and rewrite. */
class Inspector {
  catalog = false;
  rewritten = false;
  readonly renamedFrom = new WeakMap<Node, string>();

  constructor(
    private readonly datasets: ReadonlySet<string>,
    private readonly database: string,
    private readonly columns: ReadonlySet<string>,
  ) {}

  visit(value: unknown): void {
    if (Array.isArray(value)) {
      for (const v of value) this.visit(v);
      return;
    }
    if (value === null || typeof value !== 'object') return;
    const n = value as Node;
    // A catalog relation replaced by its macro has nothing left to visit.
    if (n.type === 'BASE_TABLE' && this.baseTable(n)) return;
    if (n.class === 'COLUMN_REF') this.columnRef(n);
    if (n.type === 'TABLE_FUNCTION' && n.alias && !(n.column_name_alias as unknown[] | undefined)?.length) this.aliasedTableFunction(n);
    if (n.class === 'FUNCTION') this.func(n);
    if (anyOfListAsContains(n)) this.rewritten = true;
    if (n.class === 'CAST') this.cast(n);
    for (const v of Object.values(n)) this.visit(v);
  }

  /** Returns whether the relation was replaced by a catalog macro. */
  private baseTable(n: Node): boolean {
    const schema = String(n.schema_name ?? '').toLowerCase();
    const name = String(n.table_name ?? '').toLowerCase();
    if (String(n.catalog_name ?? '') && (String(n.catalog_name).toLowerCase() === this.database || !CATALOG_SCHEMAS.has(schema))) {
      // `db.public.logs`: any database name is this one.
      n.catalog_name = '';
      this.rewritten = true;
    }
    if (schema === 'public') {
      n.schema_name = '';
      this.rewritten = true;
      return false;
    }
    if (!(CATALOG_SCHEMAS.has(schema) || (!schema && name.startsWith('pg_') && !this.datasets.has(name)))) return false;
    this.catalog = true;
    // information_schema views DuckDB answers with its own type names: `information_schema_<name>`.
    const macro = schema === 'information_schema' ? `information_schema_${name}` : name;
    if (!RELATION_MACROS.has(macro)) return false;
    replaceNode(n, {
      type: 'TABLE_FUNCTION', alias: String(n.alias || name), sample: null, column_name_alias: [], with_ordinality: 'WITHOUT_ORDINALITY',
      function: { class: 'FUNCTION', type: 'FUNCTION', alias: '', function_name: `__${macro}`, schema: '', children: [], filter: null, order_bys: { type: 'ORDER_MODIFIER', orders: [] }, distinct: false, is_operator: false, export_state: false, catalog: '' },
    });
    this.rewritten = true;
    return true;
  }

  private columnRef(n: Node): void {
    // `pg_catalog.pg_namespace.nspname`, `public.logs.n`: the table is in FROM unqualified (or renamed).
    const names = n.column_names as string[];
    if (names.length >= 3 && (CATALOG_SCHEMAS.has(names[0].toLowerCase()) || names[0].toLowerCase() === 'public')) {
      n.column_names = names.slice(1);
      this.rewritten = true;
    }
    const keyword = keywordFunction(n, this.columns);
    if (keyword) {
      this.renamedFrom.set(n, keyword);
      this.catalog = this.rewritten = true;
    }
  }

  /** PostgreSQL: `FROM generate_series(…) s` names the column `s` too (a scalar function's alias). */
  private aliasedTableFunction(n: Node): void {
    const fn = String((n.function as Node | undefined)?.function_name ?? '').toLowerCase();
    if (fn === 'generate_series' || fn === 'unnest') {
      n.column_name_alias = [n.alias];
      this.rewritten = true;
    } else if (SCALAR_IN_FROM.has(fn)) {
      // `FROM string_to_array(…) s`: a scalar function in FROM is a one-row table whose column is `s`.
      const call = { ...(n.function as Node), alias: String(n.alias) };
      replaceNode(n, {
        type: 'SUBQUERY', alias: n.alias, sample: null, column_name_alias: [],
        subquery: { node: { type: 'SELECT_NODE', modifiers: [], cte_map: { map: [] }, select_list: [call], from_table: { type: 'EMPTY', alias: '', sample: null }, where_clause: null, group_expressions: [], group_sets: [], aggregate_handling: 'STANDARD_HANDLING', having: null, sample: null, qualify: null } },
      });
      this.rewritten = true;
    }
  }

  private func(n: Node): void {
    const name = String(n.function_name ?? '').toLowerCase();
    const schema = String(n.schema ?? '').toLowerCase();
    // No client introspection needs DuckDB's own metadata, settings or file functions: they would
    // show the service's paths and extensions rather than the datasets.
    if (CATALOG_DENIED_PREFIXES.some((p) => name.startsWith(p))) throw invalidInput(`function "${name}" is not allowed`);
    if (schema === 'pg_catalog' || CATALOG_FUNCTIONS.has(name) || CATALOG_FUNCTION_PREFIXES.some((p) => name.startsWith(p))) this.catalog = true;
    if (schema === 'pg_catalog' && MAIN_MACROS.has(name)) {
      n.schema = '';
      this.rewritten = true;
    }
    if (name === 'to_timestamp' && (n.children as Node[]).length === 2) this.toTimestamp(n);
    const renamed = name === 'current_setting' ? ((n.children as unknown[]).length === 2 ? '__pg_setting2' : '__pg_setting') : FUNCTION_RENAMES[name];
    if (renamed && (schema === '' || schema === 'pg_catalog')) {
      n.function_name = renamed;
      n.schema = '';
      this.renamedFrom.set(n, name);
      this.rewritten = true;
    }
  }

  /** Superset's PostgreSQL dialect writes times as to_timestamp(text, 'YYYY-MM-DD HH24:MI:SS.US'). */
  private toTimestamp(n: Node): void {
    const fmt = (n.children as Node[])[1];
    const value = (fmt?.value as Node | undefined)?.value;
    if (fmt?.class !== 'CONSTANT' || typeof value !== 'string') return;
    (fmt.value as Node).value = strptimeFormat(value);
    n.function_name = 'strptime';
    n.schema = '';
    this.rewritten = true;
  }

  private cast(n: Node): void {
    const info = (n.cast_type as Node | undefined)?.type_info as Node | null | undefined;
    const macro = REG_CASTS[String(info?.name ?? '').toLowerCase()];
    if (info?.type !== 'UNBOUND_TYPE_INFO' || !macro) return;
    this.catalog = true;
    this.rewritten = true;
    replaceNode(n, {
      class: 'FUNCTION', type: 'FUNCTION', alias: '', function_name: macro, schema: '', catalog: '', children: [n.child],
      filter: null, order_bys: { type: 'ORDER_MODIFIER', orders: [] }, distinct: false, is_operator: false, export_state: false,
    });
  }
}

const CATALOG_DENIED_PREFIXES = ['duckdb_', 'pragma_', 'read_', 'glob', 'sniff_', 'parquet_', 'getenv', 'getvariable', 'json_execute', 'query', 'current_query', 'which_secret', 'iceberg_', 'delta_'];

/** PostgreSQL's to_timestamp format patterns → DuckDB's strptime specifiers (longest first). */
const PG_TIME_PATTERNS: [string, string][] = [
  ['YYYY', '%Y'], ['HH24', '%H'], ['HH12', '%I'], ['MM', '%m'], ['DD', '%d'], ['MI', '%M'], ['SS', '%S'], ['US', '%f'], ['MS', '%g'], ['HH', '%I'], ['AM', '%p'], ['PM', '%p'], ['TZ', '%Z'], ['OF', '%z'],
];

export function strptimeFormat(pg: string): string {
  let out = '';
  for (let i = 0; i < pg.length; ) {
    const hit = PG_TIME_PATTERNS.find(([p]) => pg.startsWith(p, i));
    if (hit) {
      out += hit[1];
      i += hit[0].length;
    } else {
      out += pg[i] === '%' ? '%%' : pg[i];
      i++;
    }
  }
  return out;
}

/** Scalar functions clients call in FROM as PostgreSQL allows. */
const SCALAR_IN_FROM = new Set(['string_to_array', 'current_schemas', 'regexp_split_to_array']);

/**
 * Functions DuckDB has under another name or with other semantics: DuckDB's format_type knows DuckDB's
 * type ids, not PostgreSQL's oids; clients parse "PostgreSQL <major>.<minor>" out of version().
 */
const FUNCTION_RENAMES: Record<string, string> = {
  format_type: '__pg_format_type',
  version: '__pg_version',
  current_database: '__pg_current_database',
  current_catalog: '__pg_current_database',
  current_user: '__pg_current_user',
  session_user: '__pg_current_user',
  user: '__pg_current_user',
  json_build_object: 'json_object',
  jsonb_build_object: 'json_object',
};

/** Macros of catalogSql.ts in `main` that clients call qualified with `pg_catalog.`. */
const MAIN_MACROS = new Set(['pg_get_userbyid', 'pg_encoding_to_char', 'pg_get_indexdef', 'pg_get_partkeydef', 'pg_total_relation_size', 'pg_relation_size', 'pg_table_size', 'pg_get_function_identity_arguments', 'pg_get_serial_sequence', 'pg_get_statisticsobjdef_columns', 'pg_get_triggerdef', 'pg_get_ruledef', 'pg_backend_pid', 'pg_is_in_recovery', 'pg_get_function_result', 'pg_get_function_arguments', 'quote_ident', 'pg_relation_is_publishable', 'pg_terminate_backend', 'pg_cancel_backend', 'pg_get_functiondef']);

/** Expressions DuckDB types TIMESTAMP WITH TIME ZONE whatever their operands: a cast to it, now(), and arithmetic or truncation of those. */
function surelyTimestamptz(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return false;
  const n = value as Node;
  if (n.class === 'CAST') return String((n.cast_type as Node | undefined)?.id ?? '') === 'TIMESTAMP WITH TIME ZONE';
  if (n.class !== 'FUNCTION') return false;
  const name = String(n.function_name ?? '').toLowerCase();
  const args = (n.children as unknown[] | undefined) ?? [];
  if (['now', 'current_timestamp', 'get_current_timestamp', 'transaction_timestamp', 'statement_timestamp'].includes(name)) return args.length === 0;
  if ((name === '+' || name === '-') && n.is_operator) return surelyTimestamptz(args[0]);
  if (name === 'date_trunc' || name === 'time_bucket') return surelyTimestamptz(args[1]);
  return false;
}

/** `timezone('UTC', x)`: a TIMESTAMP WITH TIME ZONE as the UTC wall-clock TIMESTAMP (the time columns' meaning). */
function utcWallClock(child: unknown): Node {
  return {
    class: 'FUNCTION', type: 'FUNCTION', alias: '', function_name: 'timezone', schema: '', catalog: '',
    children: [{ class: 'CONSTANT', type: 'VALUE_CONSTANT', alias: '', value: { type: { id: 'VARCHAR', type_info: null }, is_null: false, value: 'UTC' } }, child],
    filter: null, order_bys: { type: 'ORDER_MODIFIER', orders: [] }, distinct: false, is_operator: false, export_state: false,
  };
}

/**
 * DuckDB cannot compare a TIMESTAMP_NS column (OTLP and remote-write time columns) with a TIMESTAMP
 * WITH TIME ZONE, which PostgreSQL clients compare them with all the time: `now() - interval '1 day'`,
 * psycopg's and pgjdbc's time-zone-aware parameters (`CAST('…' AS TIMESTAMPTZ)` here), Metabase's date
 * filters. In a comparison or BETWEEN of such a column, the side that is surely a TIMESTAMPTZ becomes
 * its UTC wall-clock TIMESTAMP, which DuckDB compares with TIMESTAMP_NS as PostgreSQL compares a
 * timestamp with a timestamptz in a UTC session. Reports whether it rewrote anything, and the
 * placeholders compared with such a column (a timestamptz parameter bound there is made the same way
 * when it is bound: its type is known only then).
 */
export function nsComparableWithTimestamptz(ast: Node, nsColumns: ReadonlySet<string>): { rewritten: boolean; params: number[] } {
  let rewritten = false;
  const params = new Set<number>();
  const isNsColumn = (v: unknown) => {
    const n = v as Node | null;
    const names = n?.class === 'COLUMN_REF' ? (n.column_names as string[]) : undefined;
    return Boolean(names?.length && nsColumns.has(names[names.length - 1].toLowerCase()));
  };
  const fix = (n: Node, keys: string[]) => {
    for (const k of keys) {
      const side = n[k] as Node | null;
      if (side?.class === 'PARAMETER' && /^\d+$/.test(String(side.identifier))) params.add(Number(side.identifier));
      if (surelyTimestamptz(n[k])) {
        n[k] = utcWallClock(n[k]);
        rewritten = true;
      }
    }
  };
  forEachNode(ast, (n) => {
    if (n.class === 'COMPARISON') {
      if (isNsColumn(n.left)) fix(n, ['right']);
      if (isNsColumn(n.right)) fix(n, ['left']);
    } else if (n.class === 'BETWEEN' && isNsColumn(n.input)) fix(n, ['lower', 'upper']);
  });
  return { rewritten, params: [...params] };
}

/**
 * `x = ANY(array)`: DuckDB reads it as a subquery over unnest(array), which it cannot join outside an
 * inner join (SQLAlchemy 1.4's get_indexes: `left outer join pg_attribute a on … a.attnum =
 * ANY(ix.indkey)`). Rewritten in place as PostgreSQL means it: is x in the array (list_contains).
 */
function anyOfListAsContains(n: Node): boolean {
  const list = anyOfList(n);
  if (!list) return false;
  for (const k of Object.keys(n)) delete n[k];
  Object.assign(n, {
    class: 'FUNCTION', type: 'FUNCTION', alias: '', function_name: 'list_contains', schema: '', catalog: '', children: [list.array, list.value],
    filter: null, order_bys: { type: 'ORDER_MODIFIER', orders: [] }, distinct: false, is_operator: false, export_state: false,
  });
  return true;
}

/** `value = ANY(array)` as DuckDB parses it (a subquery selecting unnest(array) and nothing else): its parts. */
function anyOfList(n: Node): { value: unknown; array: unknown } | undefined {
  if (n.class !== 'SUBQUERY' || n.subquery_type !== 'ANY' || n.comparison_type !== 'COMPARE_EQUAL') return undefined;
  const q = (n.subquery as Node | undefined)?.node as Node | undefined;
  const items = (q?.select_list as Node[] | undefined) ?? [];
  const from = q?.from_table as Node | undefined;
  const plain = q?.type === 'SELECT_NODE' && from?.type === 'EMPTY' && !q.where_clause && !(q.modifiers as unknown[]).length && !(q.group_expressions as unknown[]).length;
  const fn = items[0];
  if (!plain || items.length !== 1 || fn.class !== 'FUNCTION' || String(fn.function_name).toLowerCase() !== 'unnest' || (fn.children as unknown[]).length !== 1) return undefined;
  return { value: n.child, array: (fn.children as unknown[])[0] };
}

/** SQL's parameterless functions written without brackets, which DuckDB parses as column names. */
const KEYWORD_FUNCTIONS: Record<string, string> = {
  current_catalog: '__pg_current_database',
  current_user: '__pg_current_user',
  current_role: '__pg_current_user',
  session_user: '__pg_current_user',
  user: '__pg_current_user',
};

/**
 * `current_user` and the like as the catalog's identity (unless a dataset has a column of that name),
 * rewritten in place; returns the name written.
 */
function keywordFunction(n: Node, columns: ReadonlySet<string>): string | undefined {
  const names = n.column_names as string[];
  const macro = names.length === 1 ? KEYWORD_FUNCTIONS[names[0].toLowerCase()] : undefined;
  if (!macro || columns.has(names[0].toLowerCase())) return undefined;
  const alias = String(n.alias ?? '');
  for (const k of Object.keys(n)) delete n[k];
  Object.assign(n, {
    class: 'FUNCTION', type: 'FUNCTION', alias, function_name: macro, schema: '', catalog: '', children: [],
    filter: null, order_bys: { type: 'ORDER_MODIFIER', orders: [] }, distinct: false, is_operator: false, export_state: false,
  });
  return names[0].toLowerCase();
}

/**
 * A select item calling a renamed function (`version()` → `__pg_version()`) keeps PostgreSQL's column
 * name, the function's (clients read `SELECT version()`'s column as `version`).
 */
function nameRenamedColumns(value: unknown, renamedFrom: WeakMap<Node, string>): void {
  if (Array.isArray(value)) {
    for (const v of value) nameRenamedColumns(v, renamedFrom);
    return;
  }
  if (value === null || typeof value !== 'object') return;
  const n = value as Node;
  if (n.type === 'SELECT_NODE') {
    for (const item of (n.select_list as Node[] | undefined) ?? []) {
      const original = renamedFrom.get(item);
      if (original && !item.alias) item.alias = original;
    }
  }
  for (const v of Object.values(n)) nameRenamedColumns(v, renamedFrom);
}
