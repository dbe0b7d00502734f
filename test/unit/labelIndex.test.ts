import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROMETHEUS_KNOWN_TYPES } from '../../src/ingest/prometheus/columns.ts';
import { LabelIndex } from '../../src/query/promql/labelIndex.ts';
import { compareLabels, compareUtf8, goJsonString } from '../../src/query/promql/metaAnswer.ts';
import { parseMetaSelector } from '../../src/query/promql/metaSelector.ts';
import type { PromqlRequest } from '../../src/query/promql/executor.ts';
import type { Snapshot, TableSource } from '../../src/storage/scan.ts';
import { writeSeriesIndex } from '../../src/storage/files/seriesIndex.ts';
import type { ColumnType } from '../../src/model.ts';

/*
 * The in-process label index (labelIndex.ts) over real series-index sidecars (written by storage's
 * writeSeriesIndex with DuckDB) and real WAL lines, compared with an independent computation from the
 * samples: a label set counts when, in some file, its first..last time there overlaps [start, end], or
 * when a WAL row of it is in [start, end] (the worker path's rules); matchers as Prometheus reads them.
 */

const SCHEMA: Record<string, ColumnType> = { metric_name: 'VARCHAR', job: 'VARCHAR', code: 'VARCHAR', time_unix_nano: 'TIMESTAMP_NS', data_point_value: 'DOUBLE', is_stale_marker: 'BOOLEAN' };
type Labels = Record<string, string>;
type Sample = { labels: Labels; t: number };

const up = { __name__: 'up', job: 'a' };
const upB = { __name__: 'up', job: 'b' };
const req5 = { __name__: 'http_requests_total', job: 'a', code: '500' };
const req2 = { __name__: 'http_requests_total', job: 'a', code: '200' };
const odd = { __name__: 'odd<&>', job: 'x y', code: '\u{1F600}' };

/** Samples per file (minute files from 0): `up` pauses inside file 1 (a span that covers a gap), req5 starts in file 2. */
const FILES: Sample[][] = [
  [{ labels: up, t: 0 }, { labels: up, t: 30_000 }, { labels: req2, t: 15_000 }],
  [{ labels: up, t: 60_000 }, { labels: up, t: 115_000 }, { labels: upB, t: 90_000 }],
  [{ labels: req5, t: 130_000 }, { labels: odd, t: 150_000 }],
];
/** The WAL (two sealed segments): rows, each a point in time (no span). */
const WAL: Sample[][] = [
  [{ labels: up, t: 180_000 }, { labels: upB, t: 200_000 }, { labels: upB, t: 260_000 }],
  [{ labels: { __name__: 'late', job: 'a' }, t: 240_000 }],
];

const row = (s: Sample) => ({ metric_name: s.labels.__name__, job: s.labels.job ?? null, code: s.labels.code ?? null, time_unix_nano: new Date(s.t).toISOString(), data_point_value: 1, is_stale_marker: false });

let dir: string;
let duck: DuckDBInstance;
type HeldFile = Snapshot['files'][number];
let files: HeldFile[];
let segments: Snapshot['segments'];

async function writeFile(i: number, samples: Sample[]): Promise<HeldFile> {
  const data = path.join(dir, `f${i}.parquet`);
  const json = path.join(dir, `f${i}.json`);
  await fs.writeFile(json, samples.map((s) => JSON.stringify(row(s))).join('\n'));
  const conn = await duck.connect();
  const cols = Object.entries(SCHEMA).map(([n, t]) => `'${n}': '${t}'`).join(', ');
  await conn.run(`COPY (SELECT * FROM read_json('${json}', format = 'newline_delimited', columns = {${cols}})) TO '${data}' (FORMAT parquet)`);
  conn.closeSync();
  const seriesIndex = await writeSeriesIndex(duck, { dataPath: data, columns: Object.entries(SCHEMA), timeColumn: 'time_unix_nano', target: `${data}.series`, zstdLevel: 1 });
  const times = samples.map((s) => s.t);
  return { key: `f${i}`, rows: samples.length, bytes: 1, minMs: Math.min(...times), maxMs: Math.max(...times), columns: Object.keys(SCHEMA), nodeId: 'n', seriesIndex, path: `${data}.series`, index: true };
}

/** A table source over the files (those overlapping the range, as the catalog selects) and segments. */
function sourceOf(schema: Record<string, ColumnType> = SCHEMA, opts: { files?: () => HeldFile[] } = {}): TableSource & { snapshots: number } {
  const src = {
    snapshots: 0,
    resolve: async () => undefined,
    snapshot: async () => {
      throw new Error('not used');
    },
    seriesSnapshot: async (_: string, startMs: number, endMs: number): Promise<Snapshot> => {
      src.snapshots++;
      const all = opts.files?.() ?? files;
      const meta = { name: 'm', generation: 'g', kind: 'metrics', timeColumn: 'time_unix_nano', createdAt: '' } as unknown as Snapshot['meta'];
      return { meta, schema: schema as Snapshot['schema'], files: all.filter((f) => f.maxMs >= startMs && f.minMs < endMs), segments, release: () => undefined };
    },
    seriesIndexDamaged: () => undefined,
    setAsideDamaged: async () => undefined,
  };
  return src;
}

