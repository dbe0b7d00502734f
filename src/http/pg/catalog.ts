import { DuckDBInstance, quotedIdentifier, type DuckDBConnection, type DuckDBMaterializedResult } from '@duckdb/node-api';
import { DomainError, invalidInput, timedOut, tooLarge } from '../../errors.ts';
import type { ColumnType } from '../../model.ts';
import { DIALECT_SQL } from '../../query/dialect.ts';
import { pgSyntax } from './sqlText.ts';
import { dataRowEncoder, pgTypeOf, RowWriter, type PgType } from '../../query/pgRows.ts';
import { CATALOG_SQL, RELATION_MACROS } from './catalogSql.ts';

/**
 * Catalog introspection without data: clients ask `pg_catalog`, `information_schema` and catalog
 * functions about tables and columns before any user query. Those statements run here, in a DuckDB of
 * their own that holds only EMPTY tables with the schemas of the datasets a key may read (in schema
 * `public`), DuckDB's own pg_catalog views, and the few views and macros clients need beyond them
 * (catalogSql.ts). It has no file access and no data, so whatever it is asked, it can answer only
 * names and types the key may see. One instance per set of readable datasets, shared by the
 * connections of keys with that scope, its tables brought up to date before each statement.
 *
 * It also classifies statements (catalog or data), rewrites what DuckDB does not read as PostgreSQL
 * does (`x::regclass`, `pg_catalog.`-qualified macros, `public.`-qualified dataset names), and
 * describes statements (their parameter and column types) without running them.
 */

type Node = Record<string, unknown>;

export interface Statement {
  kind: 'session' | 'catalog' | 'data';
  /** The statement as it will run (rewritten where needed). */
  sql: string;
}

export interface DatasetSchema {
  name: string;
  schema: Record<string, ColumnType>;
}

export interface CatalogLimits {
  timeoutMs: number;
  maxRows: number;
}

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

export class CatalogDb {
  private signature = '';
  private syncing: Promise<void> = Promise.resolve();
  refs = 0;

  private constructor(
    private readonly instance: DuckDBInstance,
    private readonly datasets: () => DatasetSchema[],
    private readonly limits: CatalogLimits,
    private readonly database: string,
  ) {}

  static async open(datasets: () => DatasetSchema[], limits: CatalogLimits): Promise<CatalogDb> {
    const instance = await DuckDBInstance.create(':memory:', { threads: '1' });
    const conn = await instance.connect();
    try {
      for (const stmt of DIALECT_SQL) await conn.run(stmt);
      await conn.run('CREATE SCHEMA public');
      for (const stmt of CATALOG_SQL) await conn.run(stmt);
      await conn.run(`SET memory_limit = '128MB'`);
      // Nothing spills to disk (and no directory of the service shows in its settings).
      await conn.run(`SET temp_directory = ''`);
      await conn.run('SET enable_external_access = false');
      await conn.run('SET autoinstall_known_extensions = false');
      await conn.run('SET autoload_known_extensions = false');
      await conn.run(`SET search_path = 'public,main'`);
      await conn.run('SET lock_configuration = true');
    } finally {
      conn.closeSync();
    }
    return new CatalogDb(instance, datasets, limits, 'memory');
  }

  close(): void {
    this.instance.closeSync();
  }

  /** Makes the `public` tables exactly the readable datasets, with their current columns. */
  private sync(conn: DuckDBConnection): Promise<void> {
    const wanted = this.datasets();
    const signature = JSON.stringify(wanted);
    if (signature === this.signature) return this.syncing;
    this.syncing = this.syncing.then(async () => {
      if (signature === this.signature) return;
      const existing = (await conn.runAndReadAll(`SELECT table_name FROM duckdb_tables() WHERE schema_name = 'public'`)).getRowObjects().map((r) => String(r.table_name));
      for (const t of existing) await conn.run(`DROP TABLE public.${quotedIdentifier(t)}`);
      for (const d of wanted) {
        const cols = Object.entries(d.schema);
        const body = cols.length ? cols.map(([n, t]) => `${quotedIdentifier(n)} ${t}`).join(', ') : '"p_timestamp" TIMESTAMP';
        await conn.run(`CREATE TABLE public.${quotedIdentifier(d.name)} (${body})`);
      }
      this.signature = signature;
    });
    return this.syncing;
  }

