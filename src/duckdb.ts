import { DuckDBInstance, quotedIdentifier, quotedString, type DuckDBConnection } from '@duckdb/node-api';
import { log } from './log.ts';
import type { ColumnType } from './model.ts';

/**
 * DuckDB helpers shared by storage (flush, compaction) and queries: quoting (the library's own), the
 * column lists and casts both build, and the service's own sandboxed instance.
 */

/** SQL string literal. */
export const sqlString = quotedString;
/** SQL identifier, always quoted so any column name (dots, spaces, keywords) works. */
export const sqlIdent = quotedIdentifier;

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
 * The service's own DuckDB instance: flushes (WAL → Parquet), compaction, and parsing user SQL (parse
 * only: user SQL runs in query worker processes, see src/query/worker/worker.ts). Its memory budget is its
 * own, so no query can make a flush fail for lack of memory. Only the data directory is reachable,
 * external access is off, and the configuration is locked.
 */
export async function openDuckDB(opts: { dataDir: string; threads: number; memoryLimit: string; tempDir: string }): Promise<DuckDBInstance> {
  const instance = await DuckDBInstance.create(':memory:', { threads: String(opts.threads) });
  const conn = await instance.connect();
  try {
    const dir = opts.dataDir.endsWith('/') ? opts.dataDir : `${opts.dataDir}/`;
    await conn.run(`SET memory_limit = ${sqlString(opts.memoryLimit)}`);
    // Memory goes back after a flush or a compaction: DuckDB hands its allocator's free memory to the
    // OS after any task that peaked over 16 MiB (default 128 MiB, which kept ~1 GB after a burst), and
    // a background thread returns the rest as it ages.
    await conn.run(`SET allocator_flush_threshold = '16MiB'`);
    await conn.run(`SET allocator_bulk_deallocation_flush_threshold = '16MiB'`);
    await conn.run(`SET allocator_background_threads = true`);
    // DuckDB's cache of the bytes it reads from files (on by default) kept ~25 MB of Parquet and WAL
    // data after a burst: the storage instance reads each file once (a flush, a merge), so it only
    // costs memory here.
    await conn.run(`SET enable_external_file_cache = false`);
    await conn.run(`SET temp_directory = ${sqlString(opts.tempDir)}`);
    await conn.run(`SET allowed_directories = [${sqlString(dir)}]`);
    await conn.run(`SET enable_external_access = false`);
    await conn.run(`SET autoinstall_known_extensions = false`);
    // Stored Parquet files never change once written, so their footers can be cached across queries.
    await conn.run(`SET parquet_metadata_cache = true`);
    await conn.run(`SET autoload_known_extensions = false`);
    await conn.run(`SET lock_configuration = true`);
  } finally {
    conn.closeSync();
  }
  return instance;
}

/**
 * The storage DuckDB, closed after `idleMs` without use and opened again by the next user. Between
 * bursts it held 37–111 MB the service no longer needed (DuckDB's file cache, its allocator's arenas,
 * its caches), which only closing the instance gives back; opening one again takes 10–40 ms. Nothing
 * lives in the instance across uses (each flush's temporary table is its own connection's), so a
 * reopened instance works as the first did. An instance is never closed while a connection is open.
 */
export class IdleClosingDuckDB {
  private instance: DuckDBInstance | undefined;
  private opening: Promise<DuckDBInstance> | undefined;
  private users = 0;
  private timer: NodeJS.Timeout | undefined;
  /** release() was called: close when the last connection closes. */
  private releasing = false;
  /** Instances opened so far. */
  opens = 0;

  constructor(
    private readonly open: () => Promise<DuckDBInstance>,
    /** 0: never closed. */
    private readonly idleMs: number,
  ) {}

  get isOpen(): boolean {
    return this.instance !== undefined;
  }

  async use<T>(fn: (conn: DuckDBConnection) => Promise<T>): Promise<T> {
    this.users++;
    clearTimeout(this.timer);
    try {
      const instance = this.instance ?? (await (this.opening ??= this.openInstance()));
      const conn = await instance.connect();
      try {
        return await fn(conn);
      } finally {
        conn.closeSync();
      }
    } finally {
      if (--this.users === 0 && this.releasing) this.closeIfIdle();
      else if (this.users === 0 && this.idleMs > 0) this.timer = setTimeout(() => this.closeIfIdle(), this.idleMs).unref();
    }
  }

  private async openInstance(): Promise<DuckDBInstance> {
    try {
      this.instance = await this.open();
      this.opens++;
      return this.instance;
    } finally {
      this.opening = undefined;
    }
  }

  /**
   * Closes the instance as soon as no connection is open on it (now, or when the last one closes),
   * rather than after `idleMs`: called after a compaction merge, whose memory DuckDB kept until the
   * instance closed (~120 MB after the merges of issue 18's workload, flat for the 30 s idle time;
   * docs/memory.md). The next user opens a new one (10–40 ms). A no-op with `idleMs` 0 (kept open).
   */
  release(): void {
    // Nothing open and nothing opening: nothing to let go (the next use keeps it for the idle time).
    if (this.idleMs === 0 || (!this.instance && this.users === 0)) return;
    this.releasing = true;
    if (this.users === 0) this.closeIfIdle();
  }

  private closeIfIdle(): void {
    if (this.users > 0 || !this.instance) return;
    this.releasing = false;
    clearTimeout(this.timer);
    const instance = this.instance;
    this.instance = undefined;
    // Run from a timer: a failure to close must not take the service down (the next use opens anew).
    try {
      instance.closeSync();
    } catch (err) {
      log.warn('storage DuckDB: closing the idle instance failed', { error: err as Error });
    }
  }
}

/** Lets the storage DuckDB go as soon as it is unused (IdleClosingDuckDB.release); another instance is left open. */
export function releaseDuckDB(db: DuckDBSource): void {
  if (db instanceof IdleClosingDuckDB) db.release();
}

/** A DuckDB instance, or the storage one that is opened on use (IdleClosingDuckDB). */
export type DuckDBSource = DuckDBInstance | IdleClosingDuckDB;

export async function withConnection<T>(db: DuckDBSource, fn: (conn: DuckDBConnection) => Promise<T>): Promise<T> {
  if (db instanceof IdleClosingDuckDB) return db.use(fn);
  const conn = await db.connect();
  try {
    return await fn(conn);
  } finally {
    conn.closeSync();
  }
}
