import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { DuckDBInstance, type DuckDBConnection, type DuckDBMaterializedResult } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeBatches, decodeBytesFor, PATH_PLACEHOLDER, SAMPLE_BYTES, SampleCache, type CacheColumns } from '../../src/query/promql/sampleCache.ts';
import { selectCached } from '../../src/query/promql/cachedSelect.ts';
import { selectProjected, type Projection } from '../../src/query/promql/labelProjection.ts';
import { encodeSeries, seriesSql, type Matcher, type SeriesRequest } from '../../src/query/promql/storage.ts';

/*
 * The PromQL sample cache against the reference it replaces: for each request, the series the cache
 * gives for a set of files must be those DuckDB's scan of the same files gives (seriesSql +
 * encodeSeries, the path every selector took before), once both are read as the engine reads them
 * (every matcher applied, samples sorted, one series per label set).
 */

interface Decoded {
  labels: string;
  samples: [number, number, number][];
}

/** The engine's reading of the binary answer: label sets, samples sorted by time, groups of one label set merged. */
function decode(parts: Uint8Array[], matchers: Matcher[]): Decoded[] {
  const b = Buffer.concat(parts);
  let o = 0;
  const u32 = () => {
    o += 4;
    return b.readUInt32LE(o - 4);
  };
  const out = new Map<string, [number, number, number][]>();
  const n = u32();
  for (let s = 0; s < n; s++) {
    const labels: [string, string][] = [];
    for (let l = u32(); l > 0; l--) {
      const k = b.toString('utf8', o + 4, o + 4 + b.readUInt32LE(o));
      o += 4 + Buffer.byteLength(k);
      const v = b.toString('utf8', o + 4, o + 4 + b.readUInt32LE(o));
      o += 4 + Buffer.byteLength(v);
      labels.push([k, v]);
    }
    const count = u32();
    const samples: [number, number, number][] = [];
    for (let i = 0; i < count; i++) samples.push([Number(b.readBigInt64LE(o + 8 * i)), b.readDoubleLE(o + 8 * count + 8 * i), b[o + 16 * count + i]]);
    o += 17 * count;
    const get = (name: string) => labels.find(([k]) => k === name)?.[1] ?? '';
    const ok = matchers.every((m) => {
      const re = new RegExp(`^(?:${m.value})$`, 's');
      return m.type === '=' ? get(m.name) === m.value : m.type === '!=' ? get(m.name) !== m.value : m.type === '=~' ? re.test(get(m.name)) : !re.test(get(m.name));
    });
    if (!ok) continue;
    const key = labels
      .sort((x, y) => (x[0] < y[0] ? -1 : 1))
      .map(([k, v]) => `${k}=${v}`)
      .join(',');
    out.set(key, [...(out.get(key) ?? []), ...samples]);
  }
  return [...out]
    .map(([labels, samples]) => ({ labels, samples: samples.sort((x, y) => x[0] - y[0]) }))
    .sort((x, y) => (x.labels < y.labels ? -1 : 1));
}

const COLUMNS: CacheColumns = {
  labels: [
    { label: '__name__', column: 'metric_name' },
    { label: 'instance', column: 'instance' },
    { label: 'code', column: 'code' },
  ],
  timeColumn: 't',
  stale: true,
  histogramColumns: [],
};

/** Rows of one file: [metric, instance, code or null, time ms, value, stale]. */
type Row = [string, string, string | null, number, number, boolean];

const T0 = Date.UTC(2026, 0, 1);
function rows(file: number, shuffle: boolean): Row[] {
  const out: Row[] = [];
  for (let s = 0; s < 6; s++)
    for (let i = 0; i < 20; i++) {
      const t = T0 + file * 300_000 + i * 15_000;
      // Series 5 exists only in even files; series 4 has no code (NULL), series 3 an empty one.
      if (s === 5 && file % 2) continue;
      out.push([s < 3 ? 'req_total' : 'mem_bytes', `i${s % 3}`, s === 4 ? null : s === 3 ? '' : String(200 + s), t, file * 1000 + s * 10 + i, i === 19 && s === 2]);
    }
  if (shuffle) out.reverse();
  return out;
}

