import snappy from 'snappy';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WriteRequestV1 } from '../src/ingest/prometheus/decode.ts';
import * as fs from 'node:fs';
import { ADMIN_KEY, startServer, type TestServer } from './helpers/server.ts';
import { waitFor } from './helpers/wait.ts';

/**
 * The Prometheus query API (docs/promql.md) as its clients use it: samples go in by remote write, and
 * queries come back over /prometheus/…/api/v1 in Prometheus' JSON envelope. The values asserted are
 * what PromQL's definitions give for the samples written (rate of a counter rising 15 every 15 s is 1/s).
 */

// Whole minutes, an hour ago: every sample is inside the 5-minute lookback of the times asked below.
const T0 = Math.floor(Date.now() / 60_000) * 60_000 - 3_600_000;
const sec = (ms: number) => ms / 1000;

type Series = { labels: Record<string, string>; samples: [number, number][] };

function body(series: Series[], staleAt?: { index: number; t: number }): Buffer {
  const raw = Buffer.from(
    WriteRequestV1.encode(
      WriteRequestV1.fromObject({
        timeseries: series.map((s, i) => ({
          labels: Object.entries(s.labels).map(([name, value]) => ({ name, value })),
          samples: [...s.samples.map(([timestamp, value]) => ({ timestamp, value })), ...(staleAt?.index === i ? [{ timestamp: staleAt.t, value: 424242 }] : [])],
        })),
      }),
    ).finish(),
  );
  if (staleAt) {
    // Turn the marker sample's value into Prometheus' staleness NaN (payload 2), bit for bit.
    const probe = Buffer.alloc(9);
    probe[0] = 0x09;
    probe.writeDoubleLE(424242, 1);
    const at = raw.indexOf(probe);
    raw.writeBigUInt64LE(0x7ff0000000000002n, at + 1);
  }
  return snappy.compressSync(raw);
}

async function write(server: TestServer, dataset: string, b: Buffer): Promise<void> {
  const res = await server.request(`/v1/prometheus/write?stream=${dataset}`, {
    method: 'POST',
    body: new Uint8Array(b),
    headers: { 'content-encoding': 'snappy', 'content-type': 'application/x-protobuf' },
  });
  expect(res.status, await res.clone().text()).toBe(200);
}

const counter = (labels: Record<string, string>, perStep: number, steps = 41): Series => ({
  labels: { __name__: 'http_requests_total', ...labels },
  samples: Array.from({ length: steps }, (_, i) => [T0 + i * 15_000, i * perStep] as [number, number]),
});

interface Envelope {
  status: string;
  data?: { resultType: string; result: { metric: Record<string, string>; value?: [number, string]; values?: [number, string][] }[] } | unknown;
  errorType?: string;
  error?: string;
  warnings?: string[];
}

