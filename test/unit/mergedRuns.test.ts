import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PATH_PLACEHOLDER, SampleCache, type CacheColumns, type CachedFile } from '../../src/query/promql/sampleCache.ts';
import { selectCached } from '../../src/query/promql/cachedSelect.ts';
import { mergeName, MergedRuns } from '../../src/query/promql/mergedRuns.ts';
import type { SeriesRequest } from '../../src/query/promql/storage.ts';

/*
 * A metric name's merged runs (mergedRuns.ts) against the per-file slices they replace: for each set of
 * files and request, the bytes each series gets — its samples in the order sent, which decides which of
 * two samples at one time the engine keeps — are the same; files that overlap in time are not merged.
 */

const COLUMNS: CacheColumns = {
  labels: [
    { label: '__name__', column: 'metric_name' },
    { label: 'instance', column: 'instance' },
  ],
  timeColumn: 't',
  stale: true,
  histogramColumns: [],
};

const T0 = Date.UTC(2026, 0, 1);
/** A file's rows: [metric, instance, time offset s, value, stale]. */
type Row = [string, string, number, number, boolean];

/** Per-minute files of three series (i2 only in even minutes), four samples a minute; the last of i0 is stale. */
const minute = (m: number): Row[] =>
  ['i0', 'i1', 'i2'].flatMap((inst, s) =>
    s === 2 && m % 2 ? [] : [0, 15, 30, 45].map((sec): Row => ['cpu', inst, 60 * m + sec, m * 100 + s * 10 + sec, m === 3 && sec === 45 && s === 0]),
  );

const SETS: Record<string, Row[][]> = {
  'minute files, in time order': [minute(0), minute(1), minute(2), minute(3)],
  // i0 at 105 s in minute 1's file and again (another value) in the next file: a resent scrape; the
  // later file's is sent last, and kept by the engine.
  'a sample at one time in two files': [minute(0), minute(1), [['cpu', 'i0', 105, 9, false] as Row, ...minute(2)]],
  // A late file holding an earlier minute: not in time order, so not merged (the slices are sent).
  'files out of time order': [minute(0), minute(2), minute(1), minute(3)],
  'another name beside': [[...minute(0), ['mem', 'i0', 5, 1, false] as Row], minute(1)],
};

const REQUESTS: [string, number, number][] = [
  ['every sample', T0 - 1, T0 + 600_000],
  ['a range cutting files', T0 + 50_000, T0 + 130_000],
  ['a range at a junction', T0 + 60_000, T0 + 60_000],
  ['a range between samples', T0 + 61_000, T0 + 74_000],
  ['a range before every sample', T0 - 60_000, T0 - 1],
];

/** Each series' bytes as sent (labels and samples), by its label set. */
function bySeries(cache: SampleCache, files: CachedFile[], req: SeriesRequest): Map<string, string> {
  const { count, parts } = selectCached(cache, files, req);
  const b = Buffer.concat(parts);
  const out = new Map<string, string>();
  let o = 0;
  for (let s = 0; s < count; s++) {
    const start = o;
    let labels = '';
    for (let l = b.readUInt32LE((o += 4) - 4); l > 0; l--) {
      const k = b.toString('utf8', o + 4, (o += 4 + b.readUInt32LE(o)));
      const v = b.toString('utf8', o + 4, (o += 4 + b.readUInt32LE(o)));
      labels += `${k}=${v},`;
    }
    o += 4 + 17 * b.readUInt32LE(o);
    out.set(labels, b.subarray(start, o).toString('hex'));
  }
  return out;
}

describe('merged runs of a metric name', () => {
  let dir: string;
  let conn: DuckDBConnection;
  const cache = new SampleCache();
  const decoded: Record<string, CachedFile[]> = {};

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'merged-runs-'));
    conn = await (await DuckDBInstance.create(':memory:')).connect();
    for (const [set, fileRows] of Object.entries(SETS)) {
      const names: string[] = [];
      for (const [i, rows] of fileRows.entries()) {
        const name = `${Object.keys(SETS).indexOf(set)}-${i}.parquet`;
        const values = rows.map(([m, inst, sec, v, st]) => `('${m}', '${inst}', epoch_ms(${T0 + sec * 1000}), ${v}, ${st})`).join(', ');
        await conn.run(`COPY (SELECT * FROM (VALUES ${values}) v(metric_name, instance, t, data_point_value, is_stale_marker)) TO '${dir}/${name}' (FORMAT parquet)`);
        names.push(name);
      }
      const sql = `SELECT * FROM read_parquet(['${PATH_PLACEHOLDER}'])`;
      decoded[set] = await cache.get(conn, [{ sql, paths: names, rows: fileRows.map((r) => r.length) }], dir, COLUMNS, false, 1e9);
    }
  });
  afterAll(async () => {
    conn.closeSync();
    await fs.rm(dir, { recursive: true, force: true });
  });

  for (const set of Object.keys(SETS))
    for (const [what, start, end] of REQUESTS)
      it(`${set}, ${what}: each series gets the same bytes as from the files`, () => {
        const files = decoded[set];
        const merged = mergeName(files, 'cpu');
        expect(merged === null).toBe(set === 'files out of time order');
        const req: SeriesRequest = { matchers: [{ type: '=', name: '__name__', value: 'cpu' }], start, end, labelsOnly: false };
        const want = bySeries(cache, files, req);
        expect(bySeries(cache, merged ? [merged] : files, req)).toEqual(want);
        if (what === 'every sample') expect(want.size).toBe(3);
      });

  it('is made once per set and name, within its budget, for the last sets held', () => {
    const files = decoded['minute files, in time order'];
    const runs = new MergedRuns(2);
    const [a, b, c] = [{}, {}, {}];
    const first = runs.of(a, files, 'cpu', 1e9);
    expect(first).toBeDefined();
    expect(runs.of(a, files, 'cpu', 1e9)).toBe(first);
    expect(runs.bytes).toBe(first!.bytes);
    // Out of order: not merged, remembered as such (the files are used).
    expect(runs.of(b, decoded['files out of time order'], 'cpu', 1e9)).toBeUndefined();
    // A third set: the oldest one's runs go.
    runs.of(c, files, 'cpu', 1e9);
    expect(runs.bytes).toBe(first!.bytes);
    expect(runs.of(a, files, 'cpu', 1e9)).not.toBe(first);
    // Over the budget: the other sets' runs go first, then none is made.
    expect(runs.of({}, files, 'cpu', first!.bytes)).toBeDefined();
    expect(runs.bytes).toBe(first!.bytes);
    expect(runs.of({}, files, 'cpu', first!.bytes - 1)).toBeUndefined();
    // Its size is known before anything is copied; a name that did not fit is not made again for its set.
    expect(mergeName(files, 'cpu', first!.bytes - 1)).toBeNull();
    expect(mergeName(files, 'cpu', first!.bytes)?.bytes).toBe(first!.bytes);
    const tight = {};
    expect(runs.of(tight, files, 'cpu', first!.bytes - 1)).toBeUndefined();
    expect(runs.of(tight, files, 'cpu', 1e9)).toBeUndefined();
  });

  it('leaves files with native histograms to the slices', () => {
    const files = decoded['minute files, in time order'];
    expect(mergeName([...files.slice(0, 1), { ...files[1], h: new Map([[0, new Uint8Array(4)]]) }], 'cpu')).toBeNull();
  });
});
