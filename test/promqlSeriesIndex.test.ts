import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { DeleteObjectCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import snappy from 'snappy';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WriteRequestV1 } from '../src/ingest/prometheus/decode.ts';
import { SIZE_FRESH_MS } from '../src/storage/objects/objectStore.ts';
import { listFiles } from './helpers/files.ts';
import { s3Env, startS3Server, type S3TestServer } from './helpers/s3server.ts';
import { startServer, tempDir, type TestServer } from './helpers/server.ts';
import { waitFor } from './helpers/wait.ts';

/**
 * The series index (docs/promql.md "Cost"): `series`, `labels` and `label/{name}/values` read each
 * data file's series index, and answer exactly what the samples say, at the edges of the files' time
 * ranges, after compaction, after a restart, on S3, and with indexes deleted or damaged.
 */

// An hour boundary two hours ago: every sample is in one hour (one compacted file), three minutes.
const T0 = Math.floor(Date.now() / 3_600_000) * 3_600_000 - 2 * 3_600_000;
const s = (offsetMs: number) => String((T0 + offsetMs) / 1000);

/** Four series over three one-minute files: alpha in minute 0, gamma across 0 and 1, delta in 1, beta in 2. */
const SERIES: { labels: Record<string, string>; at: number[] }[] = [
  { labels: { __name__: 'alpha', job: 'a' }, at: [0, 15_000, 30_000, 45_000] },
  { labels: { __name__: 'gamma', job: 'a', code: '500' }, at: [30_000, 45_000, 60_000, 75_000] },
  { labels: { __name__: 'delta', job: 'd' }, at: [90_000] },
  { labels: { __name__: 'beta', job: 'b' }, at: [120_000, 150_000] },
];

function body(): Buffer {
  const timeseries = SERIES.map((x) => ({
    labels: Object.entries(x.labels).map(([name, value]) => ({ name, value })),
    samples: x.at.map((t, i) => ({ timestamp: T0 + t, value: i })),
  }));
  return snappy.compressSync(Buffer.from(WriteRequestV1.encode(WriteRequestV1.fromObject({ timeseries })).finish()));
}

/** The calls and what the samples above make of them (start and end inclusive, as in Prometheus). */
const CALLS: [string, Record<string, string | string[]>, unknown][] = [
  ['labels', { start: s(0), end: s(180_000) }, ['__name__', 'code', 'job']],
  ['label/__name__/values', { start: s(0), end: s(180_000) }, ['alpha', 'beta', 'delta', 'gamma']],
  // alpha's last sample is at 45 s: a range starting there has it, one starting after it not.
  ['label/__name__/values', { start: s(45_000), end: s(59_999) }, ['alpha', 'gamma']],
  ['label/__name__/values', { start: s(45_001), end: s(75_000) }, ['gamma']],
  // gamma's last sample at 75 s and delta's only one at 90 s, both in minute 1: each edge inclusive.
  ['label/__name__/values', { start: s(75_000), end: s(90_000) }, ['delta', 'gamma']],
  ['label/__name__/values', { start: s(75_001), end: s(89_999) }, []],
  ['label/__name__/values', { start: s(76_000), end: s(120_000) }, ['beta', 'delta']],
  ['label/job/values', { 'match[]': '{__name__=~"alpha|beta"}', start: s(0), end: s(180_000) }, ['a', 'b']],
  ['labels', { 'match[]': 'beta', start: s(0), end: s(180_000) }, ['__name__', 'job']],
  [
    'series',
    { 'match[]': ['{job="a"}', 'beta'], start: s(0), end: s(180_000) },
    [
      { __name__: 'alpha', job: 'a' },
      { __name__: 'beta', job: 'b' },
      { __name__: 'gamma', code: '500', job: 'a' },
    ],
  ],
  ['series', { 'match[]': '{code!=""}', start: s(100_000), end: s(180_000) }, []],
  ['series', { 'match[]': '{job=~"a|d"}', start: s(60_000), end: s(119_999) }, [{ __name__: 'delta', job: 'd' }, { __name__: 'gamma', code: '500', job: 'a' }]],
];

async function write(server: TestServer): Promise<void> {
  const res = await server.request('/v1/prometheus/write?stream=idx', {
    method: 'POST',
    body: new Uint8Array(body()),
    headers: { 'content-encoding': 'snappy', 'content-type': 'application/x-protobuf' },
  });
  expect(res.status, await res.clone().text()).toBe(200);
}

async function stats(server: TestServer): Promise<{ storage: { files: number }; wal: { count: number } }> {
  return (await (await server.request('/api/v1/logstream/idx/stats')).json()) as { storage: { files: number }; wal: { count: number } };
}

