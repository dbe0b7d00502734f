import * as fs from 'node:fs/promises';
import { quotedIdentifier, quotedString } from '@duckdb/node-api';
import { withConnection, type DuckDBSource } from '../../duckdb.ts';
import { log } from '../../log.ts';
import { SERIES_MAX_TIME, SERIES_MIN_TIME, type Snapshot } from '../../storage/scan.ts';

/*
 * What the in-process label index (labelIndex.ts) reads, each once: a data file's label sets with
 * their first and last time in it from its series index sidecar, and a sealed WAL segment's label sets
 * with the times of their rows.
 */

/** Where label sets are interned (their ids), and the estimated bytes held. */
export interface Interner {
  intern(pairs: [string, string][]): number;
  bytes: number;
}

/** A label column of the dataset's schema and the label it holds (storage.ts labelColumns), sorted by label. */
export type Columns = { label: string; column: string }[];

export interface FileLabels {
  key: string;
  /** The file's own time range (the catalog's), to tell a file that left the catalog from one out of range. */
  minMs: number;
  maxMs: number;
  ids: Int32Array;
  lo: Float64Array;
  hi: Float64Array;
}

export interface SegmentLabels {
  ids: Int32Array;
  /** Per label set, its rows' times, sorted. */
  times: Float64Array[];
}

/** Estimated bytes: a label set (strings are UTF-16, plus the objects and the map entry). */
export const SET_OVERHEAD = 120;
export const PAIR_OVERHEAD = 48;
/** Per label set listed by a file (id, first and last time) or a WAL segment (id, array). */
const FILE_ROW_BYTES = 20;
const SEGMENT_ROW_BYTES = 80;

/** Estimated bytes a file's entry holds beside its label sets. */
export const fileEntryBytes = (f: FileLabels) => f.ids.length * FILE_ROW_BYTES;
/** Estimated bytes a WAL segment's entry holds beside its label sets. */
export const segmentEntryBytes = (s: SegmentLabels) => s.ids.length * SEGMENT_ROW_BYTES + s.times.reduce((a, l) => a + l.length * 8, 0);

/** The largest WAL segment read in process (bytes of NDJSON): parsed on the event loop, tens of ms at most. */
export const SEGMENT_READ_MAX = 4 * 2 ** 20;

/** ISO-8601 UTC with at most milliseconds: what remote write's rows hold, parsed exactly by Date.parse. */
const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,3})?Z$/;

/** The label pairs of a row's values by `columns` (sorted by label): empty and NULL values are no label. */
export function pairsOf(columns: Columns, value: (column: string, i: number) => string | null): [string, string][] {
  const pairs: [string, string][] = [];
  columns.forEach((c, i) => {
    const v = value(c.column, i);
    if (v) pairs.push([c.label, v]);
  });
  return pairs;
}

/** A file's label sets and spans, from its series index sidecar (read with DuckDB, once per file). */
export async function readFileLabels(duck: DuckDBSource, into: Interner, f: Snapshot['files'][number], columns: Columns): Promise<FileLabels | undefined> {
  const inIndex = new Set(f.seriesIndex?.columns ?? []);
  const cols = columns.map((c) => (inIndex.has(c.column) ? `CAST(${quotedIdentifier(c.column)} AS VARCHAR)` : 'NULL::VARCHAR'));
  const sql =
    `SELECT ${[...cols, `epoch_ms(${SERIES_MIN_TIME}::TIMESTAMP)`, `epoch_ms(${SERIES_MAX_TIME}::TIMESTAMP)`].join(', ')} ` +
    `FROM read_parquet(${quotedString(f.path)}, hive_partitioning = false)`;
  let rows: unknown[][];
  try {
    rows = await withConnection(duck, async (conn) => (await conn.runAndReadAll(sql)).getRows());
  } catch (err) {
    // The worker path tells storage about a damaged index and reads the file instead.
    log.warn('label index: could not read a series index; the call takes the query workers', { key: f.key, error: (err as Error).message });
    return undefined;
  }
  return fileLabelsOf(into, f, columns, rows);
}

/** A file's entry from its sidecar's rows (label columns by `columns`, then first and last time in ms). */
function fileLabelsOf(into: Interner, f: Snapshot['files'][number], columns: Columns, rows: unknown[][]): FileLabels {
  const n = rows.length;
  const out: FileLabels = { key: f.key, minMs: f.minMs, maxMs: f.maxMs, ids: new Int32Array(n), lo: new Float64Array(n), hi: new Float64Array(n) };
  const k = columns.length;
  rows.forEach((row, r) => {
    out.ids[r] = into.intern(pairsOf(columns, (_, i) => row[i] as string | null));
    out.lo[r] = row[k] === null ? Infinity : Number(row[k]);
    out.hi[r] = row[k + 1] === null ? -Infinity : Number(row[k + 1]);
  });
  into.bytes += fileEntryBytes(out);
  return out;
}

/**
 * The label sets of several files' sidecars in one DuckDB query (a cold index's files: one scan instead
 * of one query per file, which cost ~3.5 ms each), by file key; undefined when the query fails (the
 * caller then reads them one by one, to find the damaged one).
 */
