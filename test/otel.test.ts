import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  diag,
  DiagLogLevel,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
  ValueType,
  type HrTime,
  type SpanContext,
} from '@opentelemetry/api';
import { SeverityNumber } from '@opentelemetry/api-logs';
import { OTLPLogExporter as HttpLogExporter } from '@opentelemetry/exporter-logs-otlp-http';
import { OTLPLogExporter as ProtoLogExporter } from '@opentelemetry/exporter-logs-otlp-proto';
import { OTLPMetricExporter as HttpMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { OTLPMetricExporter as ProtoMetricExporter } from '@opentelemetry/exporter-metrics-otlp-proto';
import { OTLPTraceExporter as HttpTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtoTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchLogRecordProcessor, LoggerProvider, type LogRecordExporter } from '@opentelemetry/sdk-logs';
import { AggregationType, MeterProvider, PeriodicExportingMetricReader, type PushMetricExporter } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, BatchSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { requestClass } from '../src/ingest/otlp/generated.ts';
import { query, startServer, type TestServer } from './helpers/server.ts';
import { expectError } from './helpers/assert.ts';

// ---------------------------------------------------------------------------------------------------
// helpers

/** The exporters' config type; `compression` is an enum of a package this project does not depend on directly. */
type ExporterConfig = NonNullable<ConstructorParameters<typeof HttpLogExporter>[0]>;
const GZIP = 'gzip' as NonNullable<ExporterConfig['compression']>;

/**
 * The exporters' time limit: above the default 10 s, so an export to a service on a loaded machine is not
 * failed by the client (a real export takes milliseconds), and below the test's own limit.
 */
const EXPORT_TIMEOUT_MS = 15_000;

type Kind = 'otel-logs' | 'otel-traces' | 'otel-metrics';
const PATH: Record<Kind, string> = { 'otel-logs': '/v1/logs', 'otel-traces': '/v1/traces', 'otel-metrics': '/v1/metrics' };

function exporterConfig(server: Pick<TestServer, 'url' | 'apiKey'>, kind: Kind, dataset: string, timeoutMillis = EXPORT_TIMEOUT_MS): ExporterConfig {
  return {
    url: `${server.url}${PATH[kind]}`,
    compression: GZIP,
    timeoutMillis,
    headers: { 'X-API-Key': server.apiKey, 'X-P-Stream': dataset, 'X-P-Log-Source': kind },
  };
}

/** ExportResult of @opentelemetry/core: code 0 is SUCCESS, 1 FAILED. */
interface ExportResultLike {
  code: number;
  /** OTLPExporterError carries the HTTP status as `code`. */
  error?: Error & { code?: number };
}

/**
 * Records every export result of an exporter (wrapping its `export`), so a test can assert that the
 * SDK's exports really succeeded: some processors only hand a failure to the global error handler.
 */
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

function expectExported(results: ExportResultLike[]): void {
  const failures = results.filter((r) => r.code !== 0).map((r) => r.error?.message ?? `code ${r.code}`);
  expect(failures).toEqual([]);
  expect(results.length).toBeGreaterThan(0);
}

/** Diagnostics the SDK logs at warn/error (e.g. "Received Partial Success response"), checked to stay empty. */
const diagnostics: string[] = [];
const note = (level: string) => (message: string, ...args: unknown[]) => {
  diagnostics.push(`${level}: ${message} ${args.map((a) => (a instanceof Error ? a.message : JSON.stringify(a))).join(' ')}`);
};
diag.setLogger(
  { error: note('error'), warn: note('warn'), info: () => {}, debug: () => {}, verbose: () => {} },
  { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true },
);

/** [seconds, nanos] → the ISO text the query API returns for a TIMESTAMP_NS. */
function hrIso([s, ns]: HrTime): string {
  return `${new Date(s * 1000).toISOString().slice(0, 19)}.${String(ns).padStart(9, '0')}Z`;
}

/** An HrTime `msAgo` milliseconds before now, with sub-millisecond digits. */
function hrAgo(msAgo: number, extraNanos: number): HrTime {
  const ms = Date.now() - msAgo;
  return [Math.floor(ms / 1000), (ms % 1000) * 1_000_000 + extraNanos];
}

const hrMs = ([s, ns]: HrTime): number => s * 1000 + Math.floor(ns / 1_000_000);
const hrAdd = ([s, ns]: HrTime, nanos: number): HrTime => [s + Math.floor((ns + nanos) / 1e9), (ns + nanos) % 1e9];
const iso = (ms: number) => new Date(ms).toISOString();

async function json<T>(res: Response): Promise<T> {
  const text = await res.text();
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new Error(`not JSON (${res.status}): ${text.slice(0, 200)}`);
  }
}


const otlpPost = (server: TestServer, kind: Kind, body: BodyInit, headers: Record<string, string>) =>
  server.request(PATH[kind], { method: 'POST', body, headers });

/** A hand-written OTLP/JSON log request: one record per entry. */
function jsonLogs(records: Record<string, unknown>[]): string {
  return JSON.stringify({
    resourceLogs: [
      { resource: { attributes: [{ key: 'service.name', value: { stringValue: 'hand-written' } }] }, scopeLogs: [{ scope: { name: 'manual' }, logRecords: records }] },
    ],
  });
}