describe('PromQL over remote-write data', () => {
  let server: TestServer;
  const api = (path: string, init: RequestInit = {}) => server.request(`/prometheus/api/v1/${path}`, { ...init, headers: { 'X-P-Stream': 'prom', ...(init.headers as Record<string, string>) } });
  const get = async (path: string, init: RequestInit = {}): Promise<{ status: number; body: Envelope }> => {
    const res = await api(path, init);
    return { status: res.status, body: (await res.json()) as Envelope };
  };

  beforeAll(async () => {
    server = await startServer({ env: { P_API_KEYS: `${ADMIN_KEY}:admin,reader-a:reader:prom,reader-b:reader:other,writer-key:writer` } });
    await write(
      server,
      'prom',
      body(
        [
          counter({ job: 'api', code: '200' }, 15),
          counter({ job: 'api', code: '500' }, 3),
          { labels: { __name__: 'temperature', room: 'lab' }, samples: [[T0, Number.POSITIVE_INFINITY], [T0 + 15_000, Number.NaN], [T0 + 30_000, 21.5]] },
          { labels: { __name__: 'queue_depth', queue: 'q1' }, samples: [[T0, 7], [T0 + 60_000, 9]] },
          { labels: { __name__: 'zero', i: 'a' }, samples: [[T0, 0]] },
          { labels: { __name__: 'zero', i: 'b' }, samples: [[T0, -0]] },
        ],
        { index: 3, t: T0 + 120_000 },
      ),
    );
    await write(server, 'other', body([{ labels: { __name__: 'secret_metric' }, samples: [[T0, 1]] }]));
  }, 120_000);
  afterAll(async () => server?.stop());

  it('answers an instant query: rate, sum by, in Prometheus envelope', async () => {
    const t = sec(T0 + 600_000);
    const { status, body: b } = await get(`query?query=${encodeURIComponent('sum by (code) (rate(http_requests_total[1m]))')}&time=${t}`);
    expect(status).toBe(200);
    expect(b.status).toBe('success');
    const data = b.data as { resultType: string; result: { metric: Record<string, string>; value: [number, string] }[] };
    expect(data.resultType).toBe('vector');
    const byCode = Object.fromEntries(data.result.map((r) => [r.metric.code, r.value]));
    expect(Object.keys(byCode).sort()).toEqual(['200', '500']);
    expect(byCode['200'][0]).toBe(t);
    // Floating-point rate arithmetic: 1 and 0.2 to the last bit or two, as Prometheus computes them.
    expect(Number(byCode['200'][1])).toBeCloseTo(1, 12);
    expect(Number(byCode['500'][1])).toBeCloseTo(0.2, 12);
  });

  it('answers query_range by GET and by form POST, with the same answer', async () => {
    const params = new URLSearchParams({ query: 'http_requests_total{code="500"} * 2', start: String(sec(T0)), end: String(sec(T0 + 60_000)), step: '30s' });
    const viaGet = await get(`query_range?${params}`);
    const viaPost = await get('query_range', { method: 'POST', body: params.toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expect(viaGet.status).toBe(200);
    expect(viaPost.body).toEqual(viaGet.body);
    const data = viaGet.body.data as { resultType: string; result: { metric: Record<string, string>; values: [number, string][] }[] };
    expect(data.resultType).toBe('matrix');
    expect(data.result).toEqual([{ metric: { code: '500', job: 'api' }, values: [[sec(T0), '0'], [sec(T0 + 30_000), '12'], [sec(T0 + 60_000), '24']] }]);
  });

  it('writes NaN and ±Inf as strings, and a staleness marker ends a series before the lookback does', async () => {
    const inf = await get(`query?query=temperature&time=${sec(T0)}`);
    expect((inf.body.data as { result: { value: [number, string] }[] }).result[0].value).toEqual([sec(T0), '+Inf']);
    const nan = await get(`query?query=temperature&time=${sec(T0 + 15_000)}`);
    expect((nan.body.data as { result: { value: [number, string] }[] }).result[0].value).toEqual([sec(T0 + 15_000), 'NaN']);
    const before = await get(`query?query=queue_depth&time=${sec(T0 + 119_000)}`);
    expect((before.body.data as { result: { value: [number, string] }[] }).result.map((r) => r.value[1])).toEqual(['9']);
    // 60 s after the last sample, well inside the 5-minute lookback: the marker at +120 s ended it.
    const after = await get(`query?query=queue_depth&time=${sec(T0 + 121_000)}`);
    expect((after.body.data as { result: unknown[] }).result).toEqual([]);
  });

  it('answers metadata from the rows that carry it', async () => {
    const raw = WriteRequestV1.encode(
      WriteRequestV1.fromObject({
        timeseries: [{ labels: [{ name: '__name__', value: 'jobs_done_total' }], samples: [{ timestamp: T0, value: 1 }] }],
        metadata: [{ type: 1, metricFamilyName: 'jobs_done', help: 'Jobs done.', unit: '' }],
      }),
    ).finish();
    await write(server, 'prom', snappy.compressSync(Buffer.from(raw)));
    const { status, body: b } = await get('metadata?metric=jobs_done_total');
    expect(status).toBe(200);
    expect(b).toEqual({ status: 'success', data: { jobs_done_total: [{ type: 'counter', help: 'Jobs done.', unit: '' }] } });
  });

  it("takes Prometheus 2.x's holt_winters as its Prometheus 3 name, double_exponential_smoothing", async () => {
    const q = (fn: string) => `${fn}(http_requests_total[10m], 0.5, 0.5)`;
    const at = `&time=${sec(T0 + 600_000)}`;
    const renamed = await get(`query?query=${encodeURIComponent(q('double_exponential_smoothing'))}${at}`);
    const old = await get(`query?query=${encodeURIComponent(q('holt_winters'))}${at}`);
    expect(renamed.status).toBe(200);
    expect((renamed.body.data as { result: unknown[] }).result.length).toBeGreaterThan(0);
    expect(old).toEqual(renamed);
  });

  it('keeps the sign of a negative zero (count_values tells them apart)', async () => {
    const { body: b } = await get(`query?query=${encodeURIComponent('count_values("v", zero)')}&time=${sec(T0)}`);
    const data = b.data as { result: { metric: Record<string, string>; value: [number, string] }[] };
    expect(Object.fromEntries(data.result.map((r) => [r.metric.v, r.value[1]]))).toEqual({ '0': '1', '-0': '1' });
  });

  it('answers series, labels and label values, and the dataset-in-path spelling', async () => {
    const range = `start=${sec(T0 - 60_000)}&end=${sec(T0 + 3_600_000)}`;
    const series = await get(`series?match[]=${encodeURIComponent('http_requests_total')}&${range}`);
    expect(series.body).toEqual({
      status: 'success',
      data: [
        { __name__: 'http_requests_total', code: '200', job: 'api' },
        { __name__: 'http_requests_total', code: '500', job: 'api' },
      ],
    });
    const labels = await get(`labels?${range}`);
    expect(labels.body).toEqual({ status: 'success', data: ['__name__', 'code', 'i', 'job', 'queue', 'room'] });
    const names = await server.request(`/prometheus/prom/api/v1/label/__name__/values?${range}`);
    expect(((await names.json()) as { data: string[] }).data.filter((n) => n !== 'jobs_done_total')).toEqual(['http_requests_total', 'queue_depth', 'temperature', 'zero']);
    const limited = await get(`label/code/values?match[]=${encodeURIComponent('{job="api"}')}&limit=1`);
    expect(limited.body).toEqual({ status: 'success', data: ['200'], warnings: ['results truncated due to limit'] });
    const info = await get('status/buildinfo');
    expect(info.body).toMatchObject({ status: 'success', data: { version: expect.stringMatching(/^3\./) } });
    expect((await get('query_exemplars?query=up')).body).toEqual({ status: 'success', data: [] });
  });

  it('reports errors with Prometheus error types and statuses', async () => {
    const parse = await get('query?query=sum(');
    expect(parse.status).toBe(400);
    expect(parse.body).toMatchObject({ status: 'error', errorType: 'bad_data' });
    const step = await get(`query_range?query=up&start=10&end=0&step=15`);
    expect(step.status).toBe(400);
    expect(step.body.error).toContain('end timestamp must not be before start time');
    const exec = await get(`query?query=${encodeURIComponent('label_replace(up, "a", "b", "c", "(")')}`);
    // A regular expression is compiled when label_replace runs: an execution error.
    expect(exec.status).toBe(422);
    expect(exec.body).toMatchObject({ status: 'error', errorType: 'execution', error: expect.stringContaining('invalid regular expression') });
    const missing = await server.request(`/prometheus/api/v1/query?query=up`);
    expect(missing.status).toBe(400);
    expect(await missing.json()).toMatchObject({ status: 'error', errorType: 'bad_data' });
  });

  it('applies keys, roles and dataset scopes as the rest of the API', async () => {
    const as = (key: string, dataset: string) => server.request(`/prometheus/${dataset}/api/v1/query?query=${encodeURIComponent('{__name__=~".+"}')}&time=${sec(T0)}`, { headers: { 'X-API-Key': key } });
    expect((await as('reader-a', 'prom')).status).toBe(200);
    const denied = await as('reader-a', 'other');
    expect(denied.status).toBe(403);
    expect(await denied.json()).toMatchObject({ status: 'error' });
    // Same answer whether the dataset exists or not: nothing is revealed about B.
    expect((await as('reader-a', 'no-such-dataset')).status).toBe(403);
    const other = (await (await as('reader-b', 'other')).json()) as Envelope;
    expect((other.data as { result: { metric: Record<string, string> }[] }).result.map((r) => r.metric.__name__)).toEqual(['secret_metric']);
    expect((await as('writer-key', 'prom')).status).toBe(403);
    // A missing or unknown key, too, in Prometheus' envelope (what Grafana and vmalert read), on every spelling.
    for (const [path, headers] of [
      [`/prometheus/prom/api/v1/query?query=up`, { 'X-API-Key': 'wrong-key' }],
      [`/prometheus/api/v1/query_range?query=up&start=0&end=60&step=15`, { 'X-P-Stream': 'prom', Authorization: 'Bearer wrong-key' }],
      [`/prometheus/prom/api/v1/labels`, {}],
    ] as const) {
      const res = await fetch(`${server.url}${path}`, { headers });
      expect(res.status, path).toBe(401);
      expect(res.headers.get('www-authenticate'), path).toBe('Bearer');
      expect(await res.json(), path).toEqual({ status: 'error', errorType: 'unauthorized', error: expect.any(String) });
    }
    const viaHeader = await server.request(`/prometheus/api/v1/labels`, { headers: { 'X-API-Key': 'reader-a', 'X-P-Stream': 'other' } });
    expect(viaHeader.status).toBe(403);
  });
});

describe('PromQL over native histograms', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer();
    // A dataset that only ever got native histograms (no float value column at all).
    const h = { countInt: 12, sum: 100, schema: 0, zeroThreshold: 0.001, zeroCountInt: 2, positiveSpans: [{ offset: 0, length: 5 }], positiveDeltas: [2, 1, -3, 1, 3] };
    const raw = WriteRequestV1.encode(
      WriteRequestV1.fromObject({ timeseries: [{ labels: [{ name: '__name__', value: 'rpc_seconds' }], histograms: [{ ...h, timestamp: T0 }, { ...h, timestamp: T0 + 60_000, resetHint: 2 }] }] }),
    ).finish();
    await write(server, 'hist', snappy.compressSync(Buffer.from(raw)));
  }, 120_000);
  afterAll(async () => server?.stop());

  it('rebuilds them from their stored columns for the engine, and answers them in Prometheus histogram JSON', async () => {
    const ask = async (q: string) => (await (await server.request(`/prometheus/hist/api/v1/query?query=${encodeURIComponent(q)}&time=${sec(T0 + 60_000)}`)).json()) as Envelope;
    const result = (e: Envelope) => (e.data as { result: { value?: [number, string]; histogram?: [number, { count: string; sum: string; buckets: unknown[] }] }[] }).result;
    expect(result(await ask('histogram_count(rpc_seconds)'))[0].value).toEqual([sec(T0 + 60_000), '12']);
    expect(result(await ask('histogram_sum(rpc_seconds)'))[0].value).toEqual([sec(T0 + 60_000), '100']);
    // Prometheus' own test (native_histograms.test) gives 1.587401 for this histogram at 0.5.
    expect(Number(result(await ask('histogram_quantile(0.5, rpc_seconds)'))[0].value![1])).toBeCloseTo(1.587401, 5);
    const [sample] = result(await ask('rpc_seconds'));
    expect(sample.histogram![1]).toMatchObject({ count: '12', sum: '100' });
    expect(sample.histogram![1].buckets).toHaveLength(5);
  });
});