export async function readFilesLabels(duck: DuckDBSource, into: Interner, files: Snapshot['files'], columns: Columns): Promise<Map<string, FileLabels> | undefined> {
  const present = new Set(files.flatMap((f) => f.seriesIndex?.columns ?? []));
  const cols = columns.map((c, i) => `${present.has(c.column) ? `CAST(${quotedIdentifier(c.column)} AS VARCHAR)` : 'NULL::VARCHAR'} AS c${i}`);
  const list = `[${files.map((f) => quotedString(f.path)).join(', ')}]`;
  // One row per distinct label set, with the files (by position) and spans it has: each label value is
  // turned into a JavaScript string once, not once per file (that conversion was most of the cost).
  const inner =
    `SELECT ${cols.join(', ')}, p_files.f, epoch_ms(${SERIES_MIN_TIME}::TIMESTAMP)::DOUBLE AS lo, ` +
    `epoch_ms(${SERIES_MAX_TIME}::TIMESTAMP)::DOUBLE AS hi FROM read_parquet(${list}, hive_partitioning = false, union_by_name = true, filename = true) AS p_rows ` +
    `JOIN (SELECT unnest(${list}) AS filename, unnest(range(1, ${files.length + 1}))::INTEGER AS f) AS p_files ON p_rows.filename = p_files.filename`;
  const sql = `SELECT ${columns.map((_, i) => `c${i}`).join(', ')}${columns.length ? ', ' : ''}list(f), list(lo), list(hi) FROM (${inner}) GROUP BY ALL`;
  let rows: unknown[][];
  try {
    rows = await withConnection(duck, async (conn) => (await conn.runAndReadAll(sql)).getRowsJS());
  } catch {
    return undefined;
  }
  const k = columns.length;
  const perFile = files.map(() => ({ ids: [] as number[], lo: [] as number[], hi: [] as number[] }));
  for (const row of rows) {
    const id = into.intern(pairsOf(columns, (_, i) => row[i] as string | null));
    const [fs_, los, his] = [row[k], row[k + 1], row[k + 2]] as (number | null)[][];
    for (let j = 0; j < fs_.length; j++) {
      const at = perFile[(fs_[j] ?? 0) - 1];
      // A row of no file asked for (a path spelled otherwise): the files are read one by one instead.
      if (!at) return undefined;
      at.ids.push(id);
      at.lo.push(los[j] ?? Infinity);
      at.hi.push(his[j] ?? -Infinity);
    }
  }
  const out = new Map<string, FileLabels>();
  files.forEach((f, i) => {
    const p = perFile[i];
    const entry: FileLabels = { key: f.key, minMs: f.minMs, maxMs: f.maxMs, ids: Int32Array.from(p.ids), lo: Float64Array.from(p.lo), hi: Float64Array.from(p.hi) };
    out.set(f.key, entry);
    into.bytes += fileEntryBytes(entry);
  });
  return out;
}

/**
 * A sealed WAL segment's label sets with their rows' times, read as walScanSql reads it: a row without
 * its time is no row. A time or label value it could not read exactly as DuckDB's read_json would (not
 * an ISO string in UTC to the millisecond, a label that is not a string) gives undefined: the worker path.
 */
export async function readSegmentLabels(into: Interner, path: string, timeColumn: string, columns: Columns): Promise<SegmentLabels | undefined> {
  let text: string;
  try {
    text = await fs.readFile(path, 'utf8');
  } catch {
    return undefined;
  }
  const times = new Map<number, number[]>();
  for (const line of text.split('\n')) {
    if (!line || line === '{}') continue;
    let row: Record<string, unknown>;
    try {
      row = JSON.parse(line) as Record<string, unknown>;
    } catch {
      // What read_json would make of it is the workers' to say.
      return undefined;
    }
    if (row === null || typeof row !== 'object') return undefined;
    const t = row[timeColumn];
    if (t === null || t === undefined) continue;
    if (typeof t !== 'string' || !ISO_MS.test(t)) return undefined;
    let readable = true;
    const pairs = pairsOf(columns, (column) => {
      const v = row[column];
      if (v === null || v === undefined) return null;
      if (typeof v !== 'string') readable = false;
      return String(v);
    });
    if (!readable) return undefined;
    const id = into.intern(pairs);
    const list = times.get(id);
    if (list) list.push(Date.parse(t));
    else times.set(id, [Date.parse(t)]);
  }
  const out: SegmentLabels = { ids: Int32Array.from(times.keys()), times: [...times.values()].map((l) => Float64Array.from(l).sort()) };
  into.bytes += segmentEntryBytes(out);
  return out;
}

/** Whether a sorted list of times has one in [start, end]. */
export function anyIn(times: Float64Array, start: number, end: number): boolean {
  let lo = 0;
  let hi = times.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (times[mid] < start) lo = mid + 1;
    else hi = mid;
  }
  return lo < times.length && times[lo] <= end;
}

