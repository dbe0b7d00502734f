import * as http from 'node:http';
import { Metadata } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SeverityNumber } from '@opentelemetry/api-logs';
import { OTLPLogExporter } from '@opentelemetry/exporter-logs-otlp-grpc';
import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-grpc';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchLogRecordProcessor, LoggerProvider } from '@opentelemetry/sdk-logs';
import { MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { requestClass, responseClass } from '../src/ingest/otlp/generated.ts';
import { waitFor } from './helpers/wait.ts';
import { RawOtlpClient } from './helpers/otlpGrpc.ts';
import { ADMIN_KEY, ANY_PORT, query, startServer, type TestServer } from './helpers/server.ts';
import { otlpLogsProtobuf } from './helpers/wire.ts';

/** gRPC status codes the OTLP specification names. */
const OK = 0;
const INVALID_ARGUMENT = 3;
const RESOURCE_EXHAUSTED = 8;
const PERMISSION_DENIED = 7;
const UNAVAILABLE = 14;
const UNAUTHENTICATED = 16;

const READER_KEY = 'grpc-reader-key';
const SCOPED_KEY = 'grpc-scoped-writer-key';
const LIMIT = 1024 * 1024;

/** The exporters' config type; `compression` is an enum of a package this project does not depend on directly. */
type GrpcConfig = NonNullable<ConstructorParameters<typeof OTLPLogExporter>[0]>;
const GZIP = 'gzip' as NonNullable<GrpcConfig['compression']>;

/** ExportResult of @opentelemetry/core: code 0 is SUCCESS. */
interface ExportResultLike {
  code: number;
  error?: Error;
}
function track<I>(exporter: { export(items: I, done: (result: ExportResultLike) => void): void }): ExportResultLike[] {
  const results: ExportResultLike[] = [];
  const original = exporter.export.bind(exporter);
  exporter.export = (items, done) =>
    original(items, (result) => {
      results.push(result);
      done(result);
    });
  return results;
}
const failures = (results: ExportResultLike[]) => results.filter((r) => r.code !== 0).map((r) => r.error?.message ?? `code ${r.code}`);

const metricOf = async (server: TestServer, name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(await (await server.request('/metrics')).text())?.[1]);
const datasets = async (server: TestServer) => ((await (await server.request('/api/v1/logstream')).json()) as { name: string }[]).map((d) => d.name);

function logsRequest(records: { body: string; traceId?: string }[]): Buffer {
  const cls = requestClass.logs;
  const now = (BigInt(Date.now()) * 1_000_000n).toString();
  const msg = cls.fromObject({
    resourceLogs: [
      {
        resource: { attributes: [{ key: 'service.name', value: { stringValue: 'raw-grpc' } }] },
        scopeLogs: [{ logRecords: records.map((r) => ({ timeUnixNano: now, body: { stringValue: r.body }, ...(r.traceId ? { traceId: Buffer.from(r.traceId, 'hex') } : {}) })) }],
      },
    ],
  });
  return Buffer.from(cls.encode(msg).finish());
}

describe('OTLP over gRPC', () => {
  let server: TestServer;
  let target: string;
  let raw: RawOtlpClient;
  beforeAll(async () => {
    server = await startServer({
      env: {
        P_OTLP_GRPC_ADDR: ANY_PORT,
        P_API_KEYS: `${ADMIN_KEY}:admin,${READER_KEY}:reader,${SCOPED_KEY}:writer:grpc_scoped`,
        P_MAX_BODY_BYTES: String(LIMIT),
        P_MAX_INFLIGHT_BYTES: String(LIMIT),
        // The wait the full-budget test sits through before UNAVAILABLE (longer than its 500 ms client deadline).
        P_INFLIGHT_WAIT: '1s',
      },
    });
    target = `127.0.0.1:${server.grpcPort}`;
    raw = new RawOtlpClient(target);
  }, 60_000);
  afterAll(async () => {
    raw?.close();
    await server?.stop();
  });

  it('the OTel JS gRPC exporters (gzip) store logs, spans and metrics with exact counts', async () => {
    const metadata = new Metadata();
    metadata.set('x-api-key', ADMIN_KEY);
    metadata.set('x-p-stream', 'grpc_logs');
    const config = (stream: string): GrpcConfig => {
      const m = new Metadata();
      m.set('x-api-key', ADMIN_KEY);
      m.set('x-p-stream', stream);
      return { url: `http://${target}`, compression: GZIP, metadata: m, timeoutMillis: 10_000 };
    };
    const resource = resourceFromAttributes({ 'service.name': 'grpc-checkout' });

    const logExporter = new OTLPLogExporter(config('grpc_logs'));
    const logResults = track(logExporter);
    const loggers = new LoggerProvider({ resource, processors: [new BatchLogRecordProcessor(logExporter, { maxExportBatchSize: 64, scheduledDelayMillis: 60_000 })] });
    for (let i = 0; i < 250; i++) loggers.getLogger('grpc-test').emit({ body: `line ${i}`, severityNumber: SeverityNumber.WARN, severityText: 'WARN', attributes: { i } });
    await loggers.forceFlush();
    await loggers.shutdown();

    const spanExporter = new OTLPTraceExporter(config('grpc_spans'));
    const spanResults = track(spanExporter);
    const tracers = new BasicTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(spanExporter, { maxExportBatchSize: 64, scheduledDelayMillis: 60_000 })] });
    for (let i = 0; i < 130; i++) tracers.getTracer('grpc-test').startSpan(`op ${i}`).end();
    await tracers.forceFlush();
    await tracers.shutdown();

    const metricExporter = new OTLPMetricExporter(config('grpc_metrics'));
    const metricResults = track(metricExporter);
    const meters = new MeterProvider({ resource, readers: [new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 60_000 })] });
    const counter = meters.getMeter('grpc-test').createCounter('requests');
    for (let i = 0; i < 7; i++) counter.add(i + 1, { route: `/r${i}` });
    await meters.shutdown();

    for (const r of [logResults, spanResults, metricResults]) {
      expect(failures(r)).toEqual([]);
      expect(r.length).toBeGreaterThan(0);
    }
    // 250 records in batches of 64: four exports, every one acknowledged.
    expect(logResults).toHaveLength(4);
    expect(await query(server, 'SELECT count(*) AS n, count(DISTINCT body) AS d, min(severity_text) AS s, min("service.name") AS svc FROM grpc_logs')).toEqual([
      { n: 250, d: 250, s: 'WARN', svc: 'grpc-checkout' },
    ]);
    expect(await query(server, 'SELECT count(*) AS n, count(DISTINCT span_name) AS d FROM grpc_spans')).toEqual([{ n: 130, d: 130 }]);
    expect(await query(server, "SELECT count(*) AS n, sum(data_point_value) AS total FROM grpc_metrics WHERE metric_name = 'requests'")).toEqual([{ n: 7, total: 28 }]);
  });

  it('with only the key (Bearer or Basic), each signal goes to its default dataset', async () => {
    const basic = `Basic ${Buffer.from(`anyone:${ADMIN_KEY}`).toString('base64')}`;
    const logs = await raw.call('logs', logsRequest([{ body: 'default dataset' }]), { authorization: `Bearer ${ADMIN_KEY}` });
    expect(logs).toMatchObject({ code: OK });
    const spans = requestClass.traces;
    const spanBytes = Buffer.from(
      spans
        .encode(
          spans.fromObject({
            resourceSpans: [
              { scopeSpans: [{ spans: [{ traceId: Buffer.alloc(16, 1), spanId: Buffer.alloc(8, 2), name: 'default span', startTimeUnixNano: String(BigInt(Date.now()) * 1_000_000n), endTimeUnixNano: String(BigInt(Date.now()) * 1_000_000n) }] }] },
            ],
          }),
        )
        .finish(),
    );
    expect(await raw.call('traces', spanBytes, { authorization: basic }, 30_000, true)).toMatchObject({ code: OK });
    expect(await query(server, 'SELECT body FROM otel_logs')).toEqual([{ body: 'default dataset' }]);
    expect(await query(server, 'SELECT span_name FROM otel_traces')).toEqual([{ span_name: 'default span' }]);
  });

  it('partial success: a record with a bad trace id is rejected alone, and the answer counts it', async () => {
    const answer = await raw.call('logs', logsRequest([{ body: 'good' }, { body: 'bad', traceId: 'abcd' }]), { 'x-api-key': ADMIN_KEY, 'x-p-stream': 'grpc_partial' });
    expect(answer.code).toBe(OK);
    const response = responseClass.logs.toObject(responseClass.logs.decode(answer.response!), { longs: String }) as { partialSuccess?: { rejectedLogRecords?: string; errorMessage?: string } };
    expect(response.partialSuccess?.rejectedLogRecords).toBe('1');
    expect(response.partialSuccess?.errorMessage).toMatch(/trace_id/);
    expect(await query(server, 'SELECT body FROM grpc_partial')).toEqual([{ body: 'good' }]);
  });

  it('bad input and refused keys get the status the OTLP specification names, store nothing and create nothing', async () => {
    const ok = logsRequest([{ body: 'x' }]);
    const key = { 'x-api-key': ADMIN_KEY };
    const cases: [string, Promise<{ code: number; details: string; retryDelaySec?: number }>, number, RegExp][] = [
      ['garbage bytes', raw.call('logs', Buffer.from('this is not protobuf \xff\xff\xff\xff'), { ...key, 'x-p-stream': 'grpc_bad' }), INVALID_ARGUMENT, /protobuf/],
      ['a message over P_MAX_BODY_BYTES', raw.call('logs', logsRequest([{ body: 'y'.repeat(LIMIT + 10) }]), { ...key, 'x-p-stream': 'grpc_bad' }), RESOURCE_EXHAUSTED, /./],
      ['spans into a logs dataset', raw.call('traces', Buffer.alloc(0), { ...key, 'x-p-stream': 'grpc_logs' }), INVALID_ARGUMENT, /holds otel-logs data, not otel-traces/],
      ['X-P-Log-Source naming another signal', raw.call('logs', ok, { ...key, 'x-p-stream': 'grpc_bad', 'x-p-log-source': 'otel-traces' }), INVALID_ARGUMENT, /X-P-Log-Source/],
      ['no key', raw.call('logs', ok, { 'x-p-stream': 'grpc_bad' }), UNAUTHENTICATED, /missing API key/],
      ['an unknown key', raw.call('logs', ok, { 'x-api-key': 'nope', 'x-p-stream': 'grpc_bad' }), UNAUTHENTICATED, /invalid API key/],
      ['a reader key', raw.call('logs', ok, { 'x-api-key': READER_KEY, 'x-p-stream': 'grpc_bad' }), PERMISSION_DENIED, /may not ingest/],
      ['a writer scoped to another dataset', raw.call('logs', ok, { 'x-api-key': SCOPED_KEY, 'x-p-stream': 'grpc_bad' }), PERMISSION_DENIED, /grpc_bad/],
      ['a scoped writer without a dataset (the default one is not in its scope)', raw.call('logs', ok, { 'x-api-key': SCOPED_KEY }), PERMISSION_DENIED, /otel_logs/],
    ];
    for (const [label, answer, code, details] of cases) {
      const a = await answer;
      expect(a.code, `${label}: ${a.details}`).toBe(code);
      expect(a.details, label).toMatch(details);
      // Not retried by a client: no RetryInfo.
      expect(a.retryDelaySec, label).toBeUndefined();
    }
    expect(await datasets(server)).not.toContain('grpc_bad');
    // The scoped writer may store into its own dataset.
    expect(await raw.call('logs', ok, { 'x-api-key': SCOPED_KEY, 'x-p-stream': 'grpc_scoped' })).toMatchObject({ code: OK });
    expect(await metricOf(server, 'lakehouse_ingest_inflight_bytes')).toBe(0);
    // Each answer is counted by method and status in /metrics.
    const metrics = await (await server.request('/metrics')).text();
    const count = (code: number) => Number(new RegExp(`^lakehouse_grpc_requests_total\\{method="opentelemetry.proto.collector.logs.v1.LogsService/Export",code="${code}"\\} (\\S+)$`, 'm').exec(metrics)?.[1]);
    expect(count(UNAUTHENTICATED)).toBeGreaterThanOrEqual(2);
    expect(count(PERMISSION_DENIED)).toBeGreaterThanOrEqual(3);
    expect(count(OK)).toBeGreaterThanOrEqual(1);
  });

  it('while the in-flight budget is full: UNAVAILABLE with a RetryInfo delay; a client that gives up stores nothing and gives its share back', async () => {
    // An HTTP client holds ~900 KB of the 1 MiB budget while the last bytes of its body are awaited.
    const held = Buffer.from(JSON.stringify(Array.from({ length: 3000 }, (_, i) => ({ i, pad: 'x'.repeat(250) }))));
    expect(held.length).toBeLessThan(LIMIT);
    expect(held.length).toBeGreaterThan(LIMIT * 0.75);
    const url = new URL(server.url);
    const req = http.request({ host: url.hostname, port: url.port, path: '/api/v1/ingest', method: 'POST', headers: { 'x-api-key': ADMIN_KEY, 'x-p-stream': 'grpc_holder', 'content-type': 'application/json', 'content-length': held.length } });
    const response = new Promise<number>((resolve, reject) => {
      req.on('response', (res) => (res.resume(), res.on('end', () => resolve(res.statusCode!))));
      req.on('error', reject);
    });
    req.write(held.subarray(0, held.length - 1000));
    await waitFor('the held body is admitted', async () => (await metricOf(server, 'lakehouse_ingest_inflight_bytes')) >= held.length - 1000);

    const big = logsRequest(Array.from({ length: 600 }, (_, i) => ({ body: `${i} ${'z'.repeat(600)}` })));
    expect(big.length).toBeGreaterThan(LIMIT - held.length + 1000);
    expect(big.length).toBeLessThan(LIMIT);
    const refused = await raw.call('logs', big, { 'x-api-key': ADMIN_KEY, 'x-p-stream': 'grpc_full' });
    expect(refused.code, refused.details).toBe(UNAVAILABLE);
    expect(refused.details).toMatch(/P_MAX_INFLIGHT_BYTES/);
    expect(refused.retryDelaySec).toBeGreaterThan(0);

    // A client whose deadline passes while it waits for room cancels its call.
    const cancelled = await raw.call('logs', big, { 'x-api-key': ADMIN_KEY, 'x-p-stream': 'grpc_cancelled' }, 500);
    expect(cancelled.code).toBe(4); // DEADLINE_EXCEEDED, on the client's side
    req.end(held.subarray(held.length - 1000));
    expect(await response).toBe(200);
    await waitFor('every reservation is given back', async () => (await metricOf(server, 'lakehouse_ingest_inflight_bytes')) === 0 && (await metricOf(server, 'lakehouse_ingest_waiting')) === 0);
    const names = await datasets(server);
    expect(names).not.toContain('grpc_full');
    expect(names).not.toContain('grpc_cancelled');
    // And the next export goes through.
    expect(await raw.call('logs', big, { 'x-api-key': ADMIN_KEY, 'x-p-stream': 'grpc_full' })).toMatchObject({ code: OK });
    expect(await query(server, 'SELECT count(*) AS n FROM grpc_full')).toEqual([{ n: 600 }]);
  });

  it('HTTP protobuf and gRPC decode the same bytes to the same rows', async () => {
    const body = otlpLogsProtobuf([{ timeMs: Date.now(), body: 'same', attributes: [['k', { int: 7 }]] }]);
    expect(await raw.call('logs', body, { 'x-api-key': ADMIN_KEY, 'x-p-stream': 'grpc_same' })).toMatchObject({ code: OK });
    const res = await server.request('/v1/logs', { method: 'POST', body: new Uint8Array(body), headers: { 'content-type': 'application/x-protobuf', 'x-p-stream': 'grpc_same' } });
    expect(res.status).toBe(200);
    const rows = await query(server, 'SELECT * EXCLUDE (p_timestamp) FROM grpc_same');
    expect(rows).toHaveLength(2);
    expect(rows[0]).toEqual(rows[1]);
  });
});

// The connection age (P_OTLP_GRPC_MAX_CONNECTION_AGE: the client reconnects without a failed call), the
// health service and the status of every error kind are the door's own: test/unit/grpcInProcess.test.ts.
