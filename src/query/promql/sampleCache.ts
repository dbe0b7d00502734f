import { quotedIdentifier, type DuckDBConnection, type DuckDBMaterializedResult } from '@duckdb/node-api';
import { MAX_MS, MIN_MS, sampleVectors, seriesSql } from './storage.ts';
import { SERIES_MAX_TIME, SERIES_MIN_TIME } from '../../storage/scan.ts';

/*
 * The query worker's cache of decoded Parquet files for PromQL (docs/promql.md "The sample cache"): each
 * file a selector reads is decoded once — its series' label sets and samples, sorted by time — and kept
 * in this process's memory, so that the next selectors over it (the next panels of a dashboard, the
 * next refresh) are answered from memory, with no DuckDB scan, planning or footer read per file. That
 * scan was the fixed cost of a selector: ~1 ms per file in range, 50–80 ms over an hour of per-minute
 * files (docs/performance.md).
 *
 * Exact by construction: a file is immutable under its link name, so its decoded form is its content;
 * which files a selector reads is still the service's snapshot (every worker's files, whoever wrote
 * them), and what no file holds yet (the WAL) and files too large to keep are still read by DuckDB, the
 * two answers merged by the engine as it merges any two groups of one label set. Least recently used
 * files go past the byte budget; a worker that exits (idle, killed) starts empty.
 */

/** A label set, held once for every file that has it. */
export interface Series {
  id: number;
  key: string;
  labels: Map<string, string>;
  /** u32 label count, then each name and value (u32 length + UTF-8), as encodeSeries writes them. */
  head: Uint8Array;
  /** Files holding it (it goes with the last). */
  refs: number;
}

/**
 * One file, decoded: per series of it (local index i) its id, its samples [off[i], off[i+1]) of t, v, k
 * in time order, and its first and last time (a label set's span in the file, for series calls).
 */
export interface CachedFile {
  bytes: number;
  ids: Int32Array;
  off: Int32Array;
  lo: Float64Array;
  hi: Float64Array;
  t: BigInt64Array;
  v: Float64Array;
  k: Uint8Array;
  /** t and v as i32 pairs (what the answer copies, and the time search reads without a BigInt per read). */
  t32: Int32Array;
  v32: Int32Array;
  /** Per native histogram sample (by index into t), its u32 length + JSON. */
  h?: Map<number, Uint8Array>;
  /** Local indexes by metric name. */
  byName: Map<string, number[]>;
}

/** The per-file SELECTs of a grant: a template (its file's path as PATH_PLACEHOLDER) and the files it reads. */
export interface CachedGroup {
  sql: string;
  paths: string[];
  /** Each file's rows (as `paths`), from the snapshot: its decode's size before it is decoded. */
  rows?: number[];
}

/** Stands for the file's path in a CachedGroup's SQL (a string no path holds). */
export const PATH_PLACEHOLDER = '\u0001path\u0001';

/** What a grant tells about the dataset's columns (see PromqlGrant). */
export interface CacheColumns {
  labels: { label: string; column: string }[];
  timeColumn: string;
  stale: boolean;
  histogramColumns: string[];
  hasValue?: boolean;
}

const encoder = new TextEncoder();
/** A label set's cost beyond its bytes (its objects and map entries): an estimate, so that the budget holds. */
const SERIES_OVERHEAD = 400;
const FILE_INDEX = '__f';

/** A decoded sample's bytes: i64 time, f64 value, u8 kind (the executor's estimate too). */
export const SAMPLE_BYTES = 17;

/**
 * The most a decode query decodes at once (by the files' rows), from the cache's budget: 1/512 of it,
 * 256 KiB–16 MiB (512 KiB at the 256 MiB budget of a 24 GB machine, ~31,000 samples). Issue 18's
 * workload (107 files, 400,000 samples) decoded alone: +155–160 MB RSS at its peak in one query,
 * +137–145 in 2 MiB batches, +115–122 in 512 KiB ones, +104–112 in 256 KiB ones, for ~100–200 ms
 * more over the 0.35–0.6 s of the decode (a query per batch): docs/memory.md.
 */
export const decodeBytesFor = (budget: number) => Math.min(16 * 2 ** 20, Math.max(256 * 2 ** 10, Math.floor(budget / 512)));

/** A file a call reads: its cache key, its SELECT, and its decoded samples' bytes at most (from its rows). */
interface PendingFile {
  key: string;
  sql: string;
  bytes: number;
}

/**
 * Consecutive runs of `files` whose estimated bytes add up to at most `limit` (a file over it alone):
 * the batches a decode goes in. Label sets only (bytes 0) go in one.
 */
