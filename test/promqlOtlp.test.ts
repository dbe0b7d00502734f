import { ValueType, type HrTime } from '@opentelemetry/api';
import { ProtobufMetricsSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { AggregationTemporality, DataPointType, type MetricData, type ResourceMetrics } from '@opentelemetry/sdk-metrics';
import snappy from 'snappy';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WriteRequestV1 } from '../src/ingest/prometheus/decode.ts';
import { otelcolPrometheusBinary, startCollector, type Process } from './helpers/otelcol.ts';
import { freePort, startServer, tempDir, type TestServer } from './helpers/server.ts';

/**
 * OTLP metrics read back with PromQL (docs/promql.md, "OTLP metrics as Prometheus series"): points go in
 * as the OpenTelemetry JS SDK's OTLP exporter serialises them (its protobuf serializer, with explicit
 * timestamps so that the values asked are known), a summary as OTLP/JSON (the JS SDK has no summaries;
 * the Collector sends them), and a remote-write series into the same dataset. The names and labels
 * asserted are the mapping's; the values are what PromQL's definitions give for the points written.
 */

// Whole minutes, an hour ago; points every 15 s for ten minutes.
const T0 = Math.floor(Date.now() / 60_000) * 60_000 - 3_600_000;
const STEPS = 41;
const at = (i: number) => T0 + i * 15_000;
const hr = (ms: number): HrTime => [Math.floor(ms / 1000), (ms % 1000) * 1e6];
const sec = (ms: number) => ms / 1000;
const DATASET = 'otlpprom';

const resource = resourceFromAttributes({
  'service.name': 'checkout',
  'service.namespace': 'shop',
  'service.instance.id': 'pod-1',
  'host.name': 'h1',
});

function points<T>(value: (i: number) => T, attributes: Record<string, string | number | boolean> = {}) {
  return Array.from({ length: STEPS }, (_, i) => ({ startTime: hr(T0 - 15_000), endTime: hr(at(i)), attributes, value: value(i) }));
}

const desc = (name: string, unit: string, description = '') => ({ name, unit, description, valueType: ValueType.DOUBLE });

const metrics: MetricData[] = [
  {
    descriptor: desc('http.server.requests', '{request}', 'Requests served'),
    aggregationTemporality: AggregationTemporality.CUMULATIVE,
    dataPointType: DataPointType.SUM,
    isMonotonic: true,
    dataPoints: [
      ...points((i) => i * 30, { 'http.route': '/pay', 'http.response.status_code': 200 }),
      ...points((i) => i * 3, { 'http.route': '/pay', 'http.response.status_code': 500 }),
    ],
  },
  {
    descriptor: desc('queue.items', '{item}'),
    aggregationTemporality: AggregationTemporality.CUMULATIVE,
    dataPointType: DataPointType.SUM,
    isMonotonic: false,
    dataPoints: points((i) => 5 + i),
  },
  {
    descriptor: desc('process.cpu.utilization', '1'),
    aggregationTemporality: AggregationTemporality.CUMULATIVE,
    dataPointType: DataPointType.GAUGE,
    dataPoints: points(() => 0.25),
  },
  {
    // Edge rules of names and labels (a per-unit, a leading digit, a leading underscore, a boolean).
    descriptor: desc('net.io', 'By/s'),
    aggregationTemporality: AggregationTemporality.CUMULATIVE,
    dataPointType: DataPointType.SUM,
    isMonotonic: true,
    dataPoints: points((i) => i * 1000, { '1st.try': 'yes', _private: 'x', 'tls.on': true }),
  },
  {
    descriptor: desc('jobs.done', '{job}'),
    aggregationTemporality: AggregationTemporality.DELTA,
    dataPointType: DataPointType.SUM,
    isMonotonic: true,
    dataPoints: points(() => 1),
  },
  {
    descriptor: desc('http.server.request.duration', 's'),
    aggregationTemporality: AggregationTemporality.CUMULATIVE,
    dataPointType: DataPointType.HISTOGRAM,
    // Each step adds 6 requests ≤ 0.1 s, 3 in (0.1, 0.5] and 1 in (0.5, 1].
    dataPoints: points((i) => ({ buckets: { boundaries: [0.1, 0.5, 1], counts: [6 * i, 3 * i, i, 0] }, count: 10 * i, sum: 2.5 * i })),
  },
  {
    descriptor: desc('payload.size', 'By'),
    aggregationTemporality: AggregationTemporality.CUMULATIVE,
    dataPointType: DataPointType.EXPONENTIAL_HISTOGRAM,
    // Scale 0 (base 2): OTLP buckets 0, 1, 2 are (1, 2], (2, 4], (4, 8]; each step adds 1, 2 and 1.
    dataPoints: points((i) => ({ count: 4 * i, sum: 12 * i, scale: 0, zeroCount: 0, positive: { offset: 0, bucketCounts: [i, 2 * i, i] }, negative: { offset: 0, bucketCounts: [] } })),
  },
];

