import { quotedIdentifier as sqlIdent } from '@duckdb/node-api';
import type { ColumnType } from '../model.ts';
import { castProjection, listLiteral } from '../duckdb.ts';
import { walScanSql } from './parquetWriter.ts';
import type { DatasetMeta, Snapshot } from './engine.ts';

export type { DatasetMeta, Snapshot };

/**
 * What queries see of storage: find a dataset by name, and take a consistent snapshot of its rows in a
 * time range (held until released). The query layer imports nothing else from storage.
 */
export interface TableSource {
  /** By name (SQL names are case-insensitive); a miss looks in the store for one created elsewhere. */
  resolve(name: string, caseInsensitive?: boolean): Promise<DatasetMeta | undefined>;
  snapshot(name: string, startMs: number, endMs: number): Promise<Snapshot>;
}

/** A timestamp literal DuckDB reads exactly, from epoch milliseconds. */
export function timestampLiteral(ms: number): string {
  return `TIMESTAMP '${new Date(ms).toISOString().replace('T', ' ').replace('Z', '')}'`;
}

/**
 * The one scan seam between queries and storage: the SELECT that yields a dataset's rows in
 * [startMs, endMs) — its Parquet files overlapping the range plus its unflushed WAL rows, every column
 * cast to the dataset's current type (files written before a widening, or before a column existed,
 * read correctly), rows outside the range filtered out. `pathFor` maps each local file to the path
 * the reader sees (a query worker reads hard links in its own directory).
 */
export function scanSql(snap: Snapshot, startMs: number, endMs: number, pathFor: (file: string) => string = (f) => f): string {
  const columns = Object.entries(snap.schema) as [string, ColumnType][];
  // A dataset that never received a row still has its time column.
  if (!columns.length) columns.push([snap.meta.timeColumn, 'TIMESTAMP']);
  const t = sqlIdent(snap.meta.timeColumn);
  const range = `${t} >= ${timestampLiteral(startMs)} AND ${t} < ${timestampLiteral(endMs)}`;
  const parts: string[] = [];
  if (snap.files.length) {
    const present = new Set(snap.files.flatMap((f) => f.columns));
    const first = snap.files[0].columns;
    const sameColumns = snap.files.every((f) => f.columns.length === first.length && f.columns.every((c, i) => c === first[i]));
    parts.push(
      `SELECT ${castProjection(columns, present)} FROM read_parquet(${listLiteral(snap.files.map((f) => pathFor(f.path)))}, hive_partitioning = false` +
        `${sameColumns ? '' : ', union_by_name = true'}) WHERE ${range}`,
    );
  }
  if (snap.segments.length) {
    parts.push(`SELECT * FROM (${walScanSql(snap.segments.map((s) => pathFor(s.path)), columns, snap.meta.timeColumn)}) WHERE ${range}`);
  }
  if (!parts.length) parts.push(`SELECT ${castProjection(columns, new Set())} WHERE false`);
  return parts.join(' UNION ALL ');
}