export function decodeBatches<T extends { bytes: number }>(files: T[], limit: number): T[][] {
  const out: T[][] = [];
  let size = 0;
  for (const f of files) {
    if (!out.length || size + f.bytes > limit) {
      out.push([]);
      size = 0;
    }
    out[out.length - 1].push(f);
    size += f.bytes;
  }
  return out;
}

/**
 * A group's files with their cache keys and SELECTs, built once per group object: a worker keeps a
 * grant's groups across jobs (grantSets.ts), and building a key per file and call (the template with
 * the path put in, ~1 KB) cost ~0.3 ms of every panel over an hour of minute files. The same key
 * strings each call also keep their hashes (V8 caches a string's hash in it).
 */
function pendingFiles(g: CachedGroup, dir: string, labelsOnly: boolean): PendingFile[] {
  const memo = pendingMemo.get(g);
  if (memo && memo.dir === dir && memo.labelsOnly === labelsOnly) return memo.files;
  const files = g.paths.map((p, i) => {
    const sql = g.sql.replaceAll(PATH_PLACEHOLDER, `${dir}/${p}`.replaceAll("'", "''"));
    return { key: `${labelsOnly ? 'L' : 'S'}${sql}`, sql, bytes: labelsOnly ? 0 : (g.rows?.[i] ?? Infinity) * SAMPLE_BYTES };
  });
  pendingMemo.set(g, { dir, labelsOnly, files });
  return files;
}
const pendingMemo = new WeakMap<CachedGroup, { dir: string; labelsOnly: boolean; files: PendingFile[] }>();

export class SampleCache {
  /** The decode queries of the last call: each one's files and their samples' bytes (what it decoded at once). */
  lastDecodes: { files: number; sampleBytes: number }[] = [];
  /** Decoded files by key (pendingFiles), each with the number of the last call that used it. */
  private readonly files = new Map<string, { file: CachedFile; used: number }>();
  private calls = 0;
  private readonly series = new Map<string, Series>();
  private readonly byId = new Map<number, Series>();
  private nextId = 0;
  private bytes = 0;

  /** Bytes held now (typed arrays exactly, label sets estimated). */
  get size(): number {
    return this.bytes;
  }

  /**
   * The decoded files of these groups, in order, loading those not held, then dropping the least
   * recently used other files past `budget`. Files are decoded in batches of at most `decodeBytes` by
   * their rows (one DuckDB query each; a larger file alone), not all at once: a decode's transient
   * memory (DuckDB's lists and result, the rows copied out, the files built) is several times what it
   * keeps (issue 18's workload: 107 files, 18 MB kept, +155–165 MB RSS decoded at once; docs/memory.md).
   */
  async get(conn: DuckDBConnection, groups: CachedGroup[], dir: string, cols: CacheColumns, labelsOnly: boolean, budget: number, decodeBytes = decodeBytesFor(budget)): Promise<CachedFile[]> {
    const keys = groups.flatMap((g) => pendingFiles(g, dir, labelsOnly));
    const missing = keys.filter((k) => !this.files.has(k.key));
    this.lastDecodes = [];
    for (const batch of decodeBatches(missing, decodeBytes)) {
      const loaded = await this.load(conn, batch.map((m) => m.sql), cols, labelsOnly);
      let samples = 0;
      batch.forEach((m, i) => {
        this.files.set(m.key, { file: loaded[i], used: 0 });
        this.bytes += loaded[i].bytes;
        samples += loaded[i].t.length;
      });
      this.lastDecodes.push({ files: batch.length, sampleBytes: samples * SAMPLE_BYTES });
    }
    const used = ++this.calls;
    const out = keys.map(({ key }) => {
      const held = this.files.get(key)!;
      held.used = used;
      return held.file;
    });
    if (this.bytes > budget) this.evict(budget, used);
    return out;
  }

  /**
   * Drops the least recently used files until the cache is within `budget`. The files of this call
   * (`used`) stay: the label sets of the files returned must, so the cache is past the budget by at
   * most what this one selector reads, until the next call.
   */
  private evict(budget: number, used: number): void {
    const byAge = [...this.files].filter(([, h]) => h.used !== used).sort((a, b) => a[1].used - b[1].used);
    for (const [key, { file }] of byAge) {
      if (this.bytes <= budget) break;
      this.files.delete(key);
      this.bytes -= file.bytes;
      for (const id of file.ids) this.release(id);
    }
  }

  /** One past the largest id given (ids are dense: an array indexed by id covers every label set). */
  get idLimit(): number {
    return this.nextId;
  }

  /** The label set of an id (held while a file that has it is). */
  labelSet(id: number): Series {
    return this.byId.get(id)!;
  }

