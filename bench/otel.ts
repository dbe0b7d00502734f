/** OTLP logs/spans and Prometheus remote write through HTTP: records/s and stored bytes per record. */
import snappy from 'snappy';
import { requestClass } from '../src/ingest/otlp/generated.ts';
import { WriteRequestV1 } from '../src/ingest/prometheus/decode.ts';
import { api, fmt, rng, sendAll, settle, startService, waitFlushed, watchTree } from './lib.ts';

const hex = (r: () => number, bytes: number) => Array.from({ length: bytes }, () => Math.floor(r() * 256).toString(16).padStart(2, '0')).join('');
const services = ['checkout', 'cart', 'auth', 'search'];
const routes = ['/api/cart', '/api/checkout', '/api/login', '/api/search'];

/** OTLP JSON (the object shape of the spec's JSON encoding) for `count` log records. */
export function logsRequest(count: number, seed: number, baseMs: number): Record<string, unknown> {
  const r = rng(seed);
  const logRecords = Array.from({ length: count }, (_, i) => ({
    timeUnixNano: String(BigInt(baseMs + i) * 1_000_000n + BigInt(Math.floor(r() * 1e6))),
    observedTimeUnixNano: String(BigInt(baseMs + i) * 1_000_000n),
    severityNumber: r() < 0.9 ? 9 : 17,
    severityText: r() < 0.9 ? 'INFO' : 'ERROR',
    body: { stringValue: `request to ${routes[i % routes.length]} completed in ${Math.floor(r() * 500)} ms` },
    attributes: [
      { key: 'http.route', value: { stringValue: routes[Math.floor(r() * routes.length)] } },
      { key: 'http.status_code', value: { intValue: String(r() < 0.95 ? 200 : 500) } },
      { key: 'user.id', value: { stringValue: `u-${Math.floor(r() * 10_000)}` } },
    ],
    traceId: hex(r, 16),
    spanId: hex(r, 8),
  }));
  return {
    resourceLogs: [
      {
        resource: { attributes: [{ key: 'service.name', value: { stringValue: services[seed % services.length] } }, { key: 'host.name', value: { stringValue: `host-${seed % 7}` } }] },
        scopeLogs: [{ scope: { name: 'bench', version: '1.0.0' }, logRecords }],
      },
    ],
  };
}

export function spansRequest(count: number, seed: number, baseMs: number): Record<string, unknown> {
  const r = rng(seed);
  const spans = Array.from({ length: count }, (_, i) => {
    const start = BigInt(baseMs + i) * 1_000_000n;
    return {
      traceId: hex(r, 16),
      spanId: hex(r, 8),
      parentSpanId: r() < 0.7 ? hex(r, 8) : '',
      name: `GET ${routes[i % routes.length]}`,
      kind: 2,
      startTimeUnixNano: String(start),
      endTimeUnixNano: String(start + BigInt(Math.floor(r() * 50_000_000))),
      attributes: [
        { key: 'http.method', value: { stringValue: 'GET' } },
        { key: 'http.status_code', value: { intValue: String(r() < 0.95 ? 200 : 500) } },
      ],
      status: { code: r() < 0.95 ? 1 : 2 },
    };
  });
  return { resourceSpans: [{ resource: { attributes: [{ key: 'service.name', value: { stringValue: services[seed % services.length] } }] }, scopeSpans: [{ scope: { name: 'bench' }, spans }] }] };
}

/** Converts OTLP JSON ids (hex) to the bytes protobufjs' fromObject expects (base64). */
export function toProtobuf(signal: 'logs' | 'traces', json: Record<string, unknown>): Buffer {
  const b64 = (h: string) => Buffer.from(h, 'hex').toString('base64');
  const copy = JSON.parse(JSON.stringify(json), (k, v) => (['traceId', 'spanId', 'parentSpanId'].includes(k) && typeof v === 'string' ? b64(v) : v));
  const cls = requestClass[signal];
  return Buffer.from(cls.encode(cls.fromObject(copy)).finish());
}