describe('PromQL limits', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({ env: { P_PROMQL_MAX_SAMPLES: '10' } });
    await write(server, 'm', body([counter({ job: 'a' }, 1), counter({ job: 'b' }, 1)]));
  }, 120_000);
  afterAll(async () => server?.stop());

  it('runs the engine as a child process of a query worker, which ends when its worker is killed', async () => {
    const ask = () => server.request(`/prometheus/m/api/v1/query?query=${encodeURIComponent('sum(http_requests_total)')}&time=${sec(T0 + 600_000)}`);
    expect((await ask()).status).toBe(200);
    const engines = engineProcesses(server.dataDir);
    expect(engines).toHaveLength(1);
    // The pool kills a worker this way past its time or memory limit, or when its client goes away.
    process.kill(engines[0].parent, 'SIGKILL');
    await waitFor('the engine to end with its worker', async () => !fs.existsSync(`/proc/${engines[0].pid}`));
    // A fresh worker starts a fresh engine.
    expect((await ask()).status).toBe(200);
    expect(engineProcesses(server.dataDir).map((e) => e.pid)).not.toContain(engines[0].pid);
  });

  it('fails a query over P_PROMQL_MAX_SAMPLES with 422 execution', async () => {
    const res = await server.request(`/prometheus/m/api/v1/query?query=${encodeURIComponent('http_requests_total[10m]')}&time=${sec(T0 + 600_000)}`);
    expect(res.status, await res.clone().text()).toBe(422);
    expect(await res.json()).toMatchObject({ status: 'error', errorType: 'execution', error: expect.stringContaining('too many samples') });
  });
});

