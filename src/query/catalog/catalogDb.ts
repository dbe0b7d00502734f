import { DuckDBInstance, quotedIdentifier, type DuckDBConnection, type DuckDBMaterializedResult } from '@duckdb/node-api';
import { DomainError, invalidInput, timedOut, tooLarge } from '../../errors.ts';
import type { ColumnType } from '../../model.ts';
import { DIALECT_SQL } from '../sql/dialect.ts';
import { pgSyntax } from './sqlText.ts';
import { answerColumns, applyColumnNames, pgColumnNames, pgColumnTypes, untagColumn, withTypedColumns } from './columnNames.ts';
import { announcedAs, dataRowEncoder, RowWriter } from '../results/pg.ts';
import { pgTypeOf, type PgType } from '../results/pgTypes.ts';
import { CATALOG_SQL } from './catalogSql.ts';
import { inspect, nsComparableWithTimestamptz } from './catalogRewrite.ts';
import { countParses, parseTree, serializeSql, treeJson } from '../sql/parseTree.ts';
import { withPrepared, type BoundParam } from '../sql/boundParams.ts';
import { checkNesting } from '../sql/sandbox.ts';
import { expandedSize, macroCostsOfDialect as macroCosts, MAX_EXPANDED_EXPRESSIONS } from '../sql/macroCost.ts';

/**
 * Catalog introspection without data: clients ask `pg_catalog`, `information_schema` and catalog
 * functions about tables and columns before any user query. Those statements run here, in a DuckDB of
 * their own that holds only EMPTY tables with the schemas of the datasets a key may read (in schema
 * `public`), DuckDB's own pg_catalog views, and the model of PostgreSQL 15's catalog for what we
 * expose (catalogSql.ts, settings.ts). It has no file access and no data, so whatever it is asked, it
 * can answer only names and types the key may see.
 *
 * It lives in a query worker process (worker.ts hands it `catalog` jobs; client.ts sends them), never
 * in the service: a catalog statement is held to the same query slots, per-key limits, time limit and
 * memory cap as a data statement, and to the same nesting and size checks (`parse` below).
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
  /**
   * Placeholders (`$n`) compared with a nanosecond time column: a timestamptz bound to one is sent as
   * its UTC wall-clock time (see nsComparableWithTimestamptz).
   */
  utcParams?: number[];
  /**
   * A catalog statement whose rewritten form (as it will run, in withTypedColumns' wrapper) passed the
   * nesting and size checks here: its run needs no parse for them (issue 35).
   */
  checked?: boolean;
}

export interface DatasetSchema {
  name: string;
  schema: Record<string, ColumnType>;
}