const newIndex = (source: TableSource, maxBytes = 1 << 24, coldReadMax?: number) =>
  new LabelIndex({ source, duck, fixedColumns: new Set(Object.keys(PROMETHEUS_KNOWN_TYPES)), maxBytes, ...(coldReadMax === undefined ? {} : { coldReadMax }) });

/** The reference: label sets per the rules above, from the samples themselves. */
function expected(req: PromqlRequest, matches: (l: Labels) => boolean): unknown {
  const sets = new Map<string, Labels>();
  for (const f of FILES) {
    const byKey = new Map<string, number[]>();
    for (const s of f) byKey.set(JSON.stringify(s.labels), [...(byKey.get(JSON.stringify(s.labels)) ?? []), s.t]);
    for (const [k, ts] of byKey) if (Math.max(...ts) >= req.start! && Math.min(...ts) <= req.end!) sets.set(k, JSON.parse(k) as Labels);
  }
  for (const s of WAL.flat()) if (s.t >= req.start! && s.t <= req.end!) sets.set(JSON.stringify(s.labels), s.labels);
  const chosen = [...sets.values()].filter(matches);
  const bytes = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));
  if (req.op === 'series') return chosen.map((l) => Object.fromEntries(Object.entries(l).sort(([a], [b]) => bytes(a, b)))).sort((a, b) => bytes(JSON.stringify(a), JSON.stringify(b)));
  const out = new Set(chosen.flatMap((l) => (req.op === 'labels' ? Object.keys(l) : l[req.name!] ? [l[req.name!]] : [])));
  return [...out].sort(bytes);
}

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'labelidx-'));
  duck = await DuckDBInstance.create(':memory:');
  files = await Promise.all(FILES.map((f, i) => writeFile(i, f)));
  segments = await Promise.all(
    WAL.map(async (rows, i) => {
      const p = path.join(dir, `${String(i + 1).padStart(12, '0')}.ndjson`);
      const text = `${rows.map((r) => JSON.stringify(row(r))).join('\n')}\n{}\n`;
      await fs.writeFile(p, text);
      return { seq: i + 1, path: p, bytes: Buffer.byteLength(text), rows: rows.length, rawBytes: 0 };
    }),
  );
});
afterAll(async () => {
  duck?.closeSync();
  await fs.rm(dir, { recursive: true, force: true });
});

describe('LabelIndex answers as the worker path would', () => {
  const all = () => true;
  const cases: [string, PromqlRequest, (l: Labels) => boolean][] = [
    ['labels, everything', { op: 'labels', start: 0, end: 300_000 }, all],
    ['names in a range inside a file: a span covers its gap (up in file 1)', { op: 'label_values', name: '__name__', start: 70_000, end: 80_000 }, all],
    ['a range ending exactly at a first sample', { op: 'label_values', name: '__name__', start: 116_000, end: 130_000 }, all],
    ['a range starting one ms after a last sample', { op: 'label_values', name: '__name__', start: 150_001, end: 179_999 }, all],
    ['WAL rows are points: between two rows of a series, none', { op: 'label_values', name: 'job', start: 201_000, end: 259_999 }, all],
    ['WAL row exactly at end', { op: 'series', start: 201_000, end: 260_000, match: ['up'] }, (l) => l.__name__ === 'up'],
    ['series, equality and inequality', { op: 'series', start: 0, end: 300_000, match: ['{job="a", code!="500"}'] }, (l) => l.job === 'a' && l.code !== '500'],
    ['series, a union of selectors', { op: 'series', start: 0, end: 300_000, match: ['up{job="b"}', 'http_requests_total'] }, (l) => (l.__name__ === 'up' && l.job === 'b') || l.__name__ === 'http_requests_total'],
    ['a regex of literals, anchored', { op: 'label_values', name: 'job', start: 0, end: 300_000, match: ['{__name__=~"up|late"}'] }, (l) => ['up', 'late'].includes(l.__name__)],
    ['a negated regex; an absent label is the empty value', { op: 'series', start: 0, end: 300_000, match: ['{code!~"500|200", __name__=~".+"}'] }, (l) => !['500', '200'].includes(l.code ?? '')],
    ['an empty value matches the absent label', { op: 'series', start: 0, end: 300_000, match: ['{code="", job=~".*", __name__!=""}'] }, (l) => !l.code],
    ['strings in single quotes and backticks', { op: 'label_values', name: 'code', start: 0, end: 300_000, match: [`{job='a', __name__=\`http_requests_total\`}`] }, (l) => l.job === 'a' && l.__name__ === 'http_requests_total'],
    ['text that needs escaping, and astral characters', { op: 'series', start: 0, end: 300_000, match: ['{job="x y"}'] }, (l) => l.job === 'x y'],
    ['nothing in range', { op: 'labels', start: 400_000, end: 500_000 }, all],
  ];
  let index: LabelIndex;
  beforeAll(() => {
    index = newIndex(sourceOf());
  });
  for (const [name, req, matches] of cases) {
    it(name, async () => {
      const json = await index.answer('m', req);
      expect(json, 'the index did not answer').toBeDefined();
      const body = JSON.parse(json!) as { status: string; data: unknown };
      expect(body.status).toBe('success');
      expect(body.data).toEqual(expected(req, matches));
    });
  }

  it('cuts at limit after sorting, with Prometheus’ warning', async () => {
    const body = JSON.parse((await index.answer('m', { op: 'label_values', name: '__name__', start: 0, end: 300_000, limit: 2 }))!) as { data: string[]; warnings?: string[] };
    expect(body.data).toEqual((expected({ op: 'label_values', name: '__name__', start: 0, end: 300_000 }, all) as string[]).slice(0, 2));
    expect(body.warnings).toEqual(['results truncated due to limit']);
  });

  it('writes strings as Go does (HTML characters escaped)', async () => {
    const json = (await index.answer('m', { op: 'label_values', name: '__name__', start: 0, end: 300_000, match: ['{job="x y"}'] }))!;
    expect(json).toBe('{"status":"success","data":["odd\\u003c\\u0026\\u003e"]}');
  });
});