  private release(id: number): void {
    const s = this.byId.get(id)!;
    if (--s.refs > 0) return;
    this.byId.delete(id);
    this.series.delete(s.key);
    this.bytes -= SERIES_OVERHEAD + s.head.length * 3;
  }

  /** The label set of these pairs, held once (its count of files raised). */
  private intern(pairs: [string, string][]): Series {
    pairs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    const key = pairs.map(([k, v]) => `${k}\u0000${v}`).join('\u0001');
    let s = this.series.get(key);
    if (!s) {
      s = { id: this.nextId++, key, labels: new Map(pairs), head: encodeLabels(pairs), refs: 0 };
      this.series.set(key, s);
      this.byId.set(s.id, s);
      this.bytes += SERIES_OVERHEAD + s.head.length * 3;
    }
    return s;
  }

  /** Decodes files (their per-file SELECTs, in order) in one query: a row per label set, with its samples of every file. */
  private async load(conn: DuckDBConnection, sqls: string[], cols: CacheColumns, labelsOnly: boolean): Promise<CachedFile[]> {
    const union = sqls.map((sql, i) => `SELECT *, ${i}::INTEGER AS ${FILE_INDEX} FROM (${sql})`).join(' UNION ALL ');
    const labelCols = cols.labels.map((l) => quotedIdentifier(l.column)).join(', ');
    const sql = labelsOnly
      ? `SELECT ${labelCols}, list({'t': __lo, 'v': __hi::DOUBLE, 'k': 0::UTINYINT, 'f': ${FILE_INDEX}}) FROM (SELECT ${labelCols}, ${FILE_INDEX}, ` +
        `min(epoch_ms(${SERIES_MIN_TIME}::TIMESTAMP)) AS __lo, max(epoch_ms(${SERIES_MAX_TIME}::TIMESTAMP)) AS __hi FROM (${union}) GROUP BY ALL) GROUP BY ALL`
      : seriesSql(`(${union})`, cols.timeColumn, cols.stale, cols.labels, { matchers: [], start: MIN_MS, end: MAX_MS, labelsOnly: false }, true, cols.histogramColumns, cols.hasValue ?? true, [FILE_INDEX]);
    const result = (await conn.run(sql)) as DuckDBMaterializedResult;
    const names = cols.labels.map((l) => l.label);
    const rows: Row[] = [];
    for (let c = 0; c < result.chunkCount; c++) {
      const chunk = result.getChunk(c);
      if (chunk.rowCount === 0) continue;
      const labelVectors = names.map((_, i) => chunk.getColumnVector(i));
      const vectors = sampleVectors(chunk.chunk, names.length, chunk.rowCount, 1);
      const samples = copyChunk(vectors);
      for (let r = 0; r < chunk.rowCount; r++) {
        const pairs: [string, string][] = [];
        labelVectors.forEach((v, i) => {
          const value = v.getItem(r);
          if (typeof value === 'string' && value !== '') pairs.push([names[i], value]);
        });
        rows.push(rowSamples(this.intern(pairs), samples, vectors.entries, r));
      }
    }
    return buildFiles(sqls.length, rows, labelsOnly);
  }
}

export function encodeLabels(pairs: [string, string][]): Uint8Array {
  const encoded = pairs.map(([k, v]) => [encoder.encode(k), encoder.encode(v)]);
  const head = new Uint8Array(4 + encoded.reduce((a, [k, v]) => a + 8 + k.length + v.length, 0));
  const dv = new DataView(head.buffer);
  dv.setUint32(0, pairs.length, true);
  let off = 4;
  for (const [k, v] of encoded) {
    dv.setUint32(off, k.length, true);
    head.set(k, off + 4);
    off += 4 + k.length;
    dv.setUint32(off, v.length, true);
    head.set(v, off + 4);
    off += 4 + v.length;
  }
  return head;
}

/**
 * A chunk's samples copied out of DuckDB's vectors (its memory, valid only while the result is), one
 * array per field for the whole chunk: an array per label set (~2,000 rows a chunk, a few samples each)
 * cost ~400 bytes of heap and allocation per array, ~5× the samples themselves (issue 18's workload).
 */
interface ChunkSamples {
  t: BigInt64Array;
  v: Float64Array;
  k: Uint8Array;
  f: Int32Array;
  h?: (Uint8Array | undefined)[];
}

function copyChunk(vectors: ReturnType<typeof sampleVectors>): ChunkSamples {
  // A Buffer's slice is a view: new typed arrays over copies.
  const copy = (b: Uint8Array) => new Uint8Array(b).buffer;
  const k = new Uint8Array(copy(vectors.k));
  const h = vectors.h ? Array.from(k, (kind, i) => (kind === 2 ? lengthPrefixed(String(vectors.h!.getItem(i) ?? '')) : undefined)) : undefined;
  return { t: new BigInt64Array(copy(vectors.t)), v: new Float64Array(copy(vectors.v)), k, f: new Int32Array(copy(vectors.carried[0])), h };
}