/** Asks every call and checks each answer. */
async function expectAnswers(server: TestServer): Promise<void> {
  for (const [call, params, expected] of CALLS) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) for (const x of [v].flat()) q.append(k, x);
    const res = await server.request(`/prometheus/idx/api/v1/${call}?${q}`);
    const b = (await res.json()) as { status: string; data: unknown };
    expect({ call, params, status: res.status, data: b.data }).toEqual({ call, params, status: 200, data: expected });
  }
}

// The query time limit also sets how long removed files stay (twice it, plus a few seconds): long
// enough for a worker's first PromQL call (it compiles the engine) on a busy machine, short enough to
// see merged files go.
// Merged files' indexes are deleted with them once no Iceberg snapshot lists them: snapshots expire after seconds here.
// No PromQL sample cache: the index reads themselves are under test (a worker's cache answers from the
// indexes it decoded before they were damaged, and never reads them again).
const ENV = { P_PROMQL_CACHE_BYTES: '0', P_FLUSH_INTERVAL: '100ms', P_COMPACTION_INTERVAL: '1h', P_QUERY_TIMEOUT: '15s', P_CATALOG_REFRESH: '500ms', P_ICEBERG_INTERVAL: '500ms', P_ICEBERG_SNAPSHOT_RETENTION: '1s' };

describe('the series index (local storage)', () => {
  let dataDir: string;
  let server: TestServer | undefined;
  const store = () => path.join(dataDir, 'store', 'idx');
  afterAll(async () => server?.kill());

  it('is written beside each flushed file, and answers exactly at the files’ edges', async () => {
    dataDir = await tempDir();
    server = await startServer({ dataDir, env: ENV });
    await write(server);
    await waitFor('flush', async () => (await stats(server!)).wal.count === 0);
    const data = await listFiles(store(), '.parquet');
    expect(data.length).toBe(3);
    expect(await listFiles(store(), '.series')).toEqual(data.map((f) => `${f}.series`));
    await expectAnswers(server);
  }, 120_000);

  it('answers the same with indexes deleted, overwritten or truncated (their files are read instead)', async () => {
    const [a, b, c] = await listFiles(store(), '.series');
    await fs.rm(a);
    const size = (await fs.stat(b)).size;
    await fs.writeFile(b, Buffer.alloc(size, 0x5a));
    await fs.truncate(c, 10);
    // Past the window in which the store takes a size it saw for granted (recentSizes.ts): the
    // snapshots look at every file again.
    await new Promise((r) => setTimeout(r, SIZE_FRESH_MS + 100));
    await expectAnswers(server!);
    // The overwritten one has the right size: found unreadable by the query worker, which asked again.
    expect(server!.logs()).toContain('series index damaged');
    // A query of the samples never reads indexes.
    const res = await server!.request(`/prometheus/idx/api/v1/query?query=count(alpha)&time=${s(45_000)}`);
    expect(((await res.json()) as { data: { result: { value: [number, string] }[] } }).data.result[0].value[1]).toBe('1');
  });

  it('is written for compacted files, and indexes of merged files go with them', async () => {
    await server!.stop();
    server = await startServer({ dataDir, env: { ...ENV, P_COMPACTION_INTERVAL: '300ms' } });
    await waitFor('compaction', async () => (await stats(server!)).storage.files === 1);
    const [merged] = (await listFiles(store(), '.parquet')).filter((f) => f.endsWith('.compacted.parquet'));
    expect(merged).toBeDefined();
    await fs.access(`${merged}.series`);
    await expectAnswers(server);
    // After the grace period the merged inputs and their (remaining) indexes are deleted.
    await waitFor('old files deleted', async () => (await listFiles(store(), '.parquet')).length === 1 && (await listFiles(store(), '.series')).length === 1, 120_000);
  }, 180_000);

  it('answers the same after a restart', async () => {
    await server!.stop();
    server = await startServer({ dataDir, env: ENV });
    await expectAnswers(server);
  });

  it('counts rows not yet flushed (the write-ahead log) too', async () => {
    await server!.stop();
    server = await startServer({ dataDir, env: { ...ENV, P_FLUSH_INTERVAL: '1h' } });
    const res = await server.request('/v1/prometheus/write?stream=idx', {
      method: 'POST',
      body: new Uint8Array(
        snappy.compressSync(
          Buffer.from(WriteRequestV1.encode(WriteRequestV1.fromObject({ timeseries: [{ labels: [{ name: '__name__', value: 'fresh' }], samples: [{ timestamp: T0 + 170_000, value: 1 }] }] })).finish()),
        ),
      ),
      headers: { 'content-encoding': 'snappy', 'content-type': 'application/x-protobuf' },
    });
    expect(res.status).toBe(200);
    const values = async (start: number, end: number) =>
      ((await (await server!.request(`/prometheus/idx/api/v1/label/__name__/values?start=${s(start)}&end=${s(end)}`)).json()) as { data: string[] }).data;
    expect(await values(120_000, 180_000)).toEqual(['beta', 'fresh']);
    expect(await values(171_000, 180_000)).toEqual([]);
  });
});