describe('LabelIndex leaves to the worker path what it cannot answer exactly', () => {
  const cases: [string, PromqlRequest, Record<string, ColumnType>?, (() => HeldFile[])?][] = [
    ['a regex beyond literals', { op: 'labels', start: 0, end: 1e6, match: ['{__name__=~"u[p]"}'] }],
    ['a string with an escape', { op: 'labels', start: 0, end: 1e6, match: ['{job="a\\"b"}'] }],
    ['a selector that matches every value (the engine’s error)', { op: 'labels', start: 0, end: 1e6, match: ['{job=~".*"}'] }],
    ['a syntax error (the engine’s error)', { op: 'labels', start: 0, end: 1e6, match: ['up{'] }],
    ['series without match[] (the engine’s error)', { op: 'series', start: 0, end: 1e6 }],
    ['a dataset with OTLP points', { op: 'labels', start: 0, end: 1e6 }, { ...SCHEMA, data_point_flags: 'BIGINT' }],
    ['a file without a usable index', { op: 'labels', start: 0, end: 1e6 }, SCHEMA, () => files.map((f, i) => (i === 1 ? { ...f, index: undefined } : f))],
  ];
  for (const [name, req, schema, list] of cases) {
    it(name, async () => {
      expect(await newIndex(sourceOf(schema, { files: list })).answer('m', req)).toBeUndefined();
    });
  }

  it('a WAL row whose label is not text', async () => {
    const p = path.join(dir, 'bad.ndjson');
    const text = `${JSON.stringify({ ...row({ labels: up, t: 1 }), job: 7 })}\n{}\n`;
    await fs.writeFile(p, text);
    const saved = segments;
    segments = [{ seq: 9, path: p, bytes: text.length, rows: 1, rawBytes: 0 }];
    try {
      expect(await newIndex(sourceOf()).answer('m', { op: 'labels', start: 0, end: 1e6 })).toBeUndefined();
    } finally {
      segments = saved;
    }
  });

  it('past its memory bound', async () => {
    expect(await newIndex(sourceOf(), 100).answer('m', { op: 'labels', start: 0, end: 1e6 })).toBeUndefined();
  });
});

