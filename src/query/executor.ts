import type { DuckDBConnection, DuckDBInstance, DuckDBResult } from '@duckdb/node-api';
import type { ColumnType } from '../ingest/types.ts';
import type { DatasetRegistry, Snapshot } from '../storage/datasets.ts';
import { walScanSql } from '../storage/parquetWriter.ts';
import { castProjection, listLiteral, sqlIdent } from './duckdb.ts';
import { planQuery } from './plan.ts';
import { rowShaper } from './results.ts';
import { timestampLiteral } from './time.ts';
import { DomainError, invalidInput, timedOut, notFound, forbidden } from '../errors.ts';

export interface QueryRequest {
  sql: string;
  startMs: number;
  endMs: number;
  sendNull: boolean;
  /** May this caller read the dataset? */
  canRead: (dataset: string) => boolean;
  timeoutMs: number;
}

/**
 * The SELECT behind one dataset's view: its Parquet files in range plus its unflushed WAL rows, every
 * column cast to the dataset's current type (so files written before a widening or before a column
 * existed read correctly), and rows outside [start, end) of the time column filtered out.
 */
export function datasetViewSql(snap: Snapshot, startMs: number, endMs: number): string {
  const columns = Object.entries(snap.schema) as [string, ColumnType][];
  // A dataset that never received a row still has its time column.
  if (!columns.length) columns.push([snap.meta.timeColumn, 'TIMESTAMP']);
  const t = sqlIdent(snap.meta.timeColumn);
  const range = `${t} >= ${timestampLiteral(startMs)} AND ${t} < ${timestampLiteral(endMs)}`;
  const parts: string[] = [];
  if (snap.files.length) {
    const present = new Set(snap.files.flatMap((f) => f.columns));
    const sameColumns = snap.files.every((f) => f.columns.length === snap.files[0].columns.length && f.columns.every((c, i) => c === snap.files[0].columns[i]));
    parts.push(
      `SELECT ${castProjection(columns, present)} FROM read_parquet(${listLiteral(snap.files.map((f) => f.path))}, hive_partitioning = false` +
        `${sameColumns ? '' : ', union_by_name = true'}) WHERE ${range}`,
    );
  }
  if (snap.segments.length) {
    parts.push(`SELECT * FROM (${walScanSql(snap.segments.map((s) => s.path), columns, snap.meta.timeColumn)}) WHERE ${range}`);
  }
  if (!parts.length) parts.push(`SELECT ${castProjection(columns, new Set())} WHERE false`);
  return parts.join(' UNION ALL ');
}

export interface PreparedQuery {
  conn: DuckDBConnection;
  sql: string;
  timeoutMs: number;
  sendNull: boolean;
  release: () => void;
}

/** Plans the query, checks permissions, and binds each dataset it names to a temporary view. */
export async function prepareQuery(duck: DuckDBInstance, registry: DatasetRegistry, req: QueryRequest): Promise<PreparedQuery> {
  const conn = await duck.connect();
  const releases: (() => void)[] = [];
  const release = () => {
    for (const r of releases.splice(0)) r();
    conn.closeSync();
  };
  try {
    const plan = await planQuery(conn, req.sql);
    const metas = plan.tables.map((table) => {
      const meta = registry.find(table, true);
      if (!meta) throw notFound(`dataset "${table}" does not exist`);
      if (!req.canRead(meta.name)) throw forbidden(`this API key may not read dataset "${meta.name}"`);
      return meta;
    });
    for (const meta of metas) {
      const snap = await registry.snapshot(meta.name, req.startMs, req.endMs);
      releases.push(snap.release);
      await conn.run(`CREATE OR REPLACE TEMP VIEW ${sqlIdent(meta.name)} AS ${datasetViewSql(snap, req.startMs, req.endMs)}`);
    }
    return { conn, sql: req.sql, timeoutMs: req.timeoutMs, sendNull: req.sendNull, release };
  } catch (err) {
    release();
    throw err;
  }
}

function asDomainError(err: unknown, expired: boolean, timeoutMs: number): Error {
  if (err instanceof DomainError) return err;
  if (expired) return timedOut(`query exceeded the time limit of ${timeoutMs} ms (P_QUERY_TIMEOUT)`);
  return invalidInput((err as Error).message);
}

/** Runs with the time limit: on expiry the connection is interrupted. */
async function withTimeout<T>(q: PreparedQuery, work: () => Promise<T>, onTimeout?: () => void): Promise<T> {
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    q.conn.interrupt();
    onTimeout?.();
  }, q.timeoutMs);
  try {
    return await work();
  } catch (err) {
    throw asDomainError(err, timedOut, q.timeoutMs);
  } finally {
    clearTimeout(timer);
  }
}

export async function runQuery(q: PreparedQuery): Promise<{ fields: string[]; records: Record<string, unknown>[] }> {
  try {
    return await withTimeout(q, async () => {
      const reader = await q.conn.runAndReadAll(q.sql);
      const fields = reader.columnNames();
      const shape = rowShaper(fields, reader.columnTypes().map((t) => t.toString()), q.sendNull);
      return { fields, records: reader.getRowObjectsJson().map(shape) };
    });
  } finally {
    q.release();
  }
}

/** Streams rows as they are produced (NDJSON); the connection is released when the stream ends. */
export async function streamQuery(q: PreparedQuery): Promise<{ fields: string[]; rows: AsyncIterable<Record<string, unknown>[]> }> {
  let result: DuckDBResult;
  try {
    result = await withTimeout(q, () => q.conn.stream(q.sql));
  } catch (err) {
    q.release();
    throw err;
  }
  const fields = result.columnNames();
  const shape = rowShaper(fields, result.columnTypes().map((t) => t.toString()), q.sendNull);
  async function* rows() {
    const timer = setTimeout(() => q.conn.interrupt(), q.timeoutMs);
    try {
      for await (const batch of result.yieldRowObjectJson()) yield batch.map(shape);
    } finally {
      clearTimeout(timer);
      q.release();
    }
  }
  return { fields, rows: rows() };
}
