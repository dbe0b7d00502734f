import { quotedIdentifier as sqlIdent } from '@duckdb/node-api';
import type { ColumnType } from '../model.ts';
import { castProjection, listLiteral } from '../duckdb.ts';
import { walScanSql } from './files/parquetWriter.ts';
import type { DatasetMeta, Snapshot } from './engine.ts';

export type { DatasetMeta, Snapshot };
/** The trace-id index of traces files (traceIndex.ts), for the trace query service. */
export { bloomMayHold } from './files/traceIndex.ts';
export { SERIES_MAX_TIME, SERIES_MIN_TIME, seriesIndexColumns, seriesRelationSql } from './files/seriesIndex.ts';

/**
 * What queries see of storage: find a dataset by name, and take a consistent snapshot of its rows in a
 * time range (held until released). The query layer imports nothing else from storage.
 */
export interface TableSource {
  /** By name (SQL names are case-insensitive); a miss looks in the store for one created elsewhere. */
  resolve(name: string, caseInsensitive?: boolean): Promise<DatasetMeta | undefined>;
  snapshot(name: string, startMs: number, endMs: number): Promise<Snapshot>;
  /** A snapshot whose files are read through their series indexes where they can be (seriesIndex.ts). */
  seriesSnapshot(name: string, startMs: number, endMs: number): Promise<Snapshot>;
  /** A series index a query could not read: its data file is read instead from then on. */
  seriesIndexDamaged(name: string, dataKey: string, reason: string): void;
  /** A data file of a snapshot that could not be decoded: set it aside (see StorageEngine). */
  setAsideDamaged(name: string, key: string, reason: string): Promise<void>;
}

/** A timestamp literal DuckDB reads exactly, from epoch milliseconds. */
export function timestampLiteral(ms: number): string {
  return `TIMESTAMP '${new Date(ms).toISOString().replace('T', ' ').replace('Z', '')}'`;
}

/**
 * TIMESTAMP_NS holds 1677-09-21 to 2262-04-11 only: a bound beyond that is no bound for such a column,
 * and its literal could not be converted to compare with it ("Could not convert Timestamp(US) to
 * Timestamp(NS)": every query over the whole range of an OTLP or remote-write dataset's unflushed rows).
 */
const NS_MIN_MS = -9_223_372_036_854;
const NS_MAX_MS = 9_223_372_036_854;

/**
 * SQL expressions standing for the range's bounds in a scan, in place of its literals: a caller that
 * sets their values before each statement (the query worker's session variables) keeps one view per
 * file set across ranges. Each must have the value `timestampLiteral` would give.
 */
export interface RangeBounds {
  start: string;
  end: string;
}

/** `column` in [startMs, endMs), leaving out a bound its type cannot reach. */
function rangeCondition(column: string, type: ColumnType | undefined, startMs: number, endMs: number, bounds?: RangeBounds): string {
  const ns = type === 'TIMESTAMP_NS';
  const out: string[] = [];
  if (!ns || startMs > NS_MIN_MS) out.push(`${column} >= ${bounds?.start ?? timestampLiteral(startMs)}`);
  if (!ns || endMs <= NS_MAX_MS) out.push(`${column} < ${bounds?.end ?? timestampLiteral(endMs)}`);
  return out.length ? out.join(' AND ') : 'true';
}

/**
 * The one scan seam between queries and storage: the SELECT that yields a dataset's rows in
 * [startMs, endMs) — its Parquet files overlapping the range plus its unflushed WAL rows, every column
 * cast to the dataset's current type (files written before a widening, or before a column existed,
 * read correctly), rows outside the range filtered out. `pathFor` maps each local file to the path
 * the reader sees (a query worker reads hard links in its own directory).
 *
 * Only files that straddle a bound are filtered: the catalog's time range proves every row of the
 * others is inside, and a filter there would make DuckDB read and test the time column of every row
 * (measured: `count(*)` over 1M rows went from 2.4 ms to 9 ms, since it otherwise needs no column at
 * all; every query reading the time column paid for the test too). Files keep their time order: those
 * crossing the start, those inside, those crossing the end, then the WAL. With `bounds`, the range's
 * values are left to them: the text then depends only on which files straddle which bound. With
 * `table`, every file's rows are read from a table holding them (`fileTableRowsSql`, each row tagged
 * with its file's id), filtered by file and range, instead of from Parquet; the WAL is read as always.
 */