export interface CatalogLimits {
  /** DuckDB is interrupted past it (the service kills the worker soon after in any case). */
  timeoutMs: number;
  maxRows: number;
  /** Deepest nesting of queries (P_QUERY_MAX_DEPTH), as for data statements. */
  maxDepth: number;
}


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
  async classify(original: string, tree?: string): Promise<Statement> {
    const names = `${this.datasets()
      .map((d) => d.name)
      .join('\n')}\u0000${[...nsColumns(this.datasets())].join(',')}`;
    if (names !== this.classifiedFor) {
      this.classified.clear();
      this.classifiedFor = names;
    }
    const known = this.classified.get(original);
    if (known) return known;
    const statement = await this.classifyUncached(original, tree);
    // Bounded: a client sending ever new statements (literals inlined) must not grow it.
    if (this.classified.size >= 2000) this.classified.delete(this.classified.keys().next().value!);
    if (original.length <= 16_384) this.classified.set(original, statement);
    return statement;
  }

  /** `tree`: the service's parse of `pgSyntax(original)`, used instead of parsing it here. */
  private async classifyUncached(original: string, tree?: string): Promise<Statement> {
    const sql = pgSyntax(original);
    return this.withConn(async (conn) => {
      const ast = await parse(conn, sql, this.limits.maxDepth, tree);
      if (!ast) return { kind: 'data', sql };
      const datasets = new Set(this.datasets().map((d) => d.name.toLowerCase()));
      const names = pgColumnNames(ast, sql);
      const types = pgColumnTypes(ast);
      const found = inspect(ast, datasets, this.database, allColumns(this.datasets()));
      if (!found.catalog) return this.dataStatement(conn, ast, sql, original, found.rewritten);
      // A catalog answer's columns carry PostgreSQL's names and types (columnNames.ts).
      const named = applyColumnNames(names);
      const columns = answerColumns(ast, types);
      const text = named || found.rewritten || columns ? await deparse(conn, ast) : sql;
      // The checks its run would make, on the statement as it will run: no parse needed then.
      await checkStatement(columns ? asSubquery((ast.statements as Node[])[0]) : (ast.statements as Node[])[0], this.limits.maxDepth);
      return { kind: 'catalog', sql: columns ? withTypedColumns(text, columns) : text, checked: true };
    });
  }

  private async dataStatement(conn: DuckDBConnection, ast: Node, sql: string, original: string, rewritten: boolean): Promise<Statement> {
    if (sql !== original) return { kind: 'data', sql: original };
    // Data: `public.logs` (as Metabase and Superset write names) is the dataset `logs`; nanosecond time
    // columns compared with a timestamptz compare with its UTC wall-clock time.
    const ns = nsComparableWithTimestamptz(ast, nsColumns(this.datasets()));
    const text = rewritten || ns.rewritten ? await deparse(conn, ast) : sql;
    return { kind: 'data', sql: text, ...(ns.params.length ? { utcParams: ns.params } : {}) };
  }

  /** DuckDB types of a statement's `$n` parameters, by position (for parameters sent without a type). */
  async parameterTypes(sql: string): Promise<string[]> {
    return (await this.describe(sql)).params;
  }

  /** A statement's parameter and column types, from preparing it here (nothing runs). */
  async describe(original: string, tree?: string): Promise<{ params: string[]; paramTypes: PgType[]; columns: { name: string; type: PgType }[] }> {
    const sql = pgSyntax(original);
    return this.withConn(async (conn) => {
      const ast = await parse(conn, sql, this.limits.maxDepth, tree);
      const names = ast ? pgColumnNames(ast, sql) : new Map();
      const types = ast ? pgColumnTypes(ast) : undefined;
      const found = ast && inspect(ast, new Set(this.datasets().map((d) => d.name.toLowerCase())), this.database, allColumns(this.datasets()));
      // As classify() makes a catalog statement: the same names and types as when it runs.
      const named = Boolean(found && found.catalog && applyColumnNames(names));
      const typed = found && found.catalog ? answerColumns(ast, types) : undefined;
      const deparsed = ast && (found?.rewritten || named || typed) ? await deparse(conn, ast) : sql;
      const text = typed ? withTypedColumns(deparsed, typed) : deparsed;
      countParses('prepare');
      const prepared = await conn.prepare(text);
      try {
        const params: string[] = [];
        const paramTypes: PgType[] = [];
        for (let i = 1; i <= prepared.parameterCount; i++) {
          const t = prepared.parameterType(i);
          params.push(t.toString());
          paramTypes.push(pgTypeOf(t));
        }
        const columns = Array.from({ length: prepared.columnCount }, (_, i) => {
          const tagged = untagColumn(prepared.columnName(i));
          return { name: tagged.name, type: announcedAs(prepared.columnType(i), tagged.type) };
        });
        return { params, paramTypes, columns };
      } finally {
        prepared.destroySync();
      }
    });
  }

  /**
   * Runs a catalog statement; its (small) answer is whole before the first row is sent. `params`: values
   * DuckDB binds to its placeholders (`$1::regclass` is `__pg_regclass($1)` by then: a lookup of the value).
   */
  async run(sql: string, formats: number[], tree?: string, checked = false, params?: readonly BoundParam[]): Promise<{ fields: { name: string; type: PgType; format: number }[]; next: () => Promise<{ data: Buffer; rows: number } | undefined>; close: () => void }> {
    const result = await this.withConn(async (conn) => {
      try {
        if (!checked) await parse(conn, sql, this.limits.maxDepth, tree);
        countParses('prepare');
        if (params) return await withPrepared(conn, sql, params, (prepared) => prepared.run());
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
    const columns = result.columnNames().map((name, i) => {
      const tagged = untagColumn(name);
      return { name: tagged.name, type: announcedAs(types[i], tagged.type) };
    });
    const encode = dataRowEncoder(types, formats, columns.map((c) => c.type));
    let chunk = 0;
    return {
      fields: columns.map((c, i) => ({ ...c, format: format(i) })),
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

/**
 * The statement's parse tree, or undefined when DuckDB will not serialise it (not a SELECT, or a syntax
 * error), after the sandbox's checks of size: nesting depth and size once macros are expanded (deep
 * scalar subqueries take DuckDB's optimiser minutes, nested macros millions of expressions).
 */
async function parse(conn: DuckDBConnection, sql: string, maxDepth: number, tree?: string): Promise<Node | undefined> {
  // The service's tree of exactly `sql` when it sent one (the statement's one parse), else DuckDB's here.
  const ast = parseTree(tree ?? (await serializeSql(conn, sql, 'catalog')));
  if (ast.error || (ast.statements as Node[] | undefined)?.length !== 1) return undefined;
  await checkStatement((ast.statements as Node[])[0], maxDepth);
  return ast;
}

/** The sandbox's checks of size: nesting depth, and size once macros are expanded. */
async function checkStatement(statement: Node, maxDepth: number): Promise<void> {
  checkNesting(statement, maxDepth);
  if (expandedSize(statement, await macroCosts(), MAX_EXPANDED_EXPRESSIONS) > MAX_EXPANDED_EXPRESSIONS) {
    throw invalidInput(`the statement is too large once its macros are expanded: over ${MAX_EXPANDED_EXPRESSIONS} expressions`);
  }
}

/** A statement as withTypedColumns runs it: the FROM of `SELECT * FROM (statement) AS __pg_answer(…)`. */
function asSubquery(statement: Node): Node {
  return { node: { type: 'SELECT_NODE', select_list: [{ class: 'STAR', type: 'STAR' }], from_table: { type: 'SUBQUERY', subquery: statement } } };
}

async function deparse(conn: DuckDBConnection, ast: Node): Promise<string> {
  const json = treeJson(ast);
  const reader = await conn.runAndReadAll('SELECT json_deserialize_sql($1::JSON) AS sql', [json]);
  return String(reader.getRowObjects()[0].sql);
}

/** Names (lower case) of the TIMESTAMP_NS columns of these datasets. */
export function nsColumns(datasets: DatasetSchema[]): Set<string> {
  return new Set(datasets.flatMap((d) => Object.entries(d.schema).filter(([, t]) => t === 'TIMESTAMP_NS').map(([n]) => n.toLowerCase())));
}

/** Names (lower case) of every column of these datasets. */
function allColumns(datasets: DatasetSchema[]): Set<string> {
  return new Set(datasets.flatMap((d) => Object.keys(d.schema).map((n) => n.toLowerCase())));
}
