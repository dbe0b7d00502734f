/**
 * The Jaeger query API side by side with Jaeger v1.76 itself (all-in-one, in-memory store): the same OTLP
 * spans (the JS SDK's, with events, links, errors, span kinds and calls across services; telemetrygen's)
 * go to both through one fan-out endpoint, then every API call is made to both and the answers compared.
 *
 * Normalised, and only this (docs/traces.md says why each differs):
 * - the order of traces in a search answer, of spans in a trace, of tags, of services and operations, and
 *   of dependency links (Jaeger's memory store answers in map order; our columns keep no attribute order);
 * - process ids (`p1`, `p2`…): each span's process is compared by content;
 * - a dependency link's `source` field (Jaeger's store adds it; the UI does not read it);
 * - in `/api/v3`'s OTLP JSON, what Jaeger v1.76's span model does not keep and the service does: span and
 *   link flags, a link's own attributes (Jaeger answers `opentracing.ref_type` instead), and array values
 *   (Jaeger answers their JSON text; the service's arrayValue is turned into that text to compare).
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { context, SpanKind, SpanStatusCode, trace, type Tracer } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFanOut, startJaeger, telemetrygenBinary, type Jaeger } from './helpers/jaeger.ts';
import { ADMIN_KEY, startServer, type TestServer } from './helpers/server.ts';

const SCOPED_KEY = 'jaeger-scoped-reader-key-0123';
const TRACES_KEY = 'jaeger-traces-reader-key-0123';
import { waitFor } from './helpers/wait.ts';

const run = promisify(execFile);

type Tag = { key: string; type: string; value: unknown };
type JSpan = { traceID: string; spanID: string; processID: string; tags: Tag[]; logs: { timestamp: number; fields: Tag[] }[]; references: unknown[]; [k: string]: unknown };
type JTrace = { traceID: string; spans: JSpan[]; processes: Record<string, { serviceName: string; tags: Tag[] }>; warnings: unknown };

const byKey = (a: Tag, b: Tag) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
/** A trace with each span's process inlined and everything unordered sorted (see the header). */
function normalTrace(t: JTrace) {
  const spans = t.spans
    .map(({ processID, ...s }) => ({
      ...s,
      process: { ...t.processes[processID], tags: [...t.processes[processID].tags].sort(byKey) },
      tags: [...s.tags].sort(byKey),
      logs: s.logs.map((l) => ({ ...l, fields: [...l.fields].sort(byKey) })),
    }))
    .sort((a, b) => a.spanID.localeCompare(b.spanID));
  return { traceID: t.traceID, warnings: t.warnings, spans };
}
const normalTraces = (ts: JTrace[]) => ts.map(normalTrace).sort((a, b) => a.traceID.localeCompare(b.traceID));

type KV = { key: string; value: Record<string, unknown> };
/** An OTLP value as Jaeger v1.76 answers it: an array or map as its JSON text (see the header). */
// `any`: an OTLP AnyValue of either server, one member set.
function jaegerValue(v: Record<string, unknown>): Record<string, unknown> {
  const plain = (x: any): unknown => x.stringValue ?? x.boolValue ?? (x.intValue !== undefined ? Number(x.intValue) : x.doubleValue ?? (x.arrayValue ? x.arrayValue.values.map(plain) : Object.fromEntries((x.kvlistValue?.values ?? []).map((e: KV) => [e.key, plain(e.value)]))));
  return v.arrayValue || v.kvlistValue ? { stringValue: JSON.stringify(plain(v)) } : v;
}
const kvs = (a: KV[] | undefined) => (a ?? []).map((e) => ({ key: e.key, value: jaegerValue(e.value) })).sort((x, y) => x.key.localeCompare(y.key));
/** `/api/v3` OTLP JSON as spans (resource and scope inlined), sorted, without what Jaeger does not keep (header). */
// `any`: either server's OTLP JSON, picked apart field by field.
function v3Spans(body: any) {
  return (body.result.resourceSpans as any[])
    .flatMap((r) =>
      r.scopeSpans.flatMap((ss: any) =>
        ss.spans.map(({ flags: _f, links, attributes, events, ...sp }: any) => ({
          ...sp,
          resource: kvs(r.resource?.attributes),
          scope: ss.scope,
          attributes: kvs(attributes),
          events: (events ?? []).map((e: any) => ({ ...e, attributes: kvs(e.attributes) })),
          links: (links ?? []).map((l: any) => ({ traceId: l.traceId, spanId: l.spanId, traceState: l.traceState })),
        })),
      ),
    )
    .sort((a: any, b: any) => a.spanId.localeCompare(b.spanId));
}