// Both ways of holding a worker to its cap: its memory cgroup (the kernel may kill the engine alone),
// where the service may create one (as root here), and the RSS watchdog.
describe.each(['auto', 'off'])('PromQL memory cap (P_QUERY_WORKER_CGROUP=%s)', (cgroup) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({ env: { P_QUERY_WORKER_MAX_MEMORY: '260MiB', P_QUERY_WORKER_CGROUP: cgroup } });
    await write(server, 'm', body([counter({ job: 'a' }, 1)]));
  }, 120_000);
  afterAll(async () => server?.stop());

  it("counts the engine process's memory in its worker's P_QUERY_WORKER_MAX_MEMORY: 413, and the next query runs", async () => {
    // A subquery of 21.6 million points (within P_PROMQL_MAX_SAMPLES) held by the engine alone, over
    // 345 MB; the worker itself reads nothing for it.
    const ask = (q: string) => server.request(`/prometheus/m/api/v1/query?query=${encodeURIComponent(q)}&time=${sec(T0 + 600_000)}`);
    const res = await ask('count_over_time(vector(1)[6h:1ms])');
    expect(res.status, await res.clone().text()).toBe(413);
    expect(await res.json()).toMatchObject({ status: 'error', errorType: 'too_large', error: expect.stringContaining('P_QUERY_WORKER_MAX_MEMORY') });
    expect((await ask('sum(http_requests_total)')).status).toBe(200);
  });
});