/** A summary, which only OTLP/JSON (or the Collector) sends: quantiles and a count rising 5 per step. */
function summaryJson(): string {
  const ns = (ms: number) => `${BigInt(ms) * 1_000_000n}`;
  return JSON.stringify({
    resourceMetrics: [
      {
        resource: { attributes: Object.entries(resource.attributes).map(([key, v]) => ({ key, value: { stringValue: String(v) } })) },
        scopeMetrics: [
          {
            scope: { name: 'shop.meter', version: '1.2.0' },
            metrics: [
              {
                name: 'rpc.duration',
                unit: 'ms',
                summary: {
                  dataPoints: Array.from({ length: STEPS }, (_, i) => ({
                    startTimeUnixNano: ns(T0 - 15_000),
                    timeUnixNano: ns(at(i)),
                    count: String(5 * i),
                    sum: 100 * i,
                    quantileValues: [
                      { quantile: 0.5, value: 12 },
                      { quantile: 0.99, value: 40 },
                    ],
                  })),
                },
              },
            ],
          },
        ],
      },
    ],
  });
}

interface Sample {
  metric: Record<string, string>;
  value?: [number, string];
  values?: [number, string][];
}
interface Envelope {
  status: string;
  data: unknown;
  error?: string;
}

describe('PromQL over OTLP metrics', () => {
  let server: TestServer;
  const api = async (path: string, params: Record<string, string | string[]>): Promise<Envelope> => {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) for (const one of Array.isArray(v) ? v : [v]) qs.append(k, one);
    const res = await server.request(`/prometheus/${DATASET}/api/v1/${path}?${qs}`);
    const body = (await res.json()) as Envelope;
    expect(res.status, JSON.stringify(body)).toBe(200);
    return body;
  };
  const instant = async (query: string, t = at(STEPS - 1)) => (await api('query', { query, time: String(sec(t)) })).data as { result: Sample[] };

  beforeAll(async () => {
    server = await startServer();
    const send = async (body: Uint8Array | string, type: string) => {
      const res = await server.request('/v1/metrics', {
        method: 'POST',
        body: typeof body === 'string' ? body : new Uint8Array(body),
        headers: { 'content-type': type, 'X-P-Stream': DATASET, 'X-P-Log-Source': 'otel-metrics' },
      });
      expect(res.status, await res.clone().text()).toBe(200);
    };
    const request: ResourceMetrics = { resource, scopeMetrics: [{ scope: { name: 'shop.meter', version: '1.2.0' }, metrics }] };
    await send(ProtobufMetricsSerializer.serializeRequest(request)!, 'application/x-protobuf');
    await send(summaryJson(), 'application/json');
    // A remote-write counter in the same dataset: its labels are its own.
    const rw = WriteRequestV1.encode(
      WriteRequestV1.fromObject({
        timeseries: [
          {
            labels: [
              { name: '__name__', value: 'rw_requests_total' },
              { name: 'job', value: 'rw' },
            ],
            samples: Array.from({ length: STEPS }, (_, i) => ({ timestamp: at(i), value: i * 15 })),
          },
        ],
      }),
    ).finish();
    const res = await server.request(`/v1/prometheus/write?stream=${DATASET}`, {
      method: 'POST',
      body: new Uint8Array(snappy.compressSync(Buffer.from(rw))),
      headers: { 'content-encoding': 'snappy', 'content-type': 'application/x-protobuf' },
    });
    expect(res.status, await res.clone().text()).toBe(200);
  });
  afterAll(async () => {
    await server?.stop();
  });

  const labelsOf200 = {
    __name__: 'http_server_requests_total',
    job: 'shop/checkout',
    instance: 'pod-1',
    service_name: 'checkout',
    service_namespace: 'shop',
    service_instance_id: 'pod-1',
    host_name: 'h1',
    http_route: '/pay',
    http_response_status_code: '200',
    otel_scope_name: 'shop.meter',
    otel_scope_version: '1.2.0',
  };

  it('lists the Prometheus names of the OTLP metrics (no delta sum) beside the remote-write one', async () => {
    const names = (await api('label/__name__/values', { start: String(sec(T0)), end: String(sec(at(STEPS))) })).data as string[];
    expect(names).toEqual([
      'http_server_request_duration_seconds_bucket',
      'http_server_request_duration_seconds_count',
      'http_server_request_duration_seconds_sum',
      'http_server_requests_total',
      'net_io_bytes_per_second_total',
      'payload_size_bytes',
      'process_cpu_utilization_ratio',
      'queue_items',
      'rpc_duration_milliseconds',
      'rpc_duration_milliseconds_count',
      'rpc_duration_milliseconds_sum',
      'rw_requests_total',
    ]);
  });

  it('answers labels and label values with the mapped label names', async () => {
    const range = { start: String(sec(T0)), end: String(sec(at(STEPS))) };
    const labels = (await api('labels', { ...range, 'match[]': '{job="shop/checkout"}' })).data as string[];
    expect(labels).toEqual([
      '__name__',
      '_private',
      'host_name',
      'http_response_status_code',
      'http_route',
      'instance',
      'job',
      'key_1st_try',
      'le',
      'otel_scope_name',
      'otel_scope_version',
      'quantile',
      'service_instance_id',
      'service_name',
      'service_namespace',
      'tls_on',
    ]);
    expect((await api('label/tls_on/values', range)).data).toEqual(['true']);
    expect((await api('label/job/values', range)).data).toEqual(['rw', 'shop/checkout']);
    expect((await api('label/le/values', range)).data).toEqual(['+Inf', '0.1', '0.5', '1']);
  });

  it('answers series with the full label set', async () => {
    const got = (await api('series', { 'match[]': 'http_server_requests_total{http_response_status_code="200"}', start: String(sec(T0)), end: String(sec(at(STEPS))) })).data;
    expect(got).toEqual([labelsOf200]);
  });

  it('rates a monotonic sum as a counter', async () => {
    const { result } = await instant('sum by (http_response_status_code) (rate(http_server_requests_total{job="shop/checkout"}[5m]))');
    const by = Object.fromEntries(result.map((r) => [r.metric.http_response_status_code, Number(r.value![1])]));
    expect(Object.keys(by).sort()).toEqual(['200', '500']);
    expect(by['200']).toBeCloseTo(2, 9);
    expect(by['500']).toBeCloseTo(0.2, 9);
    const { result: rw } = await instant('rate(rw_requests_total[5m])');
    expect(rw.map((r) => r.metric)).toEqual([{ job: 'rw' }]);
    expect(Number(rw[0].value![1])).toBeCloseTo(1, 9);
  });

  it('reads gauges and non-monotonic sums as gauges', async () => {
    const { result } = await instant('queue_items + on(job, instance) group_left process_cpu_utilization_ratio');
    expect(result.map((r) => Number(r.value![1]))).toEqual([5 + STEPS - 1 + 0.25]);
  });

  it('answers histogram_quantile over the classic buckets, instant and range', async () => {
    const q = 'histogram_quantile(0.9, sum by (le) (rate(http_server_request_duration_seconds_bucket[5m])))';
    const { result } = await instant(q);
    // 90% of the requests are ≤ 0.5 s, and all of the (0.1, 0.5] bucket is needed to reach them.
    expect(Number(result[0].value![1])).toBeCloseTo(0.5, 9);
    const range = (await api('query_range', { query: q, start: String(sec(at(20))), end: String(sec(at(40))), step: '60' })).data as { resultType: string; result: Sample[] };
    expect(range.resultType).toBe('matrix');
    expect(range.result[0].values!.map(([t]) => t)).toEqual([0, 1, 2, 3, 4, 5].map((m) => sec(at(20)) + m * 60));
    for (const [, v] of range.result[0].values!) expect(Number(v)).toBeCloseTo(0.5, 9);
    const { result: count } = await instant('rate(http_server_request_duration_seconds_count[5m])');
    expect(Number(count[0].value![1])).toBeCloseTo(10 / 15, 9);
    const { result: sum } = await instant('rate(http_server_request_duration_seconds_sum[5m])');
    expect(Number(sum[0].value![1])).toBeCloseTo(2.5 / 15, 9);
  });

  it('reads a summary as quantile series and _sum/_count', async () => {
    const { result } = await instant('rpc_duration_milliseconds');
    expect(result.map((r) => [r.metric.quantile, r.value![1]]).sort()).toEqual([
      ['0.5', '12'],
      ['0.99', '40'],
    ]);
    const { result: count } = await instant('rate(rpc_duration_milliseconds_count[5m])');
    expect(Number(count[0].value![1])).toBeCloseTo(5 / 15, 9);
  });

  it('reads an exponential histogram as a native histogram', async () => {
    const { result: count } = await instant('histogram_count(rate(payload_size_bytes[5m]))');
    expect(Number(count[0].value![1])).toBeCloseTo(4 / 15, 9);
    const { result: sum } = await instant('histogram_sum(rate(payload_size_bytes[5m]))');
    expect(Number(sum[0].value![1])).toBeCloseTo(12 / 15, 9);
    // Half of the observations are ≤ 4 (buckets (1, 2] and (2, 4] hold 1 + 2 of 4 per step): the median is in (2, 4].
    const { result: median } = await instant('histogram_quantile(0.5, rate(payload_size_bytes[5m]))');
    const m = Number(median[0].value![1]);
    expect(m).toBeGreaterThan(2);
    expect(m).toBeLessThanOrEqual(4);
  });

  it('answers metadata under the Prometheus names and types', async () => {
    const data = (await api('metadata', {})).data as Record<string, { type: string; help: string; unit: string }[]>;
    expect(data).toEqual({
      http_server_requests_total: [{ type: 'counter', help: 'Requests served', unit: '' }],
      net_io_bytes_per_second_total: [{ type: 'counter', help: '', unit: 'bytes_per_second' }],
      http_server_request_duration_seconds: [{ type: 'histogram', help: '', unit: 'seconds' }],
      payload_size_bytes: [{ type: 'histogram', help: '', unit: 'bytes' }],
      process_cpu_utilization_ratio: [{ type: 'gauge', help: '', unit: '' }],
      queue_items: [{ type: 'gauge', help: '', unit: '' }],
      rpc_duration_milliseconds: [{ type: 'summary', help: '', unit: 'milliseconds' }],
    });
  });

  it('leaves delta sums out', async () => {
    expect((await instant('{__name__=~"jobs.*"}')).result).toEqual([]);
  });
});