  private async withConn<T>(fn: (conn: DuckDBConnection) => Promise<T>): Promise<T> {
    const conn = await this.instance.connect();
    try {
      await conn.run(`SET search_path = 'public,main'`).catch(() => undefined);
      await this.sync(conn);
      const timer = setTimeout(() => conn.interrupt(), this.limits.timeoutMs);
      try {
        return await fn(conn);
      } finally {
        clearTimeout(timer);
      }
    } finally {
      conn.closeSync();
    }
  }

  /** Classifications by statement text, for the current set of datasets (cleared when it changes). */
  private classified = new Map<string, Statement>();
  private classifiedFor = '';

  /** Catalog or data, and the statement rewritten as it will run (remembered: clients repeat statements). */
  async classify(original: string): Promise<Statement> {
    const names = this.datasets()
      .map((d) => d.name)
      .join('\n');
    if (names !== this.classifiedFor) {
      this.classified.clear();
      this.classifiedFor = names;
    }
    const known = this.classified.get(original);
    if (known) return known;
    const statement = await this.classifyUncached(original);
    // Bounded: a client sending ever new statements (literals inlined) must not grow it.
    if (this.classified.size >= 2000) this.classified.delete(this.classified.keys().next().value!);
    if (original.length <= 16_384) this.classified.set(original, statement);
    return statement;
  }

  private async classifyUncached(original: string): Promise<Statement> {
    const sql = pgSyntax(original);
    return this.withConn(async (conn) => {
      const ast = await parse(conn, sql);
      if (!ast) return { kind: 'data', sql };
      const datasets = new Set(this.datasets().map((d) => d.name.toLowerCase()));
      const found = inspect(ast, datasets, this.database);
      if (found.catalog) return { kind: 'catalog', sql: found.rewritten ? await deparse(conn, ast) : sql };
      if (sql !== original) return { kind: 'data', sql: original };
      // Data: `public.logs` (as Metabase and Superset write names) is the dataset `logs`.
      return { kind: 'data', sql: found.rewritten ? await deparse(conn, ast) : sql };
    });
  }

  /** DuckDB types of a statement's `$n` parameters, by position (for parameters sent without a type). */
  async parameterTypes(sql: string): Promise<string[]> {
    return (await this.describe(sql)).params;
  }

  /** A statement's parameter and column types, from preparing it here (nothing runs). */
  async describe(original: string): Promise<{ params: string[]; paramTypes: PgType[]; columns: { name: string; type: PgType }[] }> {
    const sql = pgSyntax(original);
    return this.withConn(async (conn) => {
      const ast = await parse(conn, sql);
      const text = ast && inspect(ast, new Set(this.datasets().map((d) => d.name.toLowerCase())), this.database).rewritten ? await deparse(conn, ast) : sql;
      const prepared = await conn.prepare(text);
      try {
        const params: string[] = [];
        const paramTypes: PgType[] = [];
        for (let i = 1; i <= prepared.parameterCount; i++) {
          const t = prepared.parameterType(i);
          params.push(t.toString());
          paramTypes.push(pgTypeOf(t));
        }
        const columns = Array.from({ length: prepared.columnCount }, (_, i) => ({ name: prepared.columnName(i), type: pgTypeOf(prepared.columnType(i)) }));
        return { params, paramTypes, columns };
      } finally {
        prepared.destroySync();
      }
    });
  }

  /** Runs a catalog statement; its (small) answer is whole before the first row is sent. */
  async run(sql: string, formats: number[]): Promise<{ fields: { name: string; type: PgType; format: number }[]; next: () => Promise<{ data: Buffer; rows: number } | undefined>; close: () => void }> {
    const result = await this.withConn(async (conn) => {
      try {
        return (await conn.run(sql)) as DuckDBMaterializedResult;
      } catch (err) {
        const message = (err as Error).message;
        if (/interrupt/i.test(message)) throw timedOut(`the catalog statement exceeded the time limit of ${this.limits.timeoutMs} ms`);
        throw new DomainError('invalid', message);
      }
    });
    if (result.rowCount > this.limits.maxRows) throw tooLarge(`the catalog answer has more than ${this.limits.maxRows} rows`);
    const types = result.columnTypes();
    const format = (i: number) => (formats.length === 0 ? 0 : formats.length === 1 ? formats[0] : (formats[i] ?? 0));
    const encode = dataRowEncoder(types, formats);
    let chunk = 0;
    return {
      fields: result.columnNames().map((name, i) => ({ name, type: pgTypeOf(types[i]), format: format(i) })),
      next: async () => {
        if (chunk >= result.chunkCount) return undefined;
        const c = result.getChunk(chunk++);
        const w = new RowWriter();
        const rows = c.getRows();
        for (const row of rows) encode(w, row);
        return { data: w.take(), rows: rows.length };
      },
      close: () => undefined,
    };
  }
}