/** A test file's rows (what the snapshot tells the worker). */
const fileRows = (file: number) => rows(file, false).length;

describe('decodeBatches: files decoded together, by their estimated bytes', () => {
  const f = (bytes: number) => ({ bytes });
  const cases: [string, number[], number, number[][]][] = [
    ['no bound: one batch', [5, 5, 5], Infinity, [[5, 5, 5]]],
    ['files up to the bound together', [4, 4, 4, 4], 8, [[4, 4], [4, 4]]],
    ['a file over the bound alone', [2, 20, 2, 2], 8, [[2], [20], [2, 2]]],
    ['exactly the bound fits', [3, 5, 8], 8, [[3, 5], [8]]],
    ['label sets only (0 bytes): one batch', [0, 0, 0], 1, [[0, 0, 0]]],
    ['rows unknown under a bound: each alone', [Infinity, Infinity], 8, [[Infinity], [Infinity]]],
    ['nothing to decode: no batch', [], 8, []],
  ];
  it.each(cases)('%s', (_name, sizes, limit, expected) => {
    expect(decodeBatches(sizes.map(f), limit).map((b) => b.map((x) => x.bytes))).toEqual(expected);
  });

  it('the bound follows the cache budget: 1/512, 256 KiB to 16 MiB', () => {
    expect(decodeBytesFor(256 * 2 ** 20)).toBe(512 * 2 ** 10);
    expect(decodeBytesFor(0)).toBe(256 * 2 ** 10);
    expect(decodeBytesFor(2 ** 40)).toBe(16 * 2 ** 20);
  });
});