/**
 * Drive one item through an SDK pipeline to the exporter. Errors the SDK surfaces are swallowed: the
 * caller checks the tracked export results instead, which every processor/reader produces.
 */
async function driveLogs(exporter: LogRecordExporter): Promise<void> {
  const provider = new LoggerProvider({ processors: [new BatchLogRecordProcessor(exporter, { exportTimeoutMillis: EXPORT_TIMEOUT_MS })] });
  provider.getLogger('drive').emit({ body: 'x' });
  try {
    await provider.forceFlush();
  } catch {
    /* reported through the export result */
  } finally {
    await provider.shutdown().catch(() => undefined);
  }
}

async function driveTraces(exporter: SpanExporter): Promise<void> {
  const provider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter, { exportTimeoutMillis: EXPORT_TIMEOUT_MS })] });
  provider.getTracer('drive').startSpan('x').end();
  try {
    await provider.forceFlush();
  } catch {
    /* reported through the export result */
  } finally {
    await provider.shutdown().catch(() => undefined);
  }
}

async function driveMetrics(exporter: PushMetricExporter): Promise<void> {
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 60_000, exportTimeoutMillis: EXPORT_TIMEOUT_MS });
  const provider = new MeterProvider({ readers: [reader] });
  provider.getMeter('drive').createCounter('x').add(1);
  // Shutdown collects and exports once; a failure reaches only the global error handler.
  await provider.shutdown();
}

const nowNanos = () => (BigInt(Date.now()) * 1_000_000n).toString();

// ---------------------------------------------------------------------------------------------------

const VARIANTS = [
  { name: 'http', Logs: HttpLogExporter, Traces: HttpTraceExporter, Metrics: HttpMetricExporter },
  { name: 'proto', Logs: ProtoLogExporter, Traces: ProtoTraceExporter, Metrics: ProtoMetricExporter },
] as const;