export function remoteWriteRequest(series: number, samplesPerSeries: number, seed: number, baseMs: number): Buffer {
  const r = rng(seed);
  const timeseries = Array.from({ length: series }, (_, s) => ({
    labels: [
      { name: '__name__', value: `bench_metric_${s % 50}` },
      { name: 'instance', value: `10.0.${seed % 16}.${s % 256}:9100` },
      { name: 'job', value: 'node' },
      { name: 'mode', value: ['user', 'system', 'idle', 'iowait'][s % 4] },
    ],
    samples: Array.from({ length: samplesPerSeries }, (_, i) => ({ value: r() * 1000, timestamp: baseMs + i * 15_000 })),
  }));
  return snappy.compressSync(Buffer.from(WriteRequestV1.encode(WriteRequestV1.fromObject({ timeseries })).finish()));
}

export async function benchOtel(): Promise<string[][]> {
  const PER_REQUEST = 1000;
  const REQUESTS = Number(process.env.BENCH_OTLP_REQUESTS ?? 200);
  const base = Date.now() - 3_600_000;
  const server = await startService({ P_FLUSH_INTERVAL: '5s', P_LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn' });
  const rows: string[][] = [['case', 'records', 'seconds', 'records/s', 'stored B/record', 'CPU s/1M records', 'peak RSS: tree (main) PSS tree']];
  try {
    await settle(server.pid);
    const run = async (label: string, path: string, dataset: string, bodies: Buffer[], headers: Record<string, string>, perBody: number) => {
      // Service process tree, from the first request until the WAL is in Parquet (as for JSON).
      const watch = watchTree(server.pid);
      const secs = await sendAll(server.port, `${path}?stream=${dataset}`, bodies, 8, headers);
      await waitFlushed(server.port, dataset);
      const use = await watch.stop();
      const stats = (await api(server.port, 'GET', `/api/v1/logstream/${dataset}/stats`)) as { ingestion: { count: number }; storage: { size: number } };
      const records = bodies.length * perBody;
      if (stats.ingestion.count !== records) throw new Error(`${label}: stored ${stats.ingestion.count} of ${records}`);
      rows.push([
        label,
        fmt(records),
        fmt(secs, 2),
        fmt(records / secs),
        fmt(stats.storage.size / records, 1),
        fmt((use.cpuSec / records) * 1e6, 1),
        `${fmt(use.peakTreeRss / 1e6)} MB (${fmt(use.peakMainRss / 1e6)} MB) ${fmt(use.peakTreePss / 1e6)} MB`,
      ]);
    };
    const logsJson = Array.from({ length: REQUESTS }, (_, i) => logsRequest(PER_REQUEST, i, base + i * PER_REQUEST));
    await run('OTLP logs, protobuf', '/v1/logs', 'otel_logs_pb', logsJson.map((j) => toProtobuf('logs', j)), { 'content-type': 'application/x-protobuf' }, PER_REQUEST);
    await run('OTLP logs, JSON', '/v1/logs', 'otel_logs_json', logsJson.map((j) => Buffer.from(JSON.stringify(j))), { 'content-type': 'application/json' }, PER_REQUEST);
    const spansJson = Array.from({ length: REQUESTS }, (_, i) => spansRequest(PER_REQUEST, i, base + i * PER_REQUEST));
    await run('OTLP spans, protobuf', '/v1/traces', 'otel_spans_pb', spansJson.map((j) => toProtobuf('traces', j)), { 'content-type': 'application/x-protobuf' }, PER_REQUEST);
    await run('OTLP spans, JSON', '/v1/traces', 'otel_spans_json', spansJson.map((j) => Buffer.from(JSON.stringify(j))), { 'content-type': 'application/json' }, PER_REQUEST);
    // A request a minute of samples, ending before now: samples over P_EVENT_TIME_FUTURE_LIMIT ahead are refused.
    const rwBase = Date.now() - (REQUESTS + 1) * 60_000;
    const rw = Array.from({ length: REQUESTS }, (_, i) => remoteWriteRequest(500, 4, i, rwBase + i * 60_000));
    await run('remote write 1.0 (2,000 samples/request)', '/v1/prometheus/write', 'prom_rw', rw, { 'content-type': 'application/x-protobuf', 'content-encoding': 'snappy' }, 2000);
  } finally {
    await server.stop();
  }
  return rows;
}