describe('PromQL sample cache', () => {
  let dir: string;
  let conn: DuckDBConnection;
  const files: string[] = [];

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'sample-cache-'));
    conn = await (await DuckDBInstance.create(':memory:')).connect();
    for (let f = 0; f < 4; f++) {
      const name = `f${f}.parquet`;
      const values = rows(f, f === 1)
        .map(([m, i, c, t, v, st]) => `('${m}', '${i}', ${c === null ? 'NULL' : `'${c}'`}, epoch_ms(${t}), ${v}, ${st})`)
        .join(', ');
      await conn.run(`COPY (SELECT * FROM (VALUES ${values}) v(metric_name, instance, code, t, data_point_value, is_stale_marker)) TO '${dir}/${name}' (FORMAT parquet)`);
      files.push(name);
    }
  });
  afterAll(async () => {
    conn.closeSync();
    await fs.rm(dir, { recursive: true, force: true });
  });

  // Label sets are read from the series relation: a row per label set and file, with its time span there.
  const relation = (file: string) =>
    `SELECT metric_name, instance, code, min(t) AS p_min_time, max(t) AS p_max_time, count(*) AS p_rows FROM read_parquet(['${file}']) GROUP BY ALL`;
  const reference = async (req: SeriesRequest, names: string[]) => {
    const view = req.labelsOnly
      ? `(${names.map((n) => relation(`${dir}/${n}`)).join(' UNION ALL ')})`
      : `(SELECT * FROM read_parquet([${names.map((n) => `'${dir}/${n}'`).join(', ')}]))`;
    const result = (await conn.run(seriesSql(view, 't', true, COLUMNS.labels, req))) as DuckDBMaterializedResult;
    return decode(encodeSeries(COLUMNS.labels.map((l) => l.label), result, req.labelsOnly), req.matchers);
  };
  const cached = async (cache: SampleCache, req: SeriesRequest, names: string[], budget = 1e9, decodeBytes?: number) => {
    const sql = req.labelsOnly ? relation(PATH_PLACEHOLDER) : `SELECT * FROM read_parquet(['${PATH_PLACEHOLDER}'])`;
    const rows = names.map((n) => fileRows(Number(/\d+/.exec(n)![0])));
    const got = await cache.get(conn, [{ sql, paths: names, rows }], dir, COLUMNS, req.labelsOnly, budget, decodeBytes);
    const { count, parts } = selectCached(cache, got, req);
    const head = new Uint8Array(4);
    new DataView(head.buffer).setUint32(0, count, true);
    return decode([head, ...parts], req.matchers);
  };

  const all = { start: T0 - 1, end: T0 + 4 * 300_000 };
  const cases: [string, Partial<SeriesRequest>, string[]?][] = [
    ['a metric name, every file', { matchers: [{ type: '=', name: '__name__', value: 'req_total' }] }],
    ['no name: every series', { matchers: [{ type: '!=', name: 'instance', value: 'i9' }] }],
    ['!= on a label some series lack (NULL, empty)', { matchers: [{ type: '=', name: '__name__', value: 'mem_bytes' }, { type: '!=', name: 'code', value: '' }] }],
    ['= "" matches an absent label', { matchers: [{ type: '=', name: 'code', value: '' }] }],
    ['a regular expression (the cache keeps more, the engine filters)', { matchers: [{ type: '=~', name: 'code', value: '20[01]' }] }],
    ['a time range cutting files', { matchers: [{ type: '=', name: '__name__', value: 'req_total' }], start: T0 + 290_000, end: T0 + 615_000 }],
    ['a range inside one file', { matchers: [{ type: '=', name: 'instance', value: 'i1' }], start: T0 + 330_000, end: T0 + 330_000 }],
    ['a range before every sample', { matchers: [{ type: '=', name: 'instance', value: 'i1' }], start: T0 - 60_000, end: T0 - 1 }],
    ['label sets only', { matchers: [{ type: '=~', name: '__name__', value: '.*' }], labelsOnly: true }],
    ['label sets of a range', { matchers: [{ type: '=', name: '__name__', value: 'mem_bytes' }], labelsOnly: true, start: T0 + 310_000, end: T0 + 320_000 }],
    ['some files only', { matchers: [{ type: '=', name: '__name__', value: 'mem_bytes' }] }, ['f1.parquet', 'f3.parquet']],
  ];
  const cache = new SampleCache();
  it.each(cases)('%s: the same series and samples as DuckDB over the same files', async (_name, partial, names = files) => {
    const req: SeriesRequest = { matchers: [], labelsOnly: false, ...all, ...partial };
    const want = await reference(req, names);
    // Cold (decoded now) and warm (held) alike.
    expect(await cached(cache, req, names)).toEqual(want);
    expect(await cached(cache, req, names)).toEqual(want);
  });

  // labels and label values from reduced label sets (labelProjection.ts): the engine's answer (union of
  // names, of the label's non-empty values, after every matcher) equals the one from whole label sets.
  const answer = (sets: Decoded[], p: Projection) => {
    const out = new Set<string>();
    for (const s of sets)
      for (const pair of s.labels.split(',')) {
        const [k, v] = pair.split('=');
        if (p.op === 'labels' && v) out.add(k);
        else if (k === p.name && v) out.add(v);
      }
    return [...out].sort();
  };
  const projected: [string, Projection, Partial<SeriesRequest>][] = [
    ['labels, every series', { op: 'labels' }, { matchers: [{ type: '=~', name: '__name__', value: '.*' }] }],
    ['labels of one metric', { op: 'labels' }, { matchers: [{ type: '=', name: '__name__', value: 'mem_bytes' }] }],
    ['labels, a regular expression on a label', { op: 'labels' }, { matchers: [{ type: '=~', name: 'code', value: '20[01]' }] }],
    ['labels of a range', { op: 'labels' }, { matchers: [{ type: '=', name: '__name__', value: 'mem_bytes' }], start: T0 + 310_000, end: T0 + 320_000 }],
    ['values of __name__', { op: 'label_values', name: '__name__' }, { matchers: [{ type: '=~', name: '__name__', value: '.*' }] }],
    ['values of code (absent, empty, set)', { op: 'label_values', name: 'code' }, { matchers: [{ type: '=~', name: '__name__', value: '.*' }] }],
    ['values of code where instance != i0', { op: 'label_values', name: 'code' }, { matchers: [{ type: '!=', name: 'instance', value: 'i0' }] }],
    ['values of instance where code =~ 2.*', { op: 'label_values', name: 'instance' }, { matchers: [{ type: '=~', name: 'code', value: '2.*' }] }],
    ['values of a label no series has', { op: 'label_values', name: 'nope' }, { matchers: [{ type: '=~', name: '__name__', value: '.*' }] }],
  ];
  it.each(projected)('%s: the same answer from reduced label sets as from whole ones', async (_name, p, partial) => {
    const req: SeriesRequest = { matchers: [], ...all, ...partial, labelsOnly: true };
    const want = answer(await reference(req, files), p);
    const got = await cache.get(conn, [{ sql: relation(PATH_PLACEHOLDER), paths: files }], dir, COLUMNS, true, 1e9);
    const { count, parts } = selectProjected(cache, got, req, p);
    const head = new Uint8Array(4);
    new DataView(head.buffer).setUint32(0, count, true);
    expect(answer(decode([head, ...parts], req.matchers), p)).toEqual(want);
  });

  it.each([
    ['no bound: every file in one query', Infinity],
    ['about two files a query', 2 * 120 * SAMPLE_BYTES],
    ['one file a query', 1],
  ])('decodes in batches (%s): no query decodes more samples than its bound, answers exact', async (_name, bound) => {
    const req: SeriesRequest = { matchers: [{ type: '!=', name: 'instance', value: 'i9' }], labelsOnly: false, ...all };
    const batched = new SampleCache();
    expect(await cached(batched, req, files, 1e9, bound)).toEqual(await reference(req, files));
    // Counted, not timed: each query's decoded samples (17 bytes each) within the bound, or one file alone.
    const decodes = batched.lastDecodes;
    expect(decodes.reduce((a, d) => a + d.files, 0)).toBe(files.length);
    for (const d of decodes) expect(d.sampleBytes <= bound || d.files === 1).toBe(true);
    expect(decodes.reduce((a, d) => a + d.sampleBytes, 0)).toBe(files.reduce((a, n) => a + fileRows(Number(/\d+/.exec(n)![0])), 0) * SAMPLE_BYTES);
    // Files too many for one query under the bound take more than one.
    const total = files.reduce((a, n) => a + fileRows(Number(/\d+/.exec(n)![0])) * SAMPLE_BYTES, 0);
    expect(decodes.length).toBeGreaterThanOrEqual(Math.min(files.length, Math.ceil(total / bound)));
    // Held files are not decoded again.
    await cached(batched, req, files, 1e9, bound);
    expect(batched.lastDecodes).toEqual([]);
  });

  it('past its budget the least recently used files go, and answers stay exact', async () => {
    const small = new SampleCache();
    const req: SeriesRequest = { matchers: [{ type: '=', name: '__name__', value: 'req_total' }], labelsOnly: false, ...all };
    await cached(small, req, files.slice(0, 2));
    const two = small.size;
    expect(two).toBeGreaterThan(0);
    // A budget of about one file: loading two more drops the older ones.
    expect(await cached(small, req, files.slice(2), two / 2 + 1)).toEqual(await reference(req, files.slice(2)));
    expect(small.size).toBeLessThanOrEqual(two);
    expect(await cached(small, req, files, two / 2 + 1)).toEqual(await reference(req, files));
    expect(await cached(new SampleCache(), req, files, 0)).toEqual(await reference(req, files));
  });
});
