import { quotedIdentifier, type DuckDBConnection, type DuckDBMaterializedResult } from '@duckdb/node-api';
import { MAX_MS, MIN_MS, sampleVectors, seriesSql, type Matcher, type SeriesRequest } from './storage.ts';
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

export class SampleCache {
  private readonly files = new Map<string, CachedFile>();
  private readonly series = new Map<string, Series>();
  private readonly byId = new Map<number, Series>();
  private nextId = 0;
  private bytes = 0;

  /** Bytes held now (typed arrays exactly, label sets estimated). */
  get size(): number {
    return this.bytes;
  }

  /**
   * The decoded files of these groups, in order, loading those not held (one DuckDB query for all of
   * them), then dropping the least recently used other files past `budget`.
   */
  async get(conn: DuckDBConnection, groups: CachedGroup[], dir: string, cols: CacheColumns, labelsOnly: boolean, budget: number): Promise<CachedFile[]> {
    const keys: { key: string; sql: string }[] = [];
    for (const g of groups)
      for (const p of g.paths) {
        const sql = g.sql.replaceAll(PATH_PLACEHOLDER, `${dir}/${p}`.replaceAll("'", "''"));
        keys.push({ key: `${labelsOnly ? 'L' : 'S'}${sql}`, sql });
      }
    const missing = keys.filter((k) => !this.files.has(k.key));
    const loaded = missing.length ? await this.load(conn, missing.map((m) => m.sql), cols, labelsOnly) : [];
    missing.forEach((m, i) => {
      this.files.set(m.key, loaded[i]);
      this.bytes += loaded[i].bytes;
    });
    const out = keys.map(({ key }) => {
      const f = this.files.get(key)!;
      // Most recently used last: a Map iterates in insertion order.
      this.files.delete(key);
      this.files.set(key, f);
      return f;
    });
    // The files of this call stay (the label sets of the files returned must): past the budget by at
    // most what this one selector reads, until the next call.
    const inUse = new Set(keys.map((k) => k.key));
    for (const [key, f] of this.files) {
      if (this.bytes <= budget || inUse.has(key)) break;
      this.files.delete(key);
      this.bytes -= f.bytes;
      for (const id of f.ids) this.release(id);
    }
    return out;
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
      for (let r = 0; r < chunk.rowCount; r++) {
        const pairs: [string, string][] = [];
        labelVectors.forEach((v, i) => {
          const value = v.getItem(r);
          if (typeof value === 'string' && value !== '') pairs.push([names[i], value]);
        });
        rows.push(rowSamples(this.intern(pairs), vectors, r));
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

/** One label set's samples of every loaded file, copied out of DuckDB's vectors, in (file, time) order. */
interface Row {
  series: Series;
  t: BigInt64Array;
  v: Float64Array;
  k: Uint8Array;
  f: Int32Array;
  h?: (Uint8Array | undefined)[];
}

function rowSamples(series: Series, vectors: ReturnType<typeof sampleVectors>, r: number): Row {
  const first = Number(vectors.entries.getBigUint64(16 * r, true));
  const n = Number(vectors.entries.getBigUint64(16 * r + 8, true));
  // Copied into arrays of their own: the vectors are Buffers over DuckDB's memory (a Buffer's slice is a view).
  const copy = (b: Uint8Array, width: number) => new Uint8Array(b.subarray(width * first, width * (first + n))).buffer;
  const t = new BigInt64Array(copy(vectors.t, 8));
  const v = new Float64Array(copy(vectors.v, 8));
  const k = new Uint8Array(copy(vectors.k, 1));
  const f = new Int32Array(copy(vectors.carried[0], 4));
  const h = vectors.h ? Array.from({ length: n }, (_, i) => (k[i] === 2 ? lengthPrefixed(String(vectors.h!.getItem(first + i) ?? '')) : undefined)) : undefined;
  let sorted = true;
  for (let i = 1; i < n && sorted; i++) sorted = f[i - 1] < f[i] || (f[i - 1] === f[i] && t[i - 1] <= t[i]);
  if (sorted) return { series, t, v, k, f, h };
  // Stable: of samples at one time, their order is kept (the engine keeps the last).
  const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => f[a] - f[b] || (t[a] < t[b] ? -1 : t[a] > t[b] ? 1 : a - b));
  return { series, t: BigInt64Array.from(order, (o) => t[o]), v: Float64Array.from(order, (o) => v[o]), k: Uint8Array.from(order, (o) => k[o]), f: Int32Array.from(order, (o) => f[o]), h: h && order.map((o) => h[o]) };
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
  for (const row of rows)
    for (let i = 0; i < row.f.length; i++) {
      if (i === 0 || row.f[i] !== row.f[i - 1]) seriesOf[row.f[i]]++;
      samplesOf[row.f[i]]++;
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
    for (let i = 0; i < row.f.length; ) {
      const f = row.f[i];
      let j = i;
      while (j < row.f.length && row.f[j] === f) j++;
      const file = files[f];
      const l = local[f]++;
      file.ids[l] = row.series.id;
      row.series.refs++;
      const name = row.series.labels.get('__name__') ?? '';
      const list = file.byName.get(name);
      if (list) list.push(l);
      else file.byName.set(name, [l]);
      if (labelsOnly) {
        file.lo[l] = Number(row.t[i]);
        file.hi[l] = row.v[i];
      } else {
        file.lo[l] = Number(row.t[i]);
        file.hi[l] = Number(row.t[j - 1]);
        file.t.set(row.t.subarray(i, j), at[f]);
        file.v.set(row.v.subarray(i, j), at[f]);
        file.k.set(row.k.subarray(i, j), at[f]);
        for (let x = i; x < j; x++) if (row.h?.[x]) (file.h ??= new Map()).set(at[f] + x - i, row.h[x]!);
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

/** Whether a series may match: equality matchers exactly (an absent label is ''), regular expressions left to the engine. */
export function mayMatch(s: Series, matchers: Matcher[]): boolean {
  for (const m of matchers) {
    if (m.type === '=' && (s.labels.get(m.name) ?? '') !== m.value) return false;
    if (m.type === '!=' && (s.labels.get(m.name) ?? '') === m.value) return false;
  }
  return true;
}

/** First index in [lo, hi) of `t32` (a file's times as i32 pairs, little-endian, ascending) at or after ms. */
function lowerBound(t32: Int32Array, lo: number, hi: number, ms: number): number {
  // Read as numbers (exact below 2^53), not through the BigInt64Array: a BigInt per read cost more
  // than the search.
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (t32[2 * mid + 1] * 4294967296 + (t32[2 * mid] >>> 0) < ms) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * The series of these decoded files that may match the request, in encodeSeries' binary form (without
 * its leading count, returned apart): each label set once, its samples in [start, end] from every file
 * in file order (labels only: each label set whose span in a file overlaps the range, without samples).
 * The slices are gathered in flat arrays (group, file, from, to), not an array per slice: a dashboard
 * panel over an hour of minute files has ~100,000 of them (840 series × 126 files), whose allocation
 * and the BigInt reads of the time search cost 60–270 ms a panel (docs/performance.md).
 */
export function selectCached(cache: SampleCache, files: CachedFile[], req: SeriesRequest): { count: number; parts: Uint8Array[] } {
  const name = req.matchers.find((m) => m.type === '=' && m.name === '__name__');
  /** Label set id → 1 + its group (in order of first slice), -1: does not match, 0: not seen yet (ids are dense). */
  const groupOf = new Int32Array(cache.idLimit);
  const ids: number[] = [];
  let slices = new Int32Array(4 * 1024);
  let n = 0;
  const start = Math.max(MIN_MS, req.start);
  const end = Math.min(MAX_MS, req.end);
  files.forEach((f, fi) => {
    const candidates = name ? f.byName.get(name.value) : undefined;
    const count = name ? (candidates?.length ?? 0) : f.ids.length;
    const t32 = f.t32;
    for (let c = 0; c < count; c++) {
      const l = candidates ? candidates[c] : c;
      if (f.hi[l] < req.start || f.lo[l] > req.end) continue;
      const id = f.ids[l];
      let g = groupOf[id] - 1;
      if (g === -2) continue;
      if (g === -1 && !mayMatch(cache.labelSet(id), req.matchers)) {
        groupOf[id] = -1;
        continue;
      }
      // A file's series wholly inside the range (most of a panel's minute files) needs no search.
      const inside = f.lo[l] >= start && f.hi[l] <= end;
      const lo = req.labelsOnly || inside ? f.off[l] : lowerBound(t32, f.off[l], f.off[l + 1], start);
      const hi = req.labelsOnly || inside ? f.off[l + 1] : lowerBound(t32, lo, f.off[l + 1], end + 1);
      if (lo === hi && !req.labelsOnly) continue;
      if (g === -1) {
        g = ids.length;
        groupOf[id] = g + 1;
        ids.push(id);
      }
      // Label sets: each once, whatever the files that have it.
      if (req.labelsOnly) continue;
      if (n + 4 > slices.length) {
        const grown = new Int32Array(slices.length * 2);
        grown.set(slices);
        slices = grown;
      }
      slices[n++] = g;
      slices[n++] = fi;
      slices[n++] = lo;
      slices[n++] = hi;
    }
  });
  return { count: ids.length, parts: encodeGroups(cache, files, ids, slices.subarray(0, n), req.labelsOnly) };
}

/**
 * encodeSeries' form of each label set and its slices of the files' samples (`slices`: group, file,
 * from, to; a group's in file order), copied into one buffer: a part per slice (a series over an hour of
 * minute files has 60) made one pipe write each, which cost ten times the copy.
 */
function encodeGroups(cache: SampleCache, files: CachedFile[], ids: number[], slices: Int32Array, labelsOnly: boolean): Uint8Array[] {
  // Each group's slices together, in file order (a counting sort by group: stable).
  const samples = new Float64Array(ids.length);
  const first = new Int32Array(ids.length + 1);
  let size = 0;
  for (let s = 0; s < slices.length; s += 4) {
    const g = slices[s];
    samples[g] += slices[s + 3] - slices[s + 2];
    first[g + 1]++;
    const h = files[slices[s + 1]].h;
    if (h) for (let i = slices[s + 2]; i < slices[s + 3]; i++) size += h.get(i)?.length ?? 0;
  }
  for (let g = 0; g < ids.length; g++) {
    first[g + 1] += first[g];
    size += cache.labelSet(ids[g]).head.length + 4 + 17 * samples[g];
  }
  const order = new Int32Array(slices.length / 4);
  const next = first.slice(0, ids.length);
  for (let s = 0; s < slices.length; s += 4) order[next[slices[s]]++] = s;
  const out = new Uint8Array(size);
  const dv = new DataView(out.buffer);
  let at = 0;
  const put = (b: Uint8Array) => {
    out.set(b, at);
    at += b.length;
  };
  for (let g = 0; g < ids.length; g++) {
    put(cache.labelSet(ids[g]).head);
    dv.setUint32(at, samples[g], true);
    at += 4;
    if (labelsOnly) continue;
    const mine = order.subarray(first[g], first[g + 1]);
    at = copySamples(dv, at, files, slices, mine);
    for (const s of mine) {
      const h = files[slices[s + 1]].h;
      if (h) for (let i = slices[s + 2]; i < slices[s + 3]; i++) if (h.has(i)) put(h.get(i)!);
    }
  }
  return [out];
}

/**
 * A group's times, then values, then kinds, from its slices, written at `at` (returns the end): value by
 * value through the DataView (the output's offsets are not 8-aligned), a few times faster than byte
 * copies or a subarray per slice of a few samples.
 */
function copySamples(dv: DataView, at: number, files: CachedFile[], slices: Int32Array, mine: Int32Array): number {
  // Times and values as i32 pairs: the bits as stored (a NaN read as a number may lose its payload).
  for (const part of ['t', 'v'] as const)
    for (const s of mine) {
      const f = files[slices[s + 1]];
      const w = part === 't' ? f.t32 : f.v32;
      for (let i = slices[s + 2]; i < slices[s + 3]; i++, at += 8) {
        dv.setInt32(at, w[2 * i], true);
        dv.setInt32(at + 4, w[2 * i + 1], true);
      }
    }
  for (const s of mine) {
    const k = files[slices[s + 1]].k;
    for (let i = slices[s + 2]; i < slices[s + 3]; i++) dv.setUint8(at++, k[i]);
  }
  return at;
}
