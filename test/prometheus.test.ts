import snappy from 'snappy';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RequestV2, WriteRequestV1 } from '../src/ingest/prometheus/decode.ts';
import { prometheusBinary, startPrometheus } from './helpers/prometheus.ts';
import { query, startServer, tempDir, type TestServer } from './helpers/server.ts';
import { sleep } from './helpers/wait.ts';
import { remoteWriteV1 } from './helpers/wire.ts';

const T0 = Date.parse('2026-11-01T10:00:00.000Z');
const RANGE = { startTime: '2026-11-01T09:00:00Z', endTime: '2026-11-01T11:00:00Z' };

function v1Body(obj: Record<string, unknown>): Buffer {
  return snappy.compressSync(Buffer.from(WriteRequestV1.encode(WriteRequestV1.fromObject(obj)).finish()));
}

async function write(server: TestServer, body: Buffer, headers: Record<string, string> = {}, stream = 'prom'): Promise<Response> {
  return server.request(`/v1/prometheus/write?stream=${stream}`, {
    method: 'POST',
    body: new Uint8Array(body),
    headers: { 'content-encoding': 'snappy', 'content-type': 'application/x-protobuf', 'x-prometheus-remote-write-version': '0.1.0', ...headers },
  });
}

describe('Prometheus remote write', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({ env: { P_MAX_DECOMPRESSED_BYTES: '4MiB', P_SIGNAL_TIME_PAST_LIMIT: '0' } }); // samples at a fixed T0
  });
  afterAll(async () => server?.stop());

  it('stores remote write 1.0 samples with labels, metadata, NaN/Inf and staleness markers', async () => {
    const body = WriteRequestV1.encode(
      WriteRequestV1.fromObject({
        timeseries: [
          {
            labels: [{ name: '__name__', value: 'http_requests_total' }, { name: 'job', value: 'api' }, { name: 'code', value: '200' }],
            samples: [{ value: 41, timestamp: T0 }, { value: 42, timestamp: T0 + 15_000 }],
          },
          {
            labels: [{ name: '__name__', value: 'temperature' }, { name: 'room', value: 'lab' }, { name: 'time_unix_nano', value: 'clashes' }],
            samples: [{ value: Number.POSITIVE_INFINITY, timestamp: T0 }, { value: Number.NEGATIVE_INFINITY, timestamp: T0 + 1 }, { value: 1234.5, timestamp: T0 + 2 }, { value: 99, timestamp: T0 + 3 }],
          },
        ],
        metadata: [{ type: 1, metricFamilyName: 'http_requests', help: 'Requests served.', unit: '' }],
      }),
    ).finish();
    // Turn temperature's last sample into Prometheus' staleness marker (NaN with payload 2).
    const raw = Buffer.from(body);
    const ninetyNine = Buffer.alloc(9);
    ninetyNine[0] = 0x09; // Sample.value: field 1, 64-bit
    ninetyNine.writeDoubleLE(99, 1);
    const at = raw.indexOf(ninetyNine);
    expect(at).toBeGreaterThan(0);
    raw.writeBigUInt64LE(0x7ff0000000000002n, at + 1);
    const res = await write(server, snappy.compressSync(raw));
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ count: 6, samples: 6 });
    expect(res.headers.get('x-prometheus-remote-write-samples-written')).toBe('6');
    const rows = await query(server, 'SELECT metric_name, job, code, data_point_value AS v, time_unix_nano AS t, metric_type, metric_description FROM prom WHERE metric_name = \'http_requests_total\' ORDER BY t', RANGE);
    expect(rows).toEqual([
      { metric_name: 'http_requests_total', job: 'api', code: '200', v: 41, t: '2026-11-01T10:00:00.000Z', metric_type: 'counter', metric_description: 'Requests served.' },
      { metric_name: 'http_requests_total', job: 'api', code: '200', v: 42, t: '2026-11-01T10:00:15.000Z', metric_type: 'counter', metric_description: 'Requests served.' },
    ]);
    const temps = await query(server, "SELECT data_point_value AS v, is_stale_marker AS stale, isnan(data_point_value) AS nan, label_time_unix_nano FROM prom WHERE metric_name = 'temperature' ORDER BY time_unix_nano", RANGE);
    expect(temps).toEqual([
      { v: 'Infinity', stale: false, nan: false, label_time_unix_nano: 'clashes' },
      { v: '-Infinity', stale: false, nan: false, label_time_unix_nano: 'clashes' },
      { v: 1234.5, stale: false, nan: false, label_time_unix_nano: 'clashes' },
      { v: 'NaN', stale: true, nan: true, label_time_unix_nano: 'clashes' },
    ]);
    // The sample time is what the range selects on.
    expect(await query(server, 'SELECT count(*) AS n FROM prom', { startTime: '10m', endTime: 'now' })).toEqual([{ n: 0 }]);
  });

  it('stores remote write 2.0 (symbols, metadata, native histograms) and answers with the 2.0 headers', async () => {
    const symbols = ['', '__name__', 'rpc_latency_seconds', 'service', 'cart', 'Latency of RPCs.', 'seconds', 'queue_depth'];
    const body = RequestV2.encode(
      RequestV2.fromObject({
        symbols,
        timeseries: [
          {
            labelsRefs: [1, 2, 3, 4],
            metadata: { type: 3, helpRef: 5, unitRef: 6 },
            histograms: [
              {
                countInt: 12,
                sum: 3.5,
                schema: 3,
                zeroThreshold: 1e-128,
                zeroCountInt: 2,
                positiveSpans: [{ offset: -1, length: 3 }],
                positiveDeltas: [4, -1, 2],
                resetHint: 2,
                timestamp: T0 + 500,
              },
            ],
          },
          { labelsRefs: [1, 7, 3, 4], metadata: { type: 2 }, samples: [{ value: 7, timestamp: T0 + 500 }] },
        ],
      }),
    ).finish();
    const res = await write(server, snappy.compressSync(Buffer.from(body)), { 'content-type': 'application/x-protobuf;proto=io.prometheus.write.v2.Request', 'x-prometheus-remote-write-version': '2.0.0' }, 'prom2');
    expect(res.status).toBe(200);
    expect(res.headers.get('x-prometheus-remote-write-samples-written')).toBe('1');
    expect(res.headers.get('x-prometheus-remote-write-histograms-written')).toBe('1');
    const rows = await query(
      server,
      'SELECT metric_name, service, metric_type, metric_description, metric_unit, data_point_count, data_point_sum, data_point_scale, data_point_zero_count, data_point_positive_spans, data_point_positive_deltas, data_point_reset_hint, data_point_value FROM prom2 ORDER BY metric_name',
      RANGE,
    );
    expect(rows).toEqual([
      { metric_name: 'queue_depth', service: 'cart', metric_type: 'gauge', metric_description: null, metric_unit: null, data_point_count: null, data_point_sum: null, data_point_scale: null, data_point_zero_count: null, data_point_positive_spans: null, data_point_positive_deltas: null, data_point_reset_hint: null, data_point_value: 7 },
      {
        metric_name: 'rpc_latency_seconds',
        service: 'cart',
        metric_type: 'native_histogram',
        metric_description: 'Latency of RPCs.',
        metric_unit: 'seconds',
        data_point_count: 12,
        data_point_sum: 3.5,
        data_point_scale: 3,
        data_point_zero_count: 2,
        data_point_positive_spans: '[{"offset":-1,"length":3}]',
        data_point_positive_deltas: [4, -1, 2],
        data_point_reset_hint: 2,
        data_point_value: null,
      },
    ]);
  });

  it('rejects bad bodies with 400/413/415 JSON errors and stores nothing of them', async () => {
    const before = await query(server, 'SELECT count(*) AS n FROM prom', RANGE);
    const good = v1Body({ timeseries: [{ labels: [{ name: '__name__', value: 'x' }], samples: [{ value: 1, timestamp: T0 }] }] });
    const hugeLabels = v1Body({
      timeseries: [{ labels: [{ name: '__name__', value: 'wide' }, ...Array.from({ length: 5000 }, (_, i) => ({ name: `l${i}`, value: 'v' }))], samples: [{ value: 1, timestamp: T0 }] }],
    });
    const bomb = Buffer.concat([Buffer.from([0x80, 0x80, 0x80, 0x80, 0x04]), Buffer.alloc(16)]); // claims 1 GiB
    const cases: [string, Response, number][] = [
      ['corrupt snappy', await write(server, Buffer.from('definitely not snappy at all')), 400],
      ['garbage protobuf', await write(server, snappy.compressSync(Buffer.from([0x0a, 0xff, 0xff, 0xff, 0x0f, 0x01]))), 400],
      ['truncated', await write(server, good.subarray(0, good.length - 3)), 400],
      ['no Content-Encoding', await write(server, good, { 'content-encoding': '' }), 400],
      ['snappy bomb', await write(server, bomb), 413],
      ['5000 labels', await write(server, hugeLabels), 400],
      ['wrong content type', await write(server, good, { 'content-type': 'application/json' }), 415],
      ['wrong log source', await write(server, good, { 'x-p-log-source': 'otel-logs' }), 400],
      ['no dataset', await server.request('/v1/prometheus/write', { method: 'POST', body: new Uint8Array(good), headers: { 'content-encoding': 'snappy' } }), 400],
    ];
    for (const [label, res, status] of cases) {
      expect(res.status, label).toBe(status);
      expect(typeof ((await res.json()) as { error: string }).error, label).toBe('string');
    }
    expect(await query(server, 'SELECT count(*) AS n FROM prom', RANGE)).toEqual(before);
  });

  it('stores label values that are not valid UTF-8 without crashing', async () => {
    const body = Buffer.from(WriteRequestV1.encode(WriteRequestV1.fromObject({ timeseries: [{ labels: [{ name: '__name__', value: 'utf' }, { name: 'raw', value: 'AAAA' }], samples: [{ value: 3, timestamp: T0 }] }] })).finish());
    body.set([0xff, 0xfe, 0xc3, 0x28], body.indexOf(Buffer.from('AAAA')));
    const res = await write(server, snappy.compressSync(body), {}, 'promutf');
    expect(res.status).toBe(200);
    const [row] = await query(server, 'SELECT raw, data_point_value AS v FROM promutf', RANGE);
    expect(row.v).toBe(3);
    expect(typeof row.raw).toBe('string');
    expect(String(row.raw)).toContain('\uFFFD');
  });

  it('a real Prometheus server scrapes the service\'s /metrics and remote-writes its own and ours (Bearer key, ?stream=)', async () => {
    const binary = prometheusBinary();
    const prom = await startPrometheus(binary, {
      remoteWriteUrl: `${server.url}/v1/prometheus/write?stream=promreal`,
      bearer: server.apiKey,
      scrapeService: new URL(server.url).host,
    });
    try {
      const deadline = Date.now() + 45_000;
      let rows: Record<string, unknown>[] = [];
      for (;;) {
        const res = await server.request('/api/v1/query', {
          method: 'POST',
          json: { query: "SELECT metric_name, job, instance, data_point_value AS v, version FROM promreal WHERE metric_name IN ('up', 'prometheus_build_info')", startTime: '5m', endTime: 'now', send_null: true },
        });
        if (res.status === 200) {
          rows = (await res.json()) as Record<string, unknown>[];
          const names = new Set(rows.map((r) => r.metric_name));
          if (rows.some((r) => r.metric_name === 'up' && r.job === 'prometheus') && names.has('prometheus_build_info')) break;
        } else await res.text();
        if (Date.now() > deadline) throw new Error(`no up/prometheus_build_info from Prometheus in time; its log:\n${prom.logs().slice(-3000)}`);
        await sleep(500);
      }
      // Prometheus scrapes itself (job prometheus) and the service (job lakehouse): its own target here.
      const up = rows.find((r) => r.metric_name === 'up' && r.job === 'prometheus')!;
      expect(up.job).toBe('prometheus');
      expect(up.v).toBe(1);
      expect(String(up.instance)).toMatch(/^127\.0\.0\.1:\d+$/);
      const info = rows.find((r) => r.metric_name === 'prometheus_build_info')!;
      expect(String(info.version)).toMatch(/^2\.42/);
      const schema = (await (await server.request('/api/v1/logstream/promreal/schema')).json()) as { kind: string };
      expect(schema.kind).toBe('otel-metrics');
      // The scrape of our own /metrics: Prometheus sees the target up, and our counters come back to us
      // through its remote write (rows acknowledged into this very dataset are counted).
      const scrapeDeadline = Date.now() + 45_000;
      for (;;) {
        const res = await fetch(`${prom.url}/api/v1/query?query=${encodeURIComponent('lakehouse_ingested_rows_total{dataset="promreal"}')}`);
        const body = (await res.json()) as { data: { result: { metric: Record<string, string>; value: [number, string] }[] } };
        const up = (await (await fetch(`${prom.url}/api/v1/query?query=${encodeURIComponent('up{job="lakehouse"}')}`)).json()) as { data: { result: { value: [number, string] }[] } };
        if (body.data.result.length && Number(body.data.result[0].value[1]) > 0 && up.data.result[0]?.value[1] === '1') break;
        if (Date.now() > scrapeDeadline) throw new Error(`Prometheus did not scrape /metrics in time; its log:\n${prom.logs().slice(-3000)}`);
        await sleep(500);
      }
      for (;;) {
        const mine = await query(server, "SELECT count(*) AS n FROM promreal WHERE metric_name = 'lakehouse_http_requests_total' AND job = 'lakehouse'", { startTime: '5m', endTime: 'now' });
        if (Number(mine[0].n) > 0) break;
        if (Date.now() > scrapeDeadline) throw new Error('our own metrics never came back through remote write');
        await sleep(500);
      }
    } finally {
      await prom.stop();
    }
  }, 400_000); // a fresh machine first installs Debian's prometheus package (apt-get)

  it('a real Prometheus\'s metadata (sent in requests of its own) types its counters, gauges and histograms', async () => {
    const binary = prometheusBinary();
    if (!binary) throw new Error('Debian prometheus package could not be installed (scripts/ensure-deb.sh)');
    // metadata_config.send_interval is 1s in the helper's config (1m by default).
    const prom = await startPrometheus(binary, { remoteWriteUrl: `${server.url}/v1/prometheus/write?stream=prommeta`, bearer: server.apiKey });
    const wanted = { prometheus_http_requests_total: 'counter', go_goroutines: 'gauge', prometheus_http_request_duration_seconds: 'histogram', go_gc_duration_seconds: 'summary' };
    type Families = Record<string, { type: string; help: string; unit: string }[]>;
    try {
      const deadline = Date.now() + 60_000;
      let families: Families = {};
      for (;;) {
        const res = await server.request('/api/v1/logstream/prommeta/metric-metadata');
        if (res.status === 200) {
          families = (await res.json()) as Families;
          if (Object.keys(wanted).every((f) => families[f])) break;
        } else await res.text();
        if (Date.now() > deadline) throw new Error(`no metadata from Prometheus in time (missing ${Object.keys(wanted).filter((f) => !families[f]).join(', ')} of ${Object.keys(families).length} families); its log:\n${prom.logs().slice(-3000)}`);
        await sleep(500);
      }
      for (const [family, type] of Object.entries(wanted)) {
        expect(families[family], family).toHaveLength(1);
        expect(families[family][0].type, family).toBe(type);
        expect(families[family][0].help, family).not.toBe('');
      }
      // One family asked for alone; the samples of those families are stored under their series' names.
      const one = (await (await server.request('/api/v1/logstream/prommeta/metric-metadata?metric=go_goroutines')).json()) as Families;
      expect(Object.keys(one)).toEqual(['go_goroutines']);
      // The PromQL API's /metadata (Grafana's metric browser) answers from those families exactly as
      // Prometheus itself answers about the metrics it scraped.
      for (const family of Object.keys(wanted)) {
        const ours = await (await server.request(`/prometheus/prommeta/api/v1/metadata?metric=${family}`)).json();
        const theirs = await (await fetch(`${prom.url}/api/v1/metadata?metric=${family}`)).json();
        expect(ours, family).toEqual(theirs);
      }
      const seriesDeadline = Date.now() + 60_000;
      const names = ['prometheus_http_requests_total', 'go_goroutines', 'prometheus_http_request_duration_seconds_bucket'];
      for (;;) {
        // The dataset may have metadata before any sample (then it has no metric_name column yet: 400).
        const rows = await query(server, `SELECT DISTINCT metric_name FROM prommeta WHERE metric_name IN (${names.map((n) => `'${n}'`).join(', ')})`, { startTime: '5m', endTime: 'now' }).catch((err: Error) => [{ error: err.message }]);
        if (rows.length === names.length && rows.every((r) => r.metric_name)) break;
        if (Date.now() > seriesDeadline) throw new Error(`series missing: have ${JSON.stringify(rows)}`);
        await sleep(500);
      }
    } finally {
      await prom.stop();
    }
  }, 400_000);

  it('a metadata-only request is acknowledged once stored, and the dataset remembers it after a restart', async () => {
    const dataDir = await tempDir();
    let s = await startServer({ dataDir });
    try {
      const body = remoteWriteV1([], [
        { type: 1, family: 'jobs_done', help: 'Jobs finished.', unit: '' },
        { type: 3, family: 'job_seconds', help: 'h'.repeat(3000), unit: 'seconds' },
        { type: 0, family: 'mystery' },
      ]);
      const res = await write(s, body, {}, 'metaonly');
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ count: 0, samples: 0 });
      // Repeats (Prometheus sends the same every interval) and metadata riding with samples are kept too.
      const now = Date.now();
      expect((await write(s, body, {}, 'metaonly')).status).toBe(200);
      const mixed = remoteWriteV1([{ labels: [['__name__', 'queue_depth']], samples: [{ value: 3, timestampMs: now }] }], [{ type: 2, family: 'queue_depth', help: 'Items waiting.' }]);
      expect(await (await write(s, mixed, {}, 'metaonly')).json()).toMatchObject({ count: 1 });
      await s.stop();
      s = await startServer({ dataDir });
      const families = (await (await s.request('/api/v1/logstream/metaonly/metric-metadata')).json()) as Record<string, { type: string; help: string; unit: string }[]>;
      expect(families).toEqual({
        jobs_done: [{ type: 'counter', help: 'Jobs finished.', unit: '' }],
        // Help texts are cut at 1024 characters.
        job_seconds: [{ type: 'histogram', help: 'h'.repeat(1024), unit: 'seconds' }],
        mystery: [{ type: 'unknown', help: '', unit: '' }],
        queue_depth: [{ type: 'gauge', help: 'Items waiting.', unit: '' }],
      });
      // Another change after the restart keeps what was there before it.
      expect((await write(s, remoteWriteV1([], [{ type: 2, family: 'jobs_done', help: 'Now a gauge.' }]), {}, 'metaonly')).status).toBe(200);
      const after = (await (await s.request('/api/v1/logstream/metaonly/metric-metadata')).json()) as Record<string, { type: string }[]>;
      expect(Object.fromEntries(Object.entries(after).map(([k, v]) => [k, v[0].type]))).toEqual({ jobs_done: 'gauge', job_seconds: 'histogram', mystery: 'unknown', queue_depth: 'gauge' });
      expect((await s.request('/api/v1/logstream/nosuch/metric-metadata')).status).toBe(404);
    } finally {
      await s.stop();
    }
  });
});