let jaeger: Jaeger;
let server: TestServer;
let fanOut: { url: string; close: () => Promise<void> };
const traceIds: string[] = [];

// `any`: two servers' JSON answers, compared whole or picked apart by the test that knows their shape.
async function both(path: string): Promise<[{ status: number; body: any }, { status: number; body: any }]> {
  const theirs = await fetch(`${jaeger.queryUrl}${path}`);
  const ours = await server.request(`/jaeger${path}`);
  return [
    { status: theirs.status, body: await theirs.json() },
    { status: ours.status, body: await ours.json() },
  ];
}

function provider(service: string, extra: Record<string, string | number> = {}) {
  const exporter = new OTLPTraceExporter({ url: `${fanOut.url}/v1/traces` });
  return new BasicTracerProvider({ resource: resourceFromAttributes({ 'service.name': service, 'deployment.environment.name': 'test', ...extra }), spanProcessors: [new SimpleSpanProcessor(exporter)] });
}

/** A checkout call across three services: server/client/consumer/producer spans, events, an error, links. */
async function sendSdkSpans() {
  const frontend = provider('frontend', { 'host.name': 'web-1' });
  const checkout = provider('checkout', { 'service.version': '2.1.0' });
  const billing = provider('billing');
  const t = (p: BasicTracerProvider, name: string): Tracer => p.getTracer(name, '1.0.0');
  const now = Date.now();
  for (let i = 0; i < 3; i++) {
    const root = t(frontend, 'web').startSpan('GET /checkout', { kind: SpanKind.SERVER, startTime: now - 5000 + i * 100, attributes: { 'http.request.method': 'GET', 'http.response.status_code': 200, attempt: i } });
    const rootCtx = trace.setSpan(context.active(), root);
    const call = t(frontend, 'web').startSpan('POST checkout', { kind: SpanKind.CLIENT, startTime: now - 4990 + i * 100 }, rootCtx);
    const placed = t(checkout, 'api').startSpan('checkout.place', { kind: SpanKind.SERVER, startTime: now - 4980 + i * 100, attributes: { 'order.items': 3 + i, 'order.total': 12.5 } }, trace.setSpan(context.active(), call));
    placed.addEvent('cart loaded', { items: 3, cached: true, skus: ['a', 'b'], qty: [1, 2] }, now - 4970 + i * 100);
    placed.addEvent('payment requested', now - 4960 + i * 100);
    const publish = t(checkout, 'api').startSpan('orders publish', { kind: SpanKind.PRODUCER, startTime: now - 4950 + i * 100 }, trace.setSpan(context.active(), placed));
    const consume = t(billing, 'worker').startSpan('orders process', { kind: SpanKind.CONSUMER, startTime: now - 4900 + i * 100, links: [{ context: root.spanContext(), attributes: { reason: 'origin' } }] }, trace.setSpan(context.active(), publish));
    if (i === 1) {
      consume.setStatus({ code: SpanStatusCode.ERROR, message: 'card declined' });
      consume.addEvent('exception', { 'exception.type': 'PaymentError', 'exception.message': 'card declined' }, now - 4890 + i * 100);
    } else consume.setStatus({ code: SpanStatusCode.OK });
    const internal = t(billing, 'worker').startSpan('ledger write', { startTime: now - 4880 + i * 100 }, trace.setSpan(context.active(), consume));
    for (const [s, end] of [[internal, 4870], [consume, 4860], [publish, 4940], [placed, 4930], [call, 4920], [root, 4910]] as const) s.end(now - end + i * 100);
    traceIds.push(root.spanContext().traceId);
  }
  for (const p of [frontend, checkout, billing]) await p.forceFlush();
}

