/**
 * Which files a query worker reads from a table it keeps instead of from Parquet (worker/fileTables.ts;
 * issue 37, small SQL): every file of a snapshot whose rows are small enough together. All or none:
 * a view reading some files from a table and the rest from Parquet measured no faster than Parquet
 * alone (the Parquet scan's fixed cost stays), so a larger snapshot reads Parquet as before.
 */
import { createHash } from 'node:crypto';
import { FILE_ID_COLUMN, fileTableColumnsSql, fileTableRowsSql, type FileTable, type Snapshot } from '../../storage/scan.ts';
import type { FileTableSpec } from '../worker/protocol.ts';

/** Each file's id in the file tables, by path: a path always names the same immutable file. */
const fileIds = new Map<string, number>();
let nextId = 1;

function fileId(file: string): number {
  let id = fileIds.get(file);
  if (id === undefined) {
    // Paths of files long gone would otherwise pile up; new ids keep counting, so none is reused.
    if (fileIds.size >= 100_000) fileIds.clear();
    id = nextId++;
    fileIds.set(file, id);
  }
  return id;
}

/**
 * A file's estimated bytes in a DuckDB table: twice the raw request bytes behind its rows when recorded,
 * else 30 times its Parquet bytes. Measured on the small-SQL bench's events (40,000 rows, 5 columns):
 * 4.4 MB as JSON, 0.22 MB as Parquet, 6.5 MB in a DuckDB table (duckdb_memory()).
 */
export function tableBytes(file: Pick<Snapshot['files'][number], 'bytes' | 'rawBytes'>): number {
  return file.rawBytes ? 2 * file.rawBytes : 30 * file.bytes;
}

/**
 * A table's own estimated bytes, by its column count: DuckDB holds a segment per column even for a few
 * rows (measured with duckdb_memory(): 100 rows of 100 columns 3.4 MB, of 500 columns 17 MB, ~34 KiB
 * a column), so a wide dataset's table costs megabytes before its first row.
 */
export const TABLE_BYTES_PER_COLUMN = 40 * 1024;

type SnapshotFile = Snapshot['files'][number];

/**
 * A file's part of the spec, kept with the snapshot's form of the file (the same object while the
 * catalog's entry is: storage/snapshot.ts) for the same table columns and link path: building every
 * file's SELECT for every query was about half the cost of building a small query's job (~6% of the
 * service's CPU per query in a profile).
 */
const fileRowsMemo = new WeakMap<SnapshotFile, { columns: string; path: string; rows: FileTableSpec['files'][number] }>();

function fileRows(snap: Snapshot, f: SnapshotFile, path: string, columns: string): FileTableSpec['files'][number] {
  const kept = fileRowsMemo.get(f);
  if (kept && kept.columns === columns && kept.path === path) return kept.rows;
  const id = fileId(f.path);
  const rows = { id, bytes: tableBytes(f), sql: fileTableRowsSql(snap, f, path, id) };
  fileRowsMemo.set(f, { columns, path, rows });
  return rows;
}

/**
 * The table the snapshot's files are read from, and what the worker loads into it; undefined when
 * `room` is 0, the snapshot has no file, reads series indexes, has a column named as the file id, or
 * the table and its files are estimated above `room`: what is left of half the worker's budget after the query's
 * other datasets (so one query's files always fit beside another's).
 */
export function fileTableFor(snap: Snapshot, pathFor: (file: string) => string, room: number): { table: FileTable; spec: FileTableSpec } | undefined {
  if (room <= 0 || !snap.files.length || snap.files.some((f) => f.index)) return undefined;
  if (Object.keys(snap.schema).some((n) => n.toLowerCase() === FILE_ID_COLUMN)) return undefined;
  const fixed = (Object.keys(snap.schema).length + 1) * TABLE_BYTES_PER_COLUMN;
  if (fixed + snap.files.reduce((sum, f) => sum + tableBytes(f), 0) > room) return undefined;
  const columns = fileTableColumnsSql(snap);
  // Per dataset and schema: a widened or new column makes a new table (the old one's rows were cast to other types).
  const name = `p_files_${createHash('sha1').update(`${snap.meta.name}\0${columns}`).digest('hex').slice(0, 16)}`;
  const files = snap.files.map((f) => fileRows(snap, f, pathFor(f.path), columns));
  return { table: { name, ids: files.map((f) => f.id) }, spec: { name, columns, bytes: fixed, files } };
}