describe('the series index on S3', () => {
  let s3: S3TestServer;
  let client: S3Client;
  const servers: TestServer[] = [];
  beforeAll(async () => {
    s3 = await startS3Server();
    client = new S3Client({ endpoint: s3.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: s3.accessKey, secretAccessKey: s3.secretKey } });
  }, 120_000);
  afterAll(async () => {
    for (const x of servers) await x.kill();
    client?.destroy();
    await s3?.close();
  });

  const keys = async () => ((await client.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: 'idx/' }))).Contents ?? []).map((o) => o.Key!).sort();

  it('is uploaded beside each file, and a worker with a cold cache answers from it, with damaged indexes too', async () => {
    const first = await startServer({ env: { ...ENV, ...s3Env(s3) } });
    servers.push(first);
    await write(first);
    await waitFor('flush', async () => (await stats(first)).wal.count === 0);
    const all = await keys();
    const data = all.filter((k) => k.endsWith('.parquet'));
    expect(data.length).toBe(3);
    expect(all.filter((k) => k.endsWith('.series'))).toEqual(data.map((k) => `${k}.series`));
    await expectAnswers(first);

    // A second worker (its own, empty cache) after one index is deleted and one overwritten.
    await client.send(new DeleteObjectCommand({ Bucket: s3.bucket, Key: `${data[0]}.series` }));
    const damaged = `${data[1]}.series`;
    const got = await client.send(new GetObjectCommand({ Bucket: s3.bucket, Key: damaged }));
    const size = (await got.Body!.transformToByteArray()).length;
    await client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: damaged, Body: Buffer.alloc(size, 0x5a) }));
    const second = await startServer({ env: { ...ENV, ...s3Env(s3) } });
    servers.push(second);
    await expectAnswers(second);
    expect(second.logs()).toContain('series index missing or damaged');
    expect(second.logs()).toContain('series index damaged');
  }, 180_000);
});

/**
 * OTLP metrics (a sum with an int attribute, a histogram, a summary) over three one-minute files: the
 * series index holds what the Prometheus mapping names series by, one tuple per series and file, and
 * series/labels/label values read it, with the same answers when an index is deleted or damaged.
 */