describe('LabelIndex follows the snapshot', () => {
  it('label sets whose values hold separator-like characters stay apart', async () => {
    const tricky = { __name__: 'c', code: 'x\u0001job\u0000y' };
    const plain = { __name__: 'c', code: 'x', job: 'y' };
    const p = path.join(dir, 'tricky.ndjson');
    const text = `${[tricky, plain].map((labels) => JSON.stringify(row({ labels, t: 5 }))).join('\n')}\n{}\n`;
    await fs.writeFile(p, text);
    const saved = segments;
    segments = [{ seq: 10, path: p, bytes: Buffer.byteLength(text), rows: 2, rawBytes: 0 }];
    try {
      const json = await newIndex(sourceOf(SCHEMA, { files: () => [] })).answer('m', { op: 'series', start: 0, end: 10, match: ['c'] });
      expect(JSON.parse(json!).data).toEqual([plain, tricky]);
    } finally {
      segments = saved;
    }
  });

  it('forgets files that left the catalog (compaction) and segments flushed, and answers from the new ones', async () => {
    let current = files;
    const source = sourceOf(SCHEMA, { files: () => current });
    const index = newIndex(source);
    const req: PromqlRequest = { op: 'label_values', name: '__name__', start: 0, end: 1e6 };
    expect(JSON.parse((await index.answer('m', req))!).data).toEqual(expected(req, () => true));
    const before = index.bytes;
    // Files 0 and 1 merged into one; file 2 dropped by retention; the WAL flushed (its segments gone).
    const merged = await writeFile(9, [...FILES[0], ...FILES[1]]);
    current = [merged];
    const saved = segments;
    segments = [];
    try {
      const body = JSON.parse((await index.answer('m', req))!) as { data: string[] };
      expect(body.data).toEqual([...new Set([...FILES[0], ...FILES[1]].map((s) => s.labels.__name__))].sort());
      // Eviction settles on the entries' promises.
      await new Promise((r) => setImmediate(r));
      expect(index.bytes).toBeLessThan(before + 3 * 20);
    } finally {
      segments = saved;
    }
  });
});

describe('LabelIndex when cold', () => {
  const names = new Set([...FILES.flat(), ...WAL.flat()].flatMap((x) => Object.keys(x.labels)));
  const manyFiles = () => Promise.all([10, 11, 12, 13, 14].map((i) => writeFile(i, FILES[i % 3].map((x) => ({ ...x, t: x.t + i * 600_000 })))));
  const req: PromqlRequest = { op: 'labels', start: 0, end: 1e8 };

  it('leaves a call over more files not held than it reads at once to the workers, reads them meanwhile, then answers', async () => {
    const many = await manyFiles();
    const index = newIndex(sourceOf(SCHEMA, { files: () => many }), 1 << 24, 4);
    expect(await index.answer('m', req)).toBeUndefined();
    await expect.poll(async () => index.answer('m', req)).toBeDefined();
    expect(JSON.parse((await index.answer('m', req))!).data).toEqual([...names].sort());
  });

  it('reads the files of a first call in one go and answers it, and the calls beside it', async () => {
    const many = await manyFiles();
    const index = newIndex(sourceOf(SCHEMA, { files: () => many }));
    const answers = await Promise.all([index.answer('m', req), index.answer('m', req), index.answer('m', { ...req, op: 'label_values', name: '__name__' })]);
    for (const a of answers.slice(0, 2)) expect(JSON.parse(a!).data).toEqual([...names].sort());
    expect(JSON.parse(answers[2]!).data).toEqual([...new Set([...FILES.flat(), ...WAL.flat()].map((x) => x.labels.__name__))].sort());
  });
});

describe('parseMetaSelector', () => {
  const cases: [string, boolean][] = [
    ['up', true],
    ['up{}', true],
    [' up { job = "a" , } ', true],
    ['{__name__="up"}', true],
    ['up{__name__="up"}', false],
    ['{}', false],
    ['{job=""}', false],
    ['sum', false],
    ['up[5m]', false],
    ['{"quoted"="x"}', false],
    ['{job=~"a.b"}', false],
    ['{job=~"(a|b)"}', false],
    ['up offset 5m', false],
  ];
  for (const [text, ok] of cases) it(`${text} → ${ok ? 'answered here' : 'the engine'}`, () => expect(parseMetaSelector(text) !== undefined).toBe(ok));
});

describe('Go’s orders and strings', () => {
  const strings = ['a', 'b', 'ab', '', 'Z', '_', '\u00e9', '\uffff', '\ue000', '\u{10000}', '\u{1F600}', 'a\u{1F600}', 'a\uffff'];
  it('compareUtf8 is UTF-8 byte order', () => {
    const bytes = (a: string, b: string) => Math.sign(Buffer.compare(Buffer.from(a), Buffer.from(b)));
    for (const a of strings) for (const b of strings) expect(Math.sign(compareUtf8(a, b)), `${a} vs ${b}`).toBe(bytes(a, b));
  });
  it('compareLabels compares pair by pair, a prefix first', () => {
    expect(compareLabels([['a', '1']], [['a', '1'], ['b', '1']])).toBeLessThan(0);
    expect(compareLabels([['a', '2']], [['a', '1'], ['b', '1']])).toBeGreaterThan(0);
    expect(compareLabels([['b', '1']], [['a', '9']])).toBeGreaterThan(0);
  });
  it('goJsonString escapes as encoding/json', () => {
    expect(goJsonString('<a&b>\u2028"')).toBe('"\\u003ca\\u0026b\\u003e\\u2028\\""');
  });
});