export function scanSql(snap: Snapshot, startMs: number, endMs: number, pathFor: (file: string) => string = (f) => f, bounds?: RangeBounds, table?: FileTable): string {
  const columns = scanColumns(snap);
  const t = sqlIdent(snap.meta.timeColumn);
  const range = rangeCondition(t, snap.schema[snap.meta.timeColumn], startMs, endMs, bounds);
  const parts: string[] = [];
  if (table) parts.push(`SELECT * EXCLUDE (${FILE_ID_COLUMN}) FROM ${table.name} WHERE ${FILE_ID_COLUMN} IN (${table.ids.join(', ')}) AND ${range}`);
  // minMs/maxMs are the floor of the file's first and last time in ms: maxMs + 1 is past every row.
  const head = snap.files.filter((f) => f.minMs < startMs);
  const inside = snap.files.filter((f) => f.minMs >= startMs && f.maxMs + 1 <= endMs);
  const tail = snap.files.filter((f) => f.minMs >= startMs && f.maxMs + 1 > endMs);
  const read = (files: Snapshot['files'], filter: string) => {
    if (!files.length) return;
    const first = files[0].columns;
    const sameColumns = files.every((f) => f.columns === first || (f.columns.length === first.length && f.columns.every((c, i) => c === first[i])));
    const present = new Set(sameColumns ? first : files.flatMap((f) => f.columns));
    parts.push(
      `SELECT ${castProjection(columns, present)} FROM read_parquet(${listLiteral(files.map((f) => pathFor(f.path)))}, hive_partitioning = false` +
        `${sameColumns ? '' : ', union_by_name = true'})${filter}`,
    );
  };
  if (!table) {
    read(head, ` WHERE ${range}`);
    read(inside, '');
    read(tail, ` WHERE ${range}`);
  }
  if (snap.segments.length) {
    parts.push(`SELECT * FROM (${walScanSql(snap.segments.map((s) => pathFor(s.path)), columns, snap.meta.timeColumn)}) WHERE ${range}`);
  }
  if (!parts.length) parts.push(`SELECT ${castProjection(columns, new Set())} WHERE false`);
  return parts.join(' UNION ALL ');
}

/** The scan's columns and types: the dataset's schema (a dataset that never received a row still has its time column). */
function scanColumns(snap: Snapshot): [string, ColumnType][] {
  const columns = Object.entries(snap.schema) as [string, ColumnType][];
  if (!columns.length) columns.push([snap.meta.timeColumn, 'TIMESTAMP']);
  return columns;
}

/** The column of a file table (`FileTable`) naming the file a row came from. */
export const FILE_ID_COLUMN = 'p_file_table_id';

/**
 * A table a caller filled with the rows of a snapshot's files, each as `fileTableRowsSql` gives them
 * (cast to the dataset's current types, as `scanSql` reads them from Parquet), tagged with the file's
 * id in FILE_ID_COLUMN: `ids` are the snapshot's files' ids.
 */
export interface FileTable {
  name: string;
  ids: number[];
}

/** The column definitions of a file table for this snapshot's schema (its rows' types, then the file id). */
export function fileTableColumnsSql(snap: Snapshot): string {
  return [...scanColumns(snap).map(([n, type]) => `${sqlIdent(n)} ${type}`), `${FILE_ID_COLUMN} INTEGER`].join(', ');
}

/** One file's rows for a file table: exactly what `scanSql` reads of it (every column cast the same way), and its id. */
export function fileTableRowsSql(snap: Snapshot, file: Snapshot['files'][number], path: string, id: number): string {
  return `SELECT ${castProjection(scanColumns(snap), new Set(file.columns))}, ${id} FROM read_parquet(${listLiteral([path])}, hive_partitioning = false)`;
}