describe('the series index of OTLP metrics', () => {
  let dataDir: string;
  let server: TestServer | undefined;
  const store = () => path.join(dataDir, 'store', 'otlpidx');
  afterAll(async () => server?.kill());

  // Points at 0, 30, 60, 90 and 120 s; the status 500 series stops at 60 s with a "no recorded value" point.
  const TIMES = [0, 30_000, 60_000, 90_000, 120_000];
  const ns = (ms: number) => `${BigInt(T0 + ms) * 1_000_000n}`;
  const point = (ms: number) => ({ startTimeUnixNano: ns(-60_000), timeUnixNano: ns(ms) });
  function payload(): string {
    const status = (code: number) => [{ key: 'http.response.status_code', value: { intValue: String(code) } }];
    const reqs = [
      ...TIMES.map((t, i) => ({ ...point(t), asDouble: 10 * i, attributes: status(200) })),
      ...TIMES.slice(0, 3).map((t, i) => ({ ...point(t), asDouble: i, attributes: status(500), ...(i === 2 ? { flags: 1 } : {}) })),
    ];
    const lat = TIMES.map((t, i) => ({ ...point(t), count: String(3 * i), sum: 0.3 * i, bucketCounts: [String(i), String(i), String(i)], explicitBounds: [0.1, 0.5] }));
    const rpc = TIMES.map((t, i) => ({ ...point(t), count: String(i), sum: 5 * i, quantileValues: [{ quantile: 0.5, value: i }, { quantile: 0.99, value: 2 * i }] }));
    return JSON.stringify({
      resourceMetrics: [
        {
          resource: { attributes: [{ key: 'service.name', value: { stringValue: 'api' } }] },
          scopeMetrics: [
            {
              scope: { name: 'm' },
              metrics: [
                { name: 'reqs', unit: '{request}', sum: { aggregationTemporality: 2, isMonotonic: true, dataPoints: reqs } },
                { name: 'lat', unit: 's', histogram: { aggregationTemporality: 2, dataPoints: lat } },
                { name: 'rpc', unit: 'ms', summary: { dataPoints: rpc } },
              ],
            },
          ],
        },
      ],
    });
  }

  const common = { job: 'api', otel_scope_name: 'm', service_name: 'api' };
  const OTLP_CALLS: [string, Record<string, string | string[]>, unknown][] = [
    [
      'label/__name__/values',
      { start: s(0), end: s(180_000) },
      ['lat_seconds_bucket', 'lat_seconds_count', 'lat_seconds_sum', 'reqs_total', 'rpc_milliseconds', 'rpc_milliseconds_count', 'rpc_milliseconds_sum'],
    ],
    ['label/http_response_status_code/values', { start: s(0), end: s(180_000) }, ['200', '500']],
    // The 500 series' last point is at 60 s: a range starting there has it, one starting after it not.
    ['label/http_response_status_code/values', { start: s(60_000), end: s(180_000) }, ['200', '500']],
    ['label/http_response_status_code/values', { start: s(60_001), end: s(180_000) }, ['200']],
    ['label/le/values', { start: s(0), end: s(180_000) }, ['+Inf', '0.1', '0.5']],
    ['label/quantile/values', { 'match[]': 'rpc_milliseconds', start: s(0), end: s(180_000) }, ['0.5', '0.99']],
    ['labels', { 'match[]': 'rpc_milliseconds', start: s(0), end: s(180_000) }, ['__name__', 'job', 'otel_scope_name', 'quantile', 'service_name']],
    ['labels', { 'match[]': 'reqs_total', start: s(0), end: s(180_000) }, ['__name__', 'http_response_status_code', 'job', 'otel_scope_name', 'service_name']],
    [
      'series',
      { 'match[]': ['reqs_total', 'lat_seconds_sum'], start: s(0), end: s(180_000) },
      [
        { __name__: 'lat_seconds_sum', ...common },
        { __name__: 'reqs_total', http_response_status_code: '200', ...common },
        { __name__: 'reqs_total', http_response_status_code: '500', ...common },
      ],
    ],
    ['series', { 'match[]': 'rpc_milliseconds', start: s(100_000), end: s(180_000) }, ['0.5', '0.99'].map((quantile) => ({ __name__: 'rpc_milliseconds', quantile, ...common }))],
  ];

  async function expectOtlpAnswers(): Promise<void> {
    for (const [call, params, expected] of OTLP_CALLS) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(params)) for (const x of [v].flat()) q.append(k, x);
      const res = await server!.request(`/prometheus/otlpidx/api/v1/${call}?${q}`);
      const b = (await res.json()) as { status: string; data: unknown };
      expect({ call, params, status: res.status, data: b.data }).toEqual({ call, params, status: 200, data: expected });
    }
  }

  it('holds the mapping’s columns, one tuple per series and file, and answers from them', async () => {
    dataDir = await tempDir();
    server = await startServer({ dataDir, env: ENV });
    const res = await server.request('/v1/metrics', {
      method: 'POST',
      body: payload(),
      headers: { 'content-type': 'application/json', 'X-P-Stream': 'otlpidx', 'X-P-Log-Source': 'otel-metrics' },
    });
    expect(res.status, await res.clone().text()).toBe(200);
    await waitFor('flush', async () => ((await (await server!.request('/api/v1/logstream/otlpidx/stats')).json()) as { wal: { count: number } }).wal.count === 0);
    const data = await listFiles(store(), '.parquet');
    expect(data.length).toBe(3);
    expect(await listFiles(store(), '.series')).toEqual(data.map((f) => `${f}.series`));
    const duck = await DuckDBInstance.create(':memory:');
    const conn = await duck.connect();
    try {
      const perFile: number[] = [];
      for (const f of data) {
        const columns = (await conn.runAndReadAll(`DESCRIBE SELECT * FROM read_parquet('${f}.series')`)).getRowObjectsJS().map((r) => r.column_name);
        expect(columns).toEqual(expect.arrayContaining(['data_point_flags', 'http.response.status_code', 'data_point_quantile_values', 'data_point_explicit_bounds']));
        expect(columns).not.toContain('data_point_value');
        perFile.push(Number((await conn.runAndReadAll(`SELECT count(*) FROM read_parquet('${f}.series')`)).getRowsJS()[0][0]));
      }
      // Minute 0: reqs 200 and 500, lat, rpc; minute 1: the same (500's point at 60 s has no value);
      // minute 2: no 500. Not one per point (5 + 3 + 5 + 5 of them).
      expect(perFile).toEqual([4, 4, 3]);
    } finally {
      conn.closeSync();
      duck.closeSync();
    }
    await expectOtlpAnswers();
  }, 120_000);

  it('answers the same with an index deleted or damaged (its file read instead)', async () => {
    const [a, b] = await listFiles(store(), '.series');
    await fs.rm(a);
    await fs.writeFile(b, Buffer.alloc((await fs.stat(b)).size, 0x5a));
    await expectOtlpAnswers();
    // The overwritten one has the right size: read (and found unreadable) by the query worker.
    expect(server!.logs()).toContain('series index damaged');
  });
});