describe('PromQL time limit', () => {
  let server: TestServer;
  beforeAll(async () => {
    // Shorter than any PromQL query can take (a worker round trip alone is longer).
    server = await startServer({ env: { P_QUERY_TIMEOUT: '1ms' } });
    await write(server, 'm', body([counter({ job: 'a' }, 1)]));
  }, 120_000);
  afterAll(async () => server?.stop());

  it('answers a query past P_QUERY_TIMEOUT with 503 timeout, and the next query still runs', async () => {
    const ask = () => server.request(`/prometheus/m/api/v1/query?query=${encodeURIComponent('sum(rate(http_requests_total[5m]))')}&time=${sec(T0 + 600_000)}`);
    const res = await ask();
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ status: 'error', errorType: 'timeout', error: expect.stringContaining('P_QUERY_TIMEOUT') });
    // The worker cut off was replaced: the service still answers (with the same verdict).
    expect((await ask()).status).toBe(503);
  });
});

/**
 * The PromQL engine processes (promql-dist/promql) whose parent is a query worker of the service with
 * this data directory (a worker's environment names its directory under it), from /proc.
 */
function engineProcesses(dataDir: string): { pid: number; parent: number }[] {
  const read = (f: string) => {
    try {
      return fs.readFileSync(f, 'latin1');
    } catch {
      return '';
    }
  };
  const pids = fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  const workers = new Set(pids.filter((p) => read(`/proc/${p}/environ`).split('\0').some((v) => v.startsWith(`QW_DIR=${dataDir}/`))).map(Number));
  const out: { pid: number; parent: number }[] = [];
  for (const p of pids) {
    let exe = '';
    try {
      exe = fs.readlinkSync(`/proc/${p}/exe`);
    } catch {
      continue;
    }
    if (!exe.endsWith('/promql-dist/promql')) continue;
    const stat = read(`/proc/${p}/stat`);
    const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (workers.has(parent)) out.push({ pid: Number(p), parent });
  }
  return out;
}
