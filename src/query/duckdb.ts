import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import type { ColumnType } from '../ingest/types.ts';
import { DIALECT_SQL } from './dialect.ts';

/** SQL string literal. */
export const sqlString = (s: string) => `'${s.replaceAll("'", "''")}'`;
/** SQL identifier, always quoted so any column name (dots, spaces, keywords) works. */
export const sqlIdent = (s: string) => `"${s.replaceAll('"', '""')}"`;

/** `{'col': 'TYPE', …}` for read_json's `columns` parameter. */
export function columnsStruct(columns: [string, ColumnType][]): string {
  return `{${columns.map(([name, type]) => `${sqlString(name)}: ${sqlString(type)}`).join(', ')}}`;
}

/**
 * `CAST(col AS type) AS col, …` for every column of a schema; a column a file does not have
 * (it was added after the file was written) reads as a typed NULL.
 */
export function castProjection(columns: [string, ColumnType][], present: Set<string>): string {
  return columns
    .map(([n, type]) => `CAST(${present.has(n) ? sqlIdent(n) : 'NULL'} AS ${type}) AS ${sqlIdent(n)}`)
    .join(', ');
}

export const listLiteral = (items: string[]) => `[${items.map(sqlString).join(', ')}]`;

/**
 * The one DuckDB instance of the process, used for flushing (WAL → Parquet) and for queries.
 * It is sandboxed before any user SQL can run: only the data directory is reachable, external access
 * (other files, URLs, extensions) is off, and the configuration is locked so SQL cannot undo it.
 */
export async function openDuckDB(opts: { dataDir: string; threads: number; memoryLimit: string; tempDir: string }): Promise<DuckDBInstance> {
  const instance = await DuckDBInstance.create(':memory:', { threads: String(opts.threads) });
  const conn = await instance.connect();
  try {
    const dir = opts.dataDir.endsWith('/') ? opts.dataDir : `${opts.dataDir}/`;
    await conn.run(`SET memory_limit = ${sqlString(opts.memoryLimit)}`);
    await conn.run(`SET temp_directory = ${sqlString(opts.tempDir)}`);
    await conn.run(`SET allowed_directories = [${sqlString(dir)}]`);
    await conn.run(`SET enable_external_access = false`);
    await conn.run(`SET autoinstall_known_extensions = false`);
    // Stored Parquet files never change once written, so their footers can be cached across queries.
    await conn.run(`SET parquet_metadata_cache = true`);
    await conn.run(`SET autoload_known_extensions = false`);
    // DataFusion functions Parseable dashboards use (src/query/dialect.ts), visible to every connection.
    for (const sql of DIALECT_SQL) await conn.run(sql);
    await conn.run(`SET lock_configuration = true`);
  } finally {
    conn.closeSync();
  }
  return instance;
}

export async function withConnection<T>(instance: DuckDBInstance, fn: (conn: DuckDBConnection) => Promise<T>): Promise<T> {
  const conn = await instance.connect();
  try {
    return await fn(conn);
  } finally {
    conn.closeSync();
  }
}