async function sendTelemetrygen() {
  const common = ['traces', '--otlp-http', '--otlp-insecure', '--otlp-endpoint', fanOut.url.replace('http://', ''), '--rate', '0'];
  await run(telemetrygenBinary(), [...common, '--service', 'tg-alpha', '--traces', '3', '--child-spans', '2']);
  await run(telemetrygenBinary(), [...common, '--service', 'tg-beta', '--traces', '2', '--status-code', 'Error', '--span-links', '1', '--telemetry-attributes', 'tier="gold"']);
}

beforeAll(async () => {
  // Flushed within a second, so the lookups read Parquet files through the trace-id index, not the WAL.
  [jaeger, server] = await Promise.all([startJaeger(), startServer({ env: { P_FLUSH_INTERVAL: '1s', P_API_KEYS: `${ADMIN_KEY}:admin,${SCOPED_KEY}:reader:other_traces,${TRACES_KEY}:reader:otel_traces` } })]);
  fanOut = await startFanOut([{ url: jaeger.otlpUrl }, { url: server.url, headers: { Authorization: `Bearer ${server.apiKey}` } }]);
  await sendSdkSpans();
  await sendTelemetrygen();
  // Jaeger's collector stores through a queue: wait until it holds every service.
  await waitFor('Jaeger to store every service', async () => {
    const r = (await (await fetch(`${jaeger.queryUrl}/api/services`)).json()) as { data: string[] };
    return r.data.length === 5;
  });
  await waitFor('the spans to be flushed to Parquet', async () => {
    const stats = (await (await server.request('/api/v1/logstream/otel_traces/stats')).json()) as { wal: { count: number } };
    return stats.wal.count === 0;
  });
}, 180_000);

afterAll(async () => {
  await fanOut?.close();
  await Promise.all([jaeger?.stop(), server?.stop()]);
});