/** One label set's samples of every loaded file: [at, at + n) of its chunk's arrays, in (file, time) order. */
interface Row {
  series: Series;
  c: ChunkSamples;
  at: number;
  n: number;
}

function rowSamples(series: Series, c: ChunkSamples, entries: DataView, r: number): Row {
  const at = Number(entries.getBigUint64(16 * r, true));
  const n = Number(entries.getBigUint64(16 * r + 8, true));
  const { t, f } = c;
  let sorted = true;
  for (let i = at + 1; i < at + n && sorted; i++) sorted = f[i - 1] < f[i] || (f[i - 1] === f[i] && t[i - 1] <= t[i]);
  if (!sorted) sortRange(c, at, n);
  return { series, c, at, n };
}

/** Sorts [at, at + n) of a chunk's arrays by (file, time), in place. Stable: of samples at one time, their order is kept (the engine keeps the last). */
function sortRange(c: ChunkSamples, at: number, n: number): void {
  const { t, f } = c;
  const order = Array.from({ length: n }, (_, i) => at + i).sort((a, b) => f[a] - f[b] || (t[a] < t[b] ? -1 : t[a] > t[b] ? 1 : a - b));
  const permute = <T extends { [i: number]: unknown }>(arr: T) => {
    const vals = order.map((o) => arr[o]);
    vals.forEach((x, i) => (arr[at + i] = x as T[number]));
  };
  permute(c.t);
  permute(c.v);
  permute(c.k);
  permute(c.f);
  if (c.h) permute(c.h);
}

function lengthPrefixed(text: string): Uint8Array {
  const json = encoder.encode(text);
  const out = new Uint8Array(4 + json.length);
  new DataView(out.buffer).setUint32(0, json.length, true);
  out.set(json, 4);
  return out;
}

/** Each file's arrays from the rows (label sets only: a row's "samples" are its spans, t the first time and v the last). */
function buildFiles(count: number, rows: Row[], labelsOnly: boolean): CachedFile[] {
  const seriesOf = new Int32Array(count);
  const samplesOf = new Int32Array(count);
  for (const { c, at, n } of rows)
    for (let i = at; i < at + n; i++) {
      if (i === at || c.f[i] !== c.f[i - 1]) seriesOf[c.f[i]]++;
      samplesOf[c.f[i]]++;
    }
  const files: CachedFile[] = Array.from({ length: count }, (_, f) => {
    const ns = seriesOf[f];
    const n = labelsOnly ? 0 : samplesOf[f];
    const t = new BigInt64Array(n);
    const v = new Float64Array(n);
    const arrays = { t, v, k: new Uint8Array(n), t32: new Int32Array(t.buffer), v32: new Int32Array(v.buffer) };
    return { bytes: 0, ids: new Int32Array(ns), off: new Int32Array(ns + 1), lo: new Float64Array(ns), hi: new Float64Array(ns), ...arrays, byName: new Map() };
  });
  const local = new Int32Array(count);
  const at = new Int32Array(count);
  for (const row of rows) {
    const c = row.c;
    const end = row.at + row.n;
    for (let i = row.at; i < end; ) {
      const f = c.f[i];
      let j = i;
      while (j < end && c.f[j] === f) j++;
      const file = files[f];
      const l = local[f]++;
      file.ids[l] = row.series.id;
      row.series.refs++;
      const name = row.series.labels.get('__name__') ?? '';
      const list = file.byName.get(name);
      if (list) list.push(l);
      else file.byName.set(name, [l]);
      file.lo[l] = Number(c.t[i]);
      if (labelsOnly) file.hi[l] = c.v[i];
      else {
        file.hi[l] = Number(c.t[j - 1]);
        file.t.set(c.t.subarray(i, j), at[f]);
        file.v.set(c.v.subarray(i, j), at[f]);
        file.k.set(c.k.subarray(i, j), at[f]);
        for (let x = i; x < j; x++) if (c.h?.[x]) (file.h ??= new Map()).set(at[f] + x - i, c.h[x]!);
        at[f] += j - i;
      }
      file.off[l + 1] = labelsOnly ? 0 : at[f];
      i = j;
    }
  }
  for (const file of files) {
    let hist = 0;
    for (const b of file.h?.values() ?? []) hist += b.length + 64;
    file.bytes = file.ids.length * 40 + file.t.length * 17 + hist + 64 * file.byName.size;
  }
  return files;
}