/** The statement's parse tree, or undefined when DuckDB will not serialise it (not a SELECT, or a syntax error). */
async function parse(conn: DuckDBConnection, sql: string): Promise<Node | undefined> {
  const reader = await conn.runAndReadAll('SELECT json_serialize_sql($1::VARCHAR) AS ast', [sql]);
  const ast = JSON.parse(String(reader.getRowObjects()[0].ast)) as Node;
  if (ast.error || (ast.statements as Node[] | undefined)?.length !== 1) return undefined;
  return ast;
}

async function deparse(conn: DuckDBConnection, ast: Node): Promise<string> {
  // Source positions are optional to the deserialiser (and some do not survive JSON.parse exactly).
  const json = JSON.stringify(ast, (k, v: unknown) => (k === 'query_location' ? undefined : v));
  const reader = await conn.runAndReadAll('SELECT json_deserialize_sql($1::JSON) AS sql', [json]);
  return String(reader.getRowObjects()[0].sql);
}

/**
 * Walks a parse tree: does it touch the catalog, and rewrites in place what DuckDB reads differently
 * (reports whether it did).
 */
export function inspect(ast: Node, datasets: ReadonlySet<string>, database: string): { catalog: boolean; rewritten: boolean } {
  let catalog = false;
  let rewritten = false;
  const visit = (value: unknown): void => {
    if (Array.isArray(value)) {
      value.forEach(visit);
      return;
    }
    if (value === null || typeof value !== 'object') return;
    const n = value as Node;
    if (n.type === 'BASE_TABLE') {
      const schema = String(n.schema_name ?? '').toLowerCase();
      const name = String(n.table_name ?? '').toLowerCase();
      if (String(n.catalog_name ?? '') && (String(n.catalog_name).toLowerCase() === database || !CATALOG_SCHEMAS.has(schema))) {
        // `db.public.logs`: any database name is this one.
        n.catalog_name = '';
        rewritten = true;
      }
      if (CATALOG_SCHEMAS.has(schema) || (!schema && name.startsWith('pg_') && !datasets.has(name))) {
        catalog = true;
        if (RELATION_MACROS.has(name) && (schema === 'pg_catalog' || !schema)) {
          const alias = String(n.alias || name);
          for (const k of Object.keys(n)) delete n[k];
          Object.assign(n, {
            type: 'TABLE_FUNCTION', alias, sample: null, column_name_alias: [], with_ordinality: 'WITHOUT_ORDINALITY',
            function: { class: 'FUNCTION', type: 'FUNCTION', alias: '', function_name: `__${name}`, schema: '', children: [], filter: null, order_bys: { type: 'ORDER_MODIFIER', orders: [] }, distinct: false, is_operator: false, export_state: false, catalog: '' },
          });
          rewritten = true;
          return;
        }
      } else if (schema === 'public') {
        n.schema_name = '';
        rewritten = true;
      }
    }
    if (n.class === 'COLUMN_REF') {
      // `pg_catalog.pg_namespace.nspname`, `public.logs.n`: the table is in FROM unqualified (or renamed).
      const names = n.column_names as string[];
      if (names.length >= 3 && (CATALOG_SCHEMAS.has(names[0].toLowerCase()) || names[0].toLowerCase() === 'public')) {
        n.column_names = names.slice(1);
        rewritten = true;
      }
    }
    if (n.type === 'TABLE_FUNCTION' && n.alias && !(n.column_name_alias as unknown[] | undefined)?.length) {
      // PostgreSQL: `FROM generate_series(…) s` names the column `s` too (a scalar function's alias).
      const fn = String((n.function as Node | undefined)?.function_name ?? '').toLowerCase();
      if (fn === 'generate_series' || fn === 'unnest') {
        n.column_name_alias = [n.alias];
        rewritten = true;
      } else if (SCALAR_IN_FROM.has(fn)) {
        // `FROM string_to_array(…) s`: a scalar function in FROM is a one-row table whose column is `s`.
        const call = { ...(n.function as Node), alias: String(n.alias) };
        const alias = n.alias;
        for (const k of Object.keys(n)) delete n[k];
        Object.assign(n, {
          type: 'SUBQUERY', alias, sample: null, column_name_alias: [],
          subquery: { node: { type: 'SELECT_NODE', modifiers: [], cte_map: { map: [] }, select_list: [call], from_table: { type: 'EMPTY', alias: '', sample: null }, where_clause: null, group_expressions: [], group_sets: [], aggregate_handling: 'STANDARD_HANDLING', having: null, sample: null, qualify: null } },
        });
        rewritten = true;
      }
    }
    if (n.class === 'FUNCTION') {
      const name = String(n.function_name ?? '').toLowerCase();
      const schema = String(n.schema ?? '').toLowerCase();
      // No client introspection needs DuckDB's own metadata, settings or file functions: they would
      // show the service's paths and extensions rather than the datasets.
      if (CATALOG_DENIED_PREFIXES.some((p) => name.startsWith(p))) throw invalidInput(`function "${name}" is not allowed`);
      if (schema === 'pg_catalog' || CATALOG_FUNCTIONS.has(name) || CATALOG_FUNCTION_PREFIXES.some((p) => name.startsWith(p))) catalog = true;
      if (schema === 'pg_catalog' && MAIN_MACROS.has(name)) {
        n.schema = '';
        rewritten = true;
      }
      if (name === 'to_timestamp' && (n.children as Node[]).length === 2) {
        // Superset's PostgreSQL dialect writes times as to_timestamp(text, 'YYYY-MM-DD HH24:MI:SS.US').
        const fmt = (n.children as Node[])[1];
        const value = (fmt?.value as Node | undefined)?.value;
        if (fmt?.class === 'CONSTANT' && typeof value === 'string') {
          (fmt.value as Node).value = strptimeFormat(value);
          n.function_name = 'strptime';
          n.schema = '';
          rewritten = true;
        }
      }
      const renamed = name === 'current_setting' ? ((n.children as unknown[]).length === 2 ? '__pg_setting2' : '__pg_setting') : FUNCTION_RENAMES[name];
      if (renamed && (schema === '' || schema === 'pg_catalog')) {
        n.function_name = renamed;
        n.schema = '';
        rewritten = true;
      }
    }
    if (n.class === 'CAST') {
      const info = (n.cast_type as Node | undefined)?.type_info as Node | null | undefined;
      const typeName = String(info?.name ?? '').toLowerCase();
      const macro = REG_CASTS[typeName];
      if (info?.type === 'UNBOUND_TYPE_INFO' && macro) {
        catalog = true;
        rewritten = true;
        const child = n.child;
        for (const k of Object.keys(n)) delete n[k];
        Object.assign(n, {
          class: 'FUNCTION', type: 'FUNCTION', alias: '', function_name: macro, schema: '', catalog: '', children: [child],
          filter: null, order_bys: { type: 'ORDER_MODIFIER', orders: [] }, distinct: false, is_operator: false, export_state: false,
        });
      }
    }
    for (const v of Object.values(n)) visit(v);
  };
  visit(ast);
  return { catalog, rewritten };
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
  json_build_object: 'json_object',
  jsonb_build_object: 'json_object',
};