describe('Jaeger API beside Jaeger v1.76', () => {
  it('services and operations', async () => {
    const [theirs, ours] = await both('/api/services');
    expect(ours.status).toBe(200);
    expect([...ours.body.data].sort()).toEqual([...theirs.body.data].sort());
    expect(ours.body.data).toHaveLength(5);
    for (const service of theirs.body.data as string[]) {
      const [t, o] = await both(`/api/services/${encodeURIComponent(service)}/operations`);
      expect([...o.body.data].sort(), service).toEqual([...t.body.data].sort());
      for (const kind of ['', 'server', 'consumer', 'internal']) {
        const [t2, o2] = await both(`/api/operations?service=${encodeURIComponent(service)}&spanKind=${kind}`);
        const sort = (ops: { name: string; spanKind: string }[]) => [...ops].sort((a, b) => `${a.name}|${a.spanKind}`.localeCompare(`${b.name}|${b.spanKind}`));
        expect(sort(o2.body.data), `${service} ${kind}`).toEqual(sort(t2.body.data));
      }
    }
  });

  it('traces by id: spans, processes, references, tags, logs', async () => {
    const [, anySearch] = await both('/api/traces?service=tg-beta&limit=10');
    const ids = [...traceIds, ...(anySearch.body.data as JTrace[]).map((t) => t.traceID)];
    expect(ids.length).toBe(5);
    for (const id of ids) {
      const [theirs, ours] = await both(`/api/traces/${id}`);
      expect(ours.status, id).toBe(200);
      expect(normalTraces(ours.body.data), id).toEqual(normalTraces(theirs.body.data));
    }
    const [theirs, ours] = await both('/api/traces/0123456789abcdef0123456789abcdef');
    expect([ours.status, ours.body.errors?.[0]?.code]).toEqual([theirs.status, theirs.body.errors?.[0]?.code]);
  });

  it('search: service, operation, tags, durations, limit', async () => {
    const searches = [
      'service=frontend',
      'service=billing&operation=orders%20process',
      `service=billing&tags=${encodeURIComponent('{"error":"true"}')}`,
      `service=checkout&tags=${encodeURIComponent('{"order.items":"4"}')}`,
      'service=tg-alpha&minDuration=1us',
      'service=checkout&maxDuration=20ms',
      'service=tg-beta&tag=tier:gold',
      'service=frontend&tag=host.name:web-1',
    ];
    for (const q of searches) {
      const [theirs, ours] = await both(`/api/traces?${q}`);
      expect(ours.status, q).toBe(200);
      // Every search here finds something in Jaeger: an empty answer on both sides would prove nothing.
      expect(theirs.body.data.length, q).toBeGreaterThan(0);
      expect(normalTraces(ours.body.data), q).toEqual(normalTraces(theirs.body.data));
    }
    const [theirs, ours] = await both('/api/traces?service=tg-alpha&limit=2');
    expect(ours.body.data).toHaveLength(theirs.body.data.length);
  });

  it('dependencies', async () => {
    const [theirs, ours] = await both(`/api/dependencies?endTs=${Date.now()}&lookback=3600000`);
    const norm = (d: { parent: string; child: string; callCount: number }[]) => d.map(({ parent, child, callCount }) => ({ parent, child, callCount })).sort((a, b) => `${a.parent}>${a.child}`.localeCompare(`${b.parent}>${b.child}`));
    expect(norm(ours.body.data)).toEqual(norm(theirs.body.data));
    expect(ours.body.data.length).toBeGreaterThan(0);
  });

  it('api/v3: services, operations, trace by id, find', async () => {
    const [ts, os] = await both('/api/v3/services');
    expect([...os.body.services].sort()).toEqual([...ts.body.services].sort());
    const [to, oo] = await both('/api/v3/operations?service=checkout');
    const sort = (ops: { name: string; spanKind: string }[]) => [...ops].sort((a, b) => a.name.localeCompare(b.name));
    expect(sort(oo.body.operations)).toEqual(sort(to.body.operations));
    for (const id of traceIds) {
      const [tt, ot] = await both(`/api/v3/traces/${id}`);
      expect(ot.status).toBe(200);
      expect(v3Spans(ot.body), id).toEqual(v3Spans(tt.body));
    }
    const min = new Date(Date.now() - 3_600_000).toISOString();
    const max = new Date(Date.now() + 60_000).toISOString();
    const [tf, of] = await both(`/api/v3/traces?query.service_name=billing&query.start_time_min=${min}&query.start_time_max=${max}`);
    expect(v3Spans(tf.body).length).toBeGreaterThan(0);
    expect(v3Spans(of.body)).toEqual(v3Spans(tf.body));
  });

  it('auth: Bearer, Basic and X-API-Key; a scoped key reads only its datasets', async () => {
    const anon = await fetch(`${server.url}/jaeger/api/services`);
    expect(anon.status).toBe(401);
    const [, admin] = await both('/api/services');
    const as = async (headers: Record<string, string>, path = '/jaeger/api/services') => {
      const r = await fetch(`${server.url}${path}`, { headers });
      return { status: r.status, body: await r.json() };
    };
    const basic = `Basic ${Buffer.from(`grafana:${TRACES_KEY}`).toString('base64')}`;
    const schemes: Record<string, string>[] = [{ Authorization: `Bearer ${TRACES_KEY}` }, { Authorization: basic }, { 'X-API-Key': TRACES_KEY }];
    for (const headers of schemes) {
      expect(await as(headers), JSON.stringify(headers)).toEqual({ status: 200, body: admin.body });
    }
    // A key for another dataset gets nothing from otel_traces: no services, no trace.
    const scoped = await as({ Authorization: `Bearer ${SCOPED_KEY}` });
    expect(scoped.status).toBe(403);
    const trace = await as({ Authorization: `Bearer ${SCOPED_KEY}` }, `/jaeger/api/traces/${traceIds[0]}`);
    expect(trace.status).toBe(403);
    // Its own dataset (none stored yet) answers empty, picked by ?dataset= or X-P-Stream.
    expect((await as({ Authorization: `Bearer ${SCOPED_KEY}` }, '/jaeger/api/services?dataset=other_traces')).body.data).toEqual([]);
    expect((await as({ Authorization: `Bearer ${SCOPED_KEY}`, 'X-P-Stream': 'other_traces' })).body.data).toEqual([]);
  });
});