describe('OpenTelemetry JS SDK exporters → OTLP/HTTP endpoints', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer();
  });
  afterAll(async () => {
    await server?.stop();
  });

  for (const v of VARIANTS) {
    describe(`${v.name} exporters (gzip)`, () => {
      it('logs: every field lands in its column, filed under the record time', async () => {
        const dataset = `otel_logs_${v.name}`;
        diagnostics.length = 0;
        const exporter = new v.Logs(exporterConfig(server, 'otel-logs', dataset));
        const results = track(exporter);
        const provider = new LoggerProvider({
          resource: resourceFromAttributes({ 'service.name': `checkout-${v.name}`, 'service.version': '1.2.3' }),
          processors: [new BatchLogRecordProcessor(exporter, { scheduledDelayMillis: 60_000, exportTimeoutMillis: EXPORT_TIMEOUT_MS })],
          forceFlushTimeoutMillis: EXPORT_TIMEOUT_MS * 2,
        });
        const logger = provider.getLogger('otel-test', '0.0.7');
        const emitted = hrAgo(10 * 60_000, 123_457); // 10 minutes ago, with nanosecond digits
        const spanContext: SpanContext = { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: TraceFlags.SAMPLED };
        try {
          logger.emit({
            timestamp: emitted,
            severityNumber: SeverityNumber.WARN,
            severityText: 'WARN',
            body: 'payment declined',
            attributes: { 'http.method': 'POST', 'http.status_code': 402, 'retry.ratio': 0.25, 'cache.hit': true, tags: ['a', 'b'] },
            context: trace.setSpanContext(ROOT_CONTEXT, spanContext),
          });
          logger.emit({ timestamp: hrAdd(emitted, 1000), severityNumber: SeverityNumber.INFO, body: { user: 'alice', n: 3 }, eventName: 'user.login' });
          await provider.forceFlush();
        } finally {
          await provider.shutdown();
        }
        expectExported(results);
        expect(diagnostics).toEqual([]);

        const range = { startTime: iso(hrMs(emitted) - 1000), endTime: iso(hrMs(emitted) + 1000) };
        const rows = await query(
          server,
          `SELECT body, severity_number, severity_text, "http.method", "http.status_code", "retry.ratio", "cache.hit", tags,
                  "service.name", "service.version", scope_name, scope_version, time_unix_nano, observed_time_unix_nano,
                  trace_id, span_id, flags, event_name, p_timestamp
           FROM ${dataset} ORDER BY time_unix_nano`,
          range,
        );
        expect(rows).toHaveLength(2);
        expect(rows[0]).toMatchObject({
          body: 'payment declined',
          severity_number: 13,
          severity_text: 'WARN',
          'http.method': 'POST',
          'http.status_code': 402,
          'retry.ratio': 0.25,
          'cache.hit': true,
          tags: '["a","b"]',
          'service.name': `checkout-${v.name}`,
          'service.version': '1.2.3',
          scope_name: 'otel-test',
          scope_version: '0.0.7',
          time_unix_nano: hrIso(emitted),
          trace_id: '0af7651916cd43dd8448eb211c80319c',
          span_id: 'b7ad6b7169203331',
          flags: 1,
          event_name: null,
        });
        expect(rows[1]).toMatchObject({
          body: '{"user":"alice","n":3}',
          severity_number: 9,
          severity_text: null,
          'http.method': null,
          time_unix_nano: hrIso(hrAdd(emitted, 1000)),
          trace_id: null,
          span_id: null,
          event_name: 'user.login',
        });
        // Receive time and observed time are now, the record time 10 minutes back.
        for (const row of rows) {
          expect(Date.now() - Date.parse(row.p_timestamp as string)).toBeLessThan(60_000);
          expect(Date.now() - Date.parse(row.observed_time_unix_nano as string)).toBeLessThan(60_000);
        }
        // The time range selects on the record's own time, not on p_timestamp.
        const lastMinute = { startTime: iso(Date.now() - 60_000), endTime: iso(Date.now() + 5000) };
        expect(await query(server, `SELECT count(*) AS n FROM ${dataset}`, lastMinute)).toEqual([{ n: 0 }]);
        expect(
          await query(server, `SELECT count(*) AS n FROM ${dataset} WHERE p_timestamp >= TIMESTAMP '${iso(Date.now() - 60_000).replace('Z', '')}'`, range),
        ).toEqual([{ n: 2 }]);
        // Exact to the nanosecond in SQL as well.
        const ns = BigInt(emitted[0]) * 1_000_000_000n + BigInt(emitted[1]);
        expect(await query(server, `SELECT epoch_ns(time_unix_nano)::VARCHAR AS ns FROM ${dataset} WHERE body = 'payment declined'`, range)).toEqual([
          { ns: ns.toString() },
        ]);
      });

      it('traces: parent and child spans with kind, status, duration, events and links', async () => {
        const dataset = `otel_traces_${v.name}`;
        diagnostics.length = 0;
        const exporter = new v.Traces(exporterConfig(server, 'otel-traces', dataset));
        const results = track(exporter);
        const provider = new BasicTracerProvider({
          resource: resourceFromAttributes({ 'service.name': `frontend-${v.name}` }),
          spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: 60_000, exportTimeoutMillis: EXPORT_TIMEOUT_MS })],
          forceFlushTimeoutMillis: EXPORT_TIMEOUT_MS * 2,
        });
        const tracer = provider.getTracer('otel-test-tracer', '2.0.0');
        const linked: SpanContext = { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', traceFlags: TraceFlags.SAMPLED };
        const start = hrAgo(5 * 60_000, 4321);
        const parentEnd = hrAdd(start, 250_001_234); // 250.001234 ms
        const childStart = hrAdd(start, 10_000_000);
        const childEnd = hrAdd(childStart, 42_000_007);
        let parentIds: SpanContext;
        let childIds: SpanContext;
        try {
          const parent = tracer.startSpan('GET /checkout', {
            kind: SpanKind.SERVER,
            startTime: start,
            attributes: { 'http.route': '/checkout', 'http.response.status_code': 200 },
            links: [{ context: linked, attributes: { 'link.reason': 'retry-of' } }],
          });
          const child = tracer.startSpan(
            'SELECT orders',
            { kind: SpanKind.CLIENT, startTime: childStart, attributes: { 'db.system': 'postgresql' } },
            trace.setSpan(ROOT_CONTEXT, parent),
          );
          child.addEvent('cache.miss', { 'cache.key': 'order:42' }, hrAdd(childStart, 1000));
          child.setStatus({ code: SpanStatusCode.ERROR, message: 'connection reset' });
          child.end(childEnd);
          parent.setStatus({ code: SpanStatusCode.OK });
          parent.end(parentEnd);
          parentIds = parent.spanContext();
          childIds = child.spanContext();
          await provider.forceFlush();
        } finally {
          await provider.shutdown();
        }
        expectExported(results);
        expect(diagnostics).toEqual([]);

        const range = { startTime: iso(hrMs(start) - 1000), endTime: iso(hrMs(start) + 1000) };
        const rows = await query(
          server,
          `SELECT span_name, span_kind, span_kind_description, span_trace_id, span_span_id, span_parent_span_id,
                  span_start_time_unix_nano, span_end_time_unix_nano, span_duration_ns, span_status_code,
                  span_status_description, span_status_message, "service.name", scope_name, "http.route",
                  "http.response.status_code", "db.system", span_flags,
                  json_extract_string(span_events, '$[0].name') AS event_name,
                  json_extract_string(span_events, '$[0].attributes."cache.key"') AS event_key,
                  json_extract_string(span_events, '$[0].time_unix_nano') AS event_time,
                  json_array_length(span_links) AS links,
                  json_extract_string(span_links, '$[0].trace_id') AS link_trace,
                  json_extract_string(span_links, '$[0].span_id') AS link_span,
                  span_links ILIKE '%retry-of%' AS link_attr
           FROM ${dataset} ORDER BY span_start_time_unix_nano`,
          range,
        );
        expect(rows).toHaveLength(2);
        const [p, c] = rows;
        expect(p).toMatchObject({
          span_name: 'GET /checkout',
          span_kind: 2,
          span_kind_description: 'SPAN_KIND_SERVER',
          span_trace_id: parentIds.traceId,
          span_span_id: parentIds.spanId,
          span_parent_span_id: null,
          span_start_time_unix_nano: hrIso(start),
          span_end_time_unix_nano: hrIso(parentEnd),
          span_duration_ns: 250_001_234,
          span_status_code: 1,
          span_status_description: 'STATUS_CODE_OK',
          'service.name': `frontend-${v.name}`,
          scope_name: 'otel-test-tracer',
          'http.route': '/checkout',
          'http.response.status_code': 200,
          'db.system': null,
          event_name: null,
          links: 1,
          link_trace: '4bf92f3577b34da6a3ce929d0e0e4736',
          link_span: '00f067aa0ba902b7',
          link_attr: true,
        });
        expect(c).toMatchObject({
          span_name: 'SELECT orders',
          span_kind: 3,
          span_kind_description: 'SPAN_KIND_CLIENT',
          span_trace_id: parentIds.traceId,
          span_span_id: childIds.spanId,
          span_start_time_unix_nano: hrIso(childStart),
          span_duration_ns: 42_000_007,
          span_status_code: 2,
          span_status_description: 'STATUS_CODE_ERROR',
          span_status_message: 'connection reset',
          'db.system': 'postgresql',
          event_name: 'cache.miss',
          event_key: 'order:42',
          event_time: hrIso(hrAdd(childStart, 1000)),
          links: 0,
        });
        expect(childIds.traceId).toBe(parentIds.traceId);
        // The parent/child relation as a self-join.
        const joined = await query(
          server,
          `SELECT p.span_name AS parent, c.span_name AS child FROM ${dataset} c JOIN ${dataset} p ON c.span_parent_span_id = p.span_span_id`,
          range,
        );
        expect(joined).toEqual([{ parent: 'GET /checkout', child: 'SELECT orders' }]);
      });

      it('metrics: counter, up-down counter, histogram, exponential histogram and gauge, one row per point', async () => {
        const dataset = `otel_metrics_${v.name}`;
        diagnostics.length = 0;
        const exporter = new v.Metrics(exporterConfig(server, 'otel-metrics', dataset));
        const results = track(exporter);
        const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 60_000, exportTimeoutMillis: EXPORT_TIMEOUT_MS });
        const provider = new MeterProvider({
          resource: resourceFromAttributes({ 'service.name': `billing-${v.name}` }),
          readers: [reader],
          views: [{ instrumentName: 'app.exp_latency', aggregation: { type: AggregationType.EXPONENTIAL_HISTOGRAM, options: { maxSize: 4 } } }],
        });
        const meter = provider.getMeter('otel-test-meter', '3.0.0');
        const before = Date.now();
        try {
          const requests = meter.createCounter('app.requests', { description: 'requests served', unit: '{request}' });
          requests.add(5, { route: '/a' });
          requests.add(7, { route: '/a' });
          requests.add(1, { route: '/b' });
          // An integer counter: asInt, beyond 32 bits (a Long in protobuf, a JSON number in OTLP/JSON).
          const bytes = meter.createCounter('app.bytes', { valueType: ValueType.INT, unit: 'By' });
          bytes.add(3_000_000_000_000);
          bytes.add(7);
          const inflight = meter.createUpDownCounter('app.inflight');
          inflight.add(10);
          inflight.add(-3);
          const latency = meter.createHistogram('app.latency', { unit: 'ms', advice: { explicitBucketBoundaries: [0, 10, 100] } });
          for (const x of [5, 15, 50, 150]) latency.record(x);
          const exp = meter.createHistogram('app.exp_latency', { unit: 's' });
          for (const x of [0, 1, 2, 4]) exp.record(x);
          const temperature = meter.createObservableGauge('app.temperature', { unit: 'Cel' });
          temperature.addCallback((result) => result.observe(42.5, { host: 'h1' }));
        } finally {
          // Shutdown is the one collection and export (a forceFlush before it would export the cumulative
          // points again). A failed export only reaches the global error handler (diag), so the tracked
          // results and diagnostics below are what make it fail the test.
          await provider.shutdown();
        }
        expectExported(results);
        expect(diagnostics).toEqual([]);

        const rows = await query(
          server,
          `SELECT metric_name, metric_description, metric_unit, metric_type, route, host, data_point_value, data_point_count,
                  data_point_sum, data_point_min, data_point_max, data_point_bucket_counts, data_point_explicit_bounds,
                  data_point_scale, data_point_zero_count, data_point_positive_offset, data_point_positive_bucket_counts,
                  data_point_negative_bucket_counts, aggregation_temporality, aggregation_temporality_description, is_monotonic,
                  "service.name", scope_name, scope_version, time_unix_nano, start_time_unix_nano
           FROM ${dataset} ORDER BY metric_name, route`,
        );
        const byName = (name: string) => rows.filter((r) => r.metric_name === name);
        expect(rows.map((r) => [r.metric_name, r.metric_type])).toEqual([
          ['app.bytes', 'sum'],
          ['app.exp_latency', 'exponential_histogram'],
          ['app.inflight', 'sum'],
          ['app.latency', 'histogram'],
          ['app.requests', 'sum'],
          ['app.requests', 'sum'],
          ['app.temperature', 'gauge'],
        ]);
        for (const row of rows) {
          expect(row).toMatchObject({ 'service.name': `billing-${v.name}`, scope_name: 'otel-test-meter', scope_version: '3.0.0' });
          const t = Date.parse(row.time_unix_nano as string);
          expect(t).toBeGreaterThanOrEqual(before - 1000);
          expect(t).toBeLessThanOrEqual(Date.now());
          // The SDK stamps collection times in whole milliseconds; the query API drops trailing zero digits.
          expect(row.time_unix_nano).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3,9}Z$/);
        }
        const cumulative = { aggregation_temporality: 2, aggregation_temporality_description: 'AGGREGATION_TEMPORALITY_CUMULATIVE' };
        expect(byName('app.requests')).toMatchObject([
          { route: '/a', data_point_value: 12, is_monotonic: true, metric_description: 'requests served', metric_unit: '{request}', ...cumulative },
          { route: '/b', data_point_value: 1, is_monotonic: true, ...cumulative },
        ]);
        expect(byName('app.bytes')).toMatchObject([{ data_point_value: 3_000_000_000_007, metric_unit: 'By', is_monotonic: true, ...cumulative }]);
        expect(byName('app.inflight')).toMatchObject([{ data_point_value: 7, is_monotonic: false, ...cumulative }]);
        expect(byName('app.latency')).toMatchObject([
          {
            metric_unit: 'ms',
            data_point_count: 4,
            data_point_sum: 220,
            data_point_min: 5,
            data_point_max: 150,
            data_point_bucket_counts: [0, 1, 2, 1],
            data_point_explicit_bounds: [0, 10, 100],
            is_monotonic: null,
            ...cumulative,
          },
        ]);
        // maxSize 4 forces scale 0 (base 2): 1 ∈ (0.5, 1] is index -1, 2 → 0, 4 → 1; 0 is a zero count.
        expect(byName('app.exp_latency')).toMatchObject([
          {
            data_point_count: 4,
            data_point_sum: 7,
            data_point_min: 0,
            data_point_max: 4,
            data_point_scale: 0,
            data_point_zero_count: 1,
            data_point_positive_offset: -1,
            data_point_positive_bucket_counts: [1, 1, 1],
            data_point_negative_bucket_counts: [],
            ...cumulative,
          },
        ]);
        expect(byName('app.temperature')).toMatchObject([
          { host: 'h1', data_point_value: 42.5, metric_unit: 'Cel', aggregation_temporality: null, is_monotonic: null, start_time_unix_nano: expect.any(String) },
        ]);
      });
    });
  }

  it('metrics: a summary (which the JS SDK cannot produce) sent as OTLP/JSON', async () => {
    const t = BigInt(Date.now() - 30_000) * 1_000_000n + 17n;
    const body = {
      resourceMetrics: [
        {
          resource: { attributes: [{ key: 'service.name', value: { stringValue: 'legacy' } }] },
          scopeMetrics: [
            {
              scope: { name: 'prom-bridge' },
              metrics: [
                {
                  name: 'rpc.duration',
                  unit: 's',
                  summary: {
                    dataPoints: [
                      {
                        timeUnixNano: t.toString(),
                        startTimeUnixNano: (t - 60_000_000_000n).toString(),
                        count: '10',
                        sum: 4.5,
                        quantileValues: [
                          { quantile: 0.5, value: 0.3 },
                          { quantile: 0.99, value: 1.25 },
                        ],
                        attributes: [{ key: 'method', value: { stringValue: 'Get' } }],
                      },
                    ],
                  },
                },
              ],
            },
          ],
        },
      ],
    };
    const res = await otlpPost(server, 'otel-metrics', JSON.stringify(body), { 'content-type': 'application/json', 'X-P-Stream': 'otel_summary' });
    expect(res.status, await res.clone().text()).toBe(200);
    expect(await json(res)).toEqual({});
    // The same point as protobuf (fromObject takes the OTLP/JSON shape), told apart by its method attribute.
    const cls = requestClass.metrics;
    body.resourceMetrics[0].scopeMetrics[0].metrics[0].summary.dataPoints[0].attributes[0].value.stringValue = 'Put';
    const proto = cls.encode(cls.fromObject(body)).finish();
    const protoRes = await otlpPost(server, 'otel-metrics', Buffer.from(proto), { 'content-type': 'application/x-protobuf', 'X-P-Stream': 'otel_summary' });
    expect(protoRes.status, await protoRes.clone().text()).toBe(200);
    expect((await protoRes.arrayBuffer()).byteLength).toBe(0); // an empty ExportMetricsServiceResponse
    const rows = await query(
      server,
      `SELECT metric_name, metric_type, method, data_point_count, data_point_sum, data_point_quantile_values, time_unix_nano,
              json_extract(data_point_quantile_values, '$[1].value')::DOUBLE AS p99
       FROM otel_summary ORDER BY method`,
    );
    const ms = Number(t / 1_000_000n);
    const expected = {
      metric_name: 'rpc.duration',
      metric_type: 'summary',
      method: 'Get',
      data_point_count: 10,
      data_point_sum: 4.5,
      data_point_quantile_values: '[{"quantile":0.5,"value":0.3},{"quantile":0.99,"value":1.25}]',
      time_unix_nano: `${iso(ms).slice(0, 19)}.${(t % 1_000_000_000n).toString().padStart(9, '0')}Z`,
      p99: 1.25,
    };
    expect(rows).toEqual([expected, { ...expected, method: 'Put' }]);
  });

  it('exporters whose only header is the key: each signal goes to its own default dataset (otel_logs, otel_traces, otel_metrics), created on first use', async () => {
    const config = (kind: Kind): ExporterConfig => ({ url: `${server.url}${PATH[kind]}`, compression: GZIP, timeoutMillis: EXPORT_TIMEOUT_MS, headers: { 'X-API-Key': server.apiKey } });
    const logs = new ProtoLogExporter(config('otel-logs'));
    const traces = new ProtoTraceExporter(config('otel-traces'));
    const metrics = new ProtoMetricExporter(config('otel-metrics'));
    const results = [track(logs), track(traces), track(metrics)];
    await driveLogs(logs);
    await driveTraces(traces);
    await driveMetrics(metrics);
    for (const r of results) expectExported(r);
    const list = (await (await server.request('/api/v1/logstream')).json()) as { name: string }[];
    expect(list.map((d) => d.name)).toEqual(expect.arrayContaining(['otel_logs', 'otel_traces', 'otel_metrics']));
    expect(await query(server, 'SELECT count(*) AS n FROM otel_logs')).toEqual([{ n: 1 }]);
    expect(await query(server, 'SELECT span_name FROM otel_traces')).toEqual([{ span_name: 'x' }]);
    expect(await query(server, 'SELECT metric_name FROM otel_metrics')).toEqual([{ metric_name: 'x' }]);
    // A dataset still holds one kind: naming the logs dataset for spans is refused.
    const wrong = await otlpPost(server, 'otel-traces', JSON.stringify({ resourceSpans: [] }), { 'content-type': 'application/json', 'X-P-Stream': 'otel_logs' });
    expect(await expectError(wrong, 400)).toMatch(/holds otel-logs data, not otel-traces/);
  });

  describe('export failures end the export, they do not hang', () => {
    let capture: http.Server;
    let captureUrl: string;
    const seen: http.IncomingHttpHeaders[] = [];
    beforeAll(async () => {
      // Answers every export with a non-retryable 400, recording the request headers.
      capture = http.createServer((req, res) => {
        seen.push(req.headers);
        req.resume();
        req.on('end', () => res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":"refused by the test"}'));
      });
      await new Promise<void>((resolve) => capture.listen(0, '127.0.0.1', resolve));
      captureUrl = `http://127.0.0.1:${(capture.address() as AddressInfo).port}`;
    });
    afterAll(async () => {
      capture.closeAllConnections();
      await new Promise((resolve) => capture.close(resolve));
    });

    it('every exporter sends gzip with the dataset headers, and a 400 fails its export at once', async () => {
      const target = { url: captureUrl, apiKey: 'k' };
      for (const v of VARIANTS) {
        const contentType = v.name === 'http' ? 'application/json' : 'application/x-protobuf';
        const cases: [Kind, () => Promise<ExportResultLike[]>][] = [
          [
            'otel-logs',
            async () => {
              const exporter = new v.Logs(exporterConfig(target, 'otel-logs', 'd'));
              const results = track(exporter);
              await driveLogs(exporter);
              return results;
            },
          ],
          [
            'otel-traces',
            async () => {
              const exporter = new v.Traces(exporterConfig(target, 'otel-traces', 'd'));
              const results = track(exporter);
              await driveTraces(exporter);
              return results;
            },
          ],
          [
            'otel-metrics',
            async () => {
              const exporter = new v.Metrics(exporterConfig(target, 'otel-metrics', 'd'));
              const results = track(exporter);
              await driveMetrics(exporter);
              return results;
            },
          ],
        ];
        for (const [kind, run] of cases) {
          seen.length = 0;
          // One request and no retry (a 400 is final): `seen` counts what reached the server.
          const results = await run();
          expect(results.map((r) => r.code), `${v.name} ${kind}`).toEqual([1]);
          expect(results[0].error?.code).toBe(400);
          expect(seen, `${v.name} ${kind}`).toHaveLength(1);
          expect(seen[0]).toMatchObject({
            'content-encoding': 'gzip',
            'content-type': contentType,
            'x-api-key': 'k',
            'x-p-stream': 'd',
            'x-p-log-source': kind,
          });
        }
      }
    });

    it('an unreachable endpoint fails within timeoutMillis', async () => {
      // Port 0: nothing can listen there, so every connection is refused (no port picked and left free).
      const target = { url: 'http://127.0.0.1:0', apiKey: 'k' };
      const exporter = new HttpLogExporter(exporterConfig(target, 'otel-logs', 'd', 1000));
      const results = track(exporter);
      const started = Date.now();
      await driveLogs(exporter);
      // timeoutMillis is 1 s: well under the exporter's default of 10 s, with room for a loaded machine.
      expect(Date.now() - started).toBeLessThan(9_000);
      expect(results.map((r) => r.code)).toEqual([1]);
    });
  });

  describe('request handling', () => {
    const logHeaders = (dataset: string) => ({ 'content-type': 'application/json', 'X-P-Stream': dataset, 'X-P-Log-Source': 'otel-logs' });

    it('a record with a bad trace id is rejected alone: 200 with partialSuccess, the good record is stored', async () => {
      const body = jsonLogs([
        { timeUnixNano: nowNanos(), body: { stringValue: 'good one' }, traceId: '5b8efff798038103d269b633813fc60c', spanId: 'eee19b7ec3c1b174' },
        { timeUnixNano: nowNanos(), body: { stringValue: 'bad one' }, traceId: 'abcd' },
      ]);
      const res = await otlpPost(server, 'otel-logs', body, logHeaders('otel_partial'));
      expect(res.status).toBe(200);
      const parsed = await json<{ partialSuccess?: { rejectedLogRecords?: string | number; errorMessage?: string } }>(res);
      expect(Number(parsed.partialSuccess?.rejectedLogRecords)).toBe(1);
      expect(parsed.partialSuccess?.errorMessage).toMatch(/trace_id/);
      expect(await query(server, 'SELECT body, trace_id, span_id, "service.name" FROM otel_partial')).toEqual([
        { body: 'good one', trace_id: '5b8efff798038103d269b633813fc60c', span_id: 'eee19b7ec3c1b174', 'service.name': 'hand-written' },
      ]);
    });

    it('a time past what TIMESTAMP_NS holds (2262) rejects just that record, and the dataset stays queryable', async () => {
      const late = '18446744073709551615'; // uint64 max: year 2554
      const goodTime = nowNanos();
      const logsRes = await otlpPost(
        server,
        'otel-logs',
        jsonLogs([
          { timeUnixNano: late, body: { stringValue: 'too late' } },
          { timeUnixNano: goodTime, observedTimeUnixNano: '9223372036854775807', body: { stringValue: 'observed too late' } },
          { timeUnixNano: goodTime, body: { stringValue: 'in range' } },
        ]),
        logHeaders('otel_late_logs'),
      );
      expect(logsRes.status).toBe(200);
      const logsBody = await json<{ partialSuccess: { rejectedLogRecords: string; errorMessage: string } }>(logsRes);
      expect(logsBody.partialSuccess.rejectedLogRecords).toBe('2');
      expect(logsBody.partialSuccess.errorMessage).toMatch(/logRecords\[0\]\.timeUnixNano.*2262/);
      expect(await query(server, 'SELECT body FROM otel_late_logs')).toEqual([{ body: 'in range' }]);

      const span = (spanId: string, end: string) => ({
        traceId: '5b8efff798038103d269b633813fc60c',
        spanId,
        name: spanId,
        startTimeUnixNano: goodTime,
        endTimeUnixNano: end,
      });
      const spansRes = await otlpPost(
        server,
        'otel-traces',
        JSON.stringify({ resourceSpans: [{ scopeSpans: [{ spans: [span('eee19b7ec3c1b174', late), span('eee19b7ec3c1b175', goodTime)] }] }] }),
        { 'content-type': 'application/json', 'X-P-Stream': 'otel_late_spans' },
      );
      expect(spansRes.status).toBe(200);
      expect(await json(spansRes)).toMatchObject({ partialSuccess: { rejectedSpans: '1' } });
      expect(await query(server, 'SELECT span_name, span_duration_ns FROM otel_late_spans')).toEqual([{ span_name: 'eee19b7ec3c1b175', span_duration_ns: 0 }]);

      const metricsRes = await otlpPost(
        server,
        'otel-metrics',
        JSON.stringify({
          resourceMetrics: [
            {
              scopeMetrics: [
                {
                  metrics: [
                    {
                      name: 'g',
                      gauge: {
                        dataPoints: [
                          { timeUnixNano: late, asInt: '1' },
                          { timeUnixNano: goodTime, startTimeUnixNano: late, asInt: '2' },
                          { timeUnixNano: goodTime, asInt: '3' },
                        ],
                      },
                    },
                  ],
                },
              ],
            },
          ],
        }),
        { 'content-type': 'application/json', 'X-P-Stream': 'otel_late_metrics' },
      );
      expect(metricsRes.status).toBe(200);
      expect(await json(metricsRes)).toMatchObject({ partialSuccess: { rejectedDataPoints: '2' } });
      expect(await query(server, 'SELECT data_point_value FROM otel_late_metrics')).toEqual([{ data_point_value: 3 }]);
    });

    it('text/plain is 415', async () => {
      const res = await otlpPost(server, 'otel-logs', jsonLogs([{ body: { stringValue: 'x' } }]), { 'content-type': 'text/plain', 'X-P-Stream': 'otel_misc' });
      await expectError(res, 415);
    });

    it('a truncated protobuf body is 400 with a JSON error', async () => {
      const cls = requestClass.logs;
      const full = cls
        .encode(
          cls.fromObject({
            resourceLogs: [{ scopeLogs: [{ logRecords: [{ timeUnixNano: nowNanos(), body: { stringValue: 'a fairly long body that gets cut in half' } }] }] }],
          }),
        )
        .finish();
      const res = await otlpPost(server, 'otel-logs', Buffer.from(full.subarray(0, full.length - 10)), {
        'content-type': 'application/x-protobuf',
        'X-P-Stream': 'otel_misc',
      });
      expect(await expectError(res, 400)).toMatch(/protobuf/);
    });

    it('a gzip bomb is 413 and the server stays up', async () => {
      const bomb = gzipSync(Buffer.alloc(100 * 1024 * 1024), { level: 9 });
      expect(bomb.length).toBeLessThan(1024 * 1024);
      const res = await otlpPost(server, 'otel-logs', bomb, {
        'content-type': 'application/x-protobuf',
        'content-encoding': 'gzip',
        'X-P-Stream': 'otel_misc',
      });
      await expectError(res, 413);
      expect((await fetch(`${server.url}/api/v1/liveness`)).status).toBe(200);
      // And it still ingests.
      const ok = await otlpPost(server, 'otel-logs', gzipSync(jsonLogs([{ body: { stringValue: 'after the bomb' } }])), {
        ...logHeaders('otel_after_bomb'),
        'content-encoding': 'gzip',
      });
      expect(ok.status, await ok.clone().text()).toBe(200);
      expect(await query(server, 'SELECT body FROM otel_after_bomb')).toEqual([{ body: 'after the bomb' }]);
    });

    it('X-P-Log-Source must match the endpoint', async () => {
      const res = await otlpPost(server, 'otel-logs', jsonLogs([{ body: { stringValue: 'x' } }]), { ...logHeaders('otel_source'), 'X-P-Log-Source': 'otel-traces' });
      expect(await expectError(res, 400)).toMatch(/X-P-Log-Source/);
      // Nothing was created.
      expect((await server.request('/api/v1/logstream/otel_source/schema')).status).toBe(404);
    });

    it('a dataset keeps its kind: traces into a logs dataset are 400', async () => {
      const logs = await otlpPost(server, 'otel-logs', jsonLogs([{ body: { stringValue: 'first' } }]), logHeaders('otel_kind'));
      expect(logs.status).toBe(200);
      const spans = JSON.stringify({
        resourceSpans: [
          {
            scopeSpans: [
              {
                spans: [
                  { traceId: '5b8efff798038103d269b633813fc60c', spanId: 'eee19b7ec3c1b174', name: 'x', startTimeUnixNano: nowNanos(), endTimeUnixNano: nowNanos() },
                ],
              },
            ],
          },
        ],
      });
      const res = await otlpPost(server, 'otel-traces', spans, { 'content-type': 'application/json', 'X-P-Stream': 'otel_kind', 'X-P-Log-Source': 'otel-traces' });
      expect(await expectError(res, 400)).toMatch(/otel-logs/);
      expect(await query(server, 'SELECT body FROM otel_kind')).toEqual([{ body: 'first' }]);
    });

    it('without X-P-Stream or ?stream=, OTLP/JSON logs go to the default dataset otel_logs', async () => {
      const res = await otlpPost(server, 'otel-logs', jsonLogs([{ timeUnixNano: nowNanos(), body: { stringValue: 'no stream named' } }]), { 'content-type': 'application/json' });
      expect(res.status, await res.clone().text()).toBe(200);
      expect(await query(server, "SELECT count(*) AS n FROM otel_logs WHERE body = 'no stream named'")).toEqual([{ n: 1 }]);
    });

    it('?stream= without X-P-Log-Source works', async () => {
      const res = await server.request('/v1/logs?stream=otel_query_param', {
        method: 'POST',
        body: jsonLogs([{ timeUnixNano: nowNanos(), severityNumber: 'SEVERITY_NUMBER_ERROR', body: { stringValue: 'via query param' } }]),
        headers: { 'content-type': 'application/json' },
      });
      expect(res.status, await res.clone().text()).toBe(200);
      expect(await query(server, 'SELECT body, severity_number FROM otel_query_param')).toEqual([{ body: 'via query param', severity_number: 17 }]);
    });

    it('invalid UTF-8 inside protobuf strings is stored (as U+FFFD) without crashing', async () => {
      const cls = requestClass.logs;
      const encoded = Buffer.from(
        cls
          .encode(
            cls.fromObject({
              resourceLogs: [
                {
                  resource: { attributes: [{ key: 'service.name', value: { stringValue: 'utf8-check' } }] },
                  scopeLogs: [
                    {
                      logRecords: [
                        {
                          timeUnixNano: nowNanos(),
                          body: { stringValue: 'before BODYMARK after' },
                          attributes: [{ key: 'note', value: { stringValue: 'ATTRMARK' } }],
                        },
                      ],
                    },
                  ],
                },
              ],
            }),
          )
          .finish(),
      );
      // Same-length patches keep every length prefix valid: a lone continuation byte, a truncated
      // 3-byte sequence, an overlong encoding and 0xFF.
      const patch = (marker: string, bytes: number[]) => {
        const at = encoded.indexOf(marker);
        expect(at).toBeGreaterThan(0);
        Buffer.from(bytes).copy(encoded, at);
      };
      patch('BODYMARK', [0x80, 0x41, 0xe2, 0x82, 0x42, 0xc0, 0xaf, 0xff]);
      patch('ATTRMARK', [0x41, 0xff, 0xfe, 0x42, 0x43, 0x44, 0x45, 0x46]);
      const res = await otlpPost(server, 'otel-logs', encoded, { 'content-type': 'application/x-protobuf', 'X-P-Stream': 'otel_utf8' });
      expect(res.status, await res.clone().text()).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/application\/x-protobuf/);
      const rows = await query(server, `SELECT body, note, "service.name" FROM otel_utf8`);
      expect(rows).toHaveLength(1);
      const body = rows[0].body as string;
      expect(body.startsWith('before ')).toBe(true);
      expect(body.endsWith(' after')).toBe(true);
      expect(body).toContain('\ufffd');
      expect(body).toContain('A');
      expect(body).toContain('B');
      expect(rows[0].note).toBe('A\ufffd\ufffdBCDEF');
      expect(rows[0]['service.name']).toBe('utf8-check');
      expect((await fetch(`${server.url}/api/v1/liveness`)).status).toBe(200);
    });
  });
});