/** One sample of the Prometheus text format: `name{label="value",…} value [timestamp]`. */
function parseExposition(text: string): { name: string; labels: Record<string, string>; value: number }[] {
  const out: { name: string; labels: Record<string, string>; value: number }[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: \S+)?$/.exec(line);
    if (!m) throw new Error(`not an exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      const value = l[2].replace(/\\(.)/g, (_x, c: string) => (c === 'n' ? '\n' : c));
      if (value !== '') labels[l[1]] = value;
    }
    out.push({ name: m[1], labels: { __name__: m[1], ...labels }, value: Number(m[3]) });
  }
  return out;
}

describe('beside the Collector\'s prometheus exporter', () => {
  let server: TestServer;
  let collector: Process;
  let metricsPort: number;
  let receiverPort: number;

  beforeAll(async () => {
    server = await startServer();
    receiverPort = await freePort();
    metricsPort = await freePort();
    const config = `
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${receiverPort}
exporters:
  prometheus:
    endpoint: 127.0.0.1:${metricsPort}
    resource_to_telemetry_conversion:
      enabled: true
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    metrics:
      receivers: [otlp]
      exporters: [prometheus]
`;
    collector = await startCollector(config, await tempDir('otelcol-prom-'), receiverPort, otelcolPrometheusBinary);
    const request: ResourceMetrics = { resource, scopeMetrics: [{ scope: { name: 'shop.meter', version: '1.2.0' }, metrics }] };
    const body = ProtobufMetricsSerializer.serializeRequest(request)!;
    for (const [url, headers] of [
      [`http://127.0.0.1:${receiverPort}/v1/metrics`, {}],
      [`${server.url}/v1/metrics`, { 'X-API-Key': server.apiKey, 'X-P-Stream': DATASET }],
    ] as const) {
      const proto = await fetch(url, { method: 'POST', body: new Uint8Array(body), headers: { 'content-type': 'application/x-protobuf', ...headers } });
      expect(proto.status, await proto.text()).toBe(200);
      const json = await fetch(url, { method: 'POST', body: summaryJson(), headers: { 'content-type': 'application/json', ...headers } });
      expect(json.status, await json.text()).toBe(200);
    }
  }, 120_000);
  afterAll(async () => {
    await collector?.stop();
    await server?.stop();
  });

  it('gives the same series and latest values as the exporter (but for what docs/promql.md lists as not mapped)', async () => {
    // target_info: resource attributes are labels here (resource_to_telemetry_conversion); jobs_done: a
    // delta sum, which the exporter accumulates and this mapping leaves out; payload_size_bytes: a
    // native histogram, which the text format shows only as its count and sum (checked above).
    const exposed = parseExposition(await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text()).filter(
      (s) => s.name !== 'target_info' && !s.name.startsWith('jobs_done') && !s.name.startsWith('payload_size_bytes'),
    );
    const key = (labels: Record<string, string>) => JSON.stringify(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : 1)));
    const want = new Map(exposed.map((s) => [key(s.labels), s.value]));
    const got = new Map<string, number>();
    for (const name of new Set(exposed.map((s) => s.name))) {
      const res = await server.request(`/prometheus/${DATASET}/api/v1/query?${new URLSearchParams({ query: name, time: String(sec(at(STEPS - 1))) })}`);
      const { data } = (await res.json()) as { data: { result: Sample[] } };
      for (const r of data.result) got.set(key(r.metric), Number(r.value![1]));
    }
    expect([...got.keys()].sort()).toEqual([...want.keys()].sort());
    for (const [k, v] of want) expect(got.get(k), k).toBeCloseTo(v, 9);
    expect(want.size).toBeGreaterThan(10);
  });
});