/** Macros of catalogSql.ts in `main` that clients call qualified with `pg_catalog.`. */
const MAIN_MACROS = new Set(['pg_get_userbyid', 'pg_encoding_to_char', 'pg_get_indexdef', 'pg_get_partkeydef', 'pg_total_relation_size', 'pg_relation_size', 'pg_table_size', 'pg_get_function_identity_arguments', 'pg_get_serial_sequence', 'pg_get_statisticsobjdef_columns', 'pg_get_triggerdef', 'pg_get_ruledef', 'pg_backend_pid', 'pg_is_in_recovery', 'pg_get_function_result', 'pg_get_function_arguments', 'quote_ident', 'pg_relation_is_publishable']);

/** Shares catalog databases between connections whose keys read the same datasets. */
export class CatalogPool {
  private byScope = new Map<string, Promise<CatalogDb>>();

  constructor(
    private readonly datasets: (canRead: (name: string) => boolean) => DatasetSchema[],
    private readonly limits: CatalogLimits,
  ) {}

  async acquire(scope: string, canRead: (name: string) => boolean): Promise<{ db: CatalogDb; release: () => void }> {
    let entry = this.byScope.get(scope);
    if (!entry) {
      entry = CatalogDb.open(() => this.datasets(canRead), this.limits);
      this.byScope.set(scope, entry);
      entry.catch(() => this.byScope.delete(scope));
    }
    const db = await entry;
    db.refs++;
    let released = false;
    return {
      db,
      release: () => {
        if (released) return;
        released = true;
        if (--db.refs === 0 && this.byScope.get(scope) === entry) {
          this.byScope.delete(scope);
          db.close();
        }
      },
    };
  }
}
