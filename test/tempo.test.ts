import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Context, type HrTime, type Link } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { requestClass } from '../src/ingest/otlp/generated.ts';
import { ADMIN_KEY, startServer, type TestServer } from './helpers/server.ts';
import { waitFor } from './helpers/wait.ts';

/**
 * The Tempo API as Grafana's Tempo data source calls it (public/app/plugins/datasource/tempo: TraceQL
 * search `GET /api/search?q=&limit=&spss=&start=&end=` with start/end in Unix seconds, tag names
 * `GET /api/v2/search/tags?scope=`, values `GET /api/v2/search/tag/{tag}/values?q=`, and its backend's
 * trace by id `GET /api/v2/traces/{id}` with `Accept: application/protobuf`), over spans the
 * OpenTelemetry JS SDK exported (three services, errors, events, links). Every answer is compared with
 * what the SDK recorded it sent (an in-memory exporter beside the OTLP one), computed here.
 */

const SERVICES = ['frontend', 'cart', 'payment'] as const;
const KIND_NAMES = ['internal', 'server', 'client', 'producer', 'consumer']; // the SDK's SpanKind order
const STATUS_NAMES = ['unset', 'ok', 'error'];

/** A deterministic pseudo-random sequence: the same spans every run. */
function rng(seed: number) {
  let s = seed;
  return () => {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    return s / 2 ** 31;
  };
}

const hr = (ns: bigint): HrTime => [Number(ns / 1_000_000_000n), Number(ns % 1_000_000_000n)];
const ns = (t: HrTime) => BigInt(t[0]) * 1_000_000_000n + BigInt(t[1]);

interface Sent {
  trace: string;
  id: string;
  parent: string | undefined;
  service: string;
  name: string;
  kind: string;
  status: string;
  start: bigint;
  end: bigint;
  attrs: Record<string, unknown>;
  span: ReadableSpan;
}

/** Exports the test's traces through the SDK; returns what the SDK recorded. */
async function sendTraces(server: TestServer, base: bigint): Promise<Sent[]> {
  const memory = new InMemorySpanExporter();
  const providers = SERVICES.map(
    (service, i) =>
      new BasicTracerProvider({
        resource: resourceFromAttributes({ 'service.name': service, 'deployment.environment': i === 2 ? 'staging' : 'prod' }),
        spanProcessors: [
          new SimpleSpanProcessor(memory),
          new BatchSpanProcessor(new OTLPTraceExporter({ url: `${server.url}/v1/traces`, headers: { 'X-API-Key': server.apiKey } }), { maxExportBatchSize: 1000, scheduledDelayMillis: 60_000 }),
        ],
      }),
  );
  const tracers = providers.map((p) => p.getTracer('tempo-test', '1.0.0'));
  const r = rng(33);
  let firstRootCtx: Context | undefined;
  for (let t = 0; t < 12; t++) {
    const t0 = base + BigInt(t) * 20_000_000_000n;
    const rootDur = BigInt(50_000_000 + Math.floor(r() * 900_000_000));
    const links: Link[] = firstRootCtx && t % 4 === 3 ? [{ context: trace.getSpanContext(firstRootCtx)!, attributes: { 'link.reason': 'retry-of' } }] : [];
    const root = tracers[0].startSpan(`GET /page/${t % 3}`, { kind: SpanKind.SERVER, startTime: hr(t0), links, attributes: { 'http.request.method': t % 2 ? 'POST' : 'GET', 'http.response.status_code': 200 } }, ROOT_CONTEXT);
    const rootCtx = trace.setSpan(ROOT_CONTEXT, root);
    firstRootCtx ??= rootCtx;
    const children = 1 + Math.floor(r() * 4);
    for (let c = 0; c < children; c++) {
      const svc = 1 + Math.floor(r() * 2);
      const start = t0 + BigInt(1_000_000 + Math.floor(r() * 40_000_000));
      const dur = BigInt(Math.floor(r() * Number(rootDur) * 1.5));
      const failed = r() < 0.3;
      const child = tracers[svc].startSpan(svc === 1 ? 'cart.load' : 'payment.charge', {
        kind: r() < 0.5 ? SpanKind.CLIENT : SpanKind.INTERNAL,
        startTime: hr(start),
        attributes: { 'http.response.status_code': failed ? 500 : 200, retry: r() < 0.5, 'db.rows': Math.floor(r() * 100) },
      }, rootCtx);
      if (failed) {
        child.addEvent('exception', { 'exception.type': 'CardDeclined', 'exception.message': `declined ${t}` }, hr(start + 1000n));
        child.setStatus({ code: SpanStatusCode.ERROR, message: 'declined' });
      } else if (r() < 0.5) child.setStatus({ code: SpanStatusCode.OK });
      child.end(hr(start + dur));
    }
    root.end(hr(t0 + rootDur));
  }
  for (const p of providers) await p.forceFlush();
  // Read before shutdown: shutting the in-memory exporter down empties it.
  const finished = [...memory.getFinishedSpans()];
  for (const p of providers) await p.shutdown();
  return finished.map((s) => ({
    trace: s.spanContext().traceId,
    id: s.spanContext().spanId,
    parent: s.parentSpanContext?.spanId,
    service: String(s.resource.attributes['service.name']),
    name: s.name,
    kind: KIND_NAMES[s.kind],
    status: STATUS_NAMES[s.status.code],
    start: ns(s.startTime),
    end: ns(s.endTime),
    attrs: { ...s.resource.attributes, ...s.attributes },
    span: s,
  }));
}

/** What a search must answer, computed from the spans sent: span sets by predicate, combined per trace. */
const traceDuration = (spans: Sent[]) => spans.reduce((m, s) => (s.end > m ? s.end : m), 0n) - spans.reduce((m, s) => (s.start < m ? s.start : m), spans[0].start);

function expectedSearch(sent: Sent[], sets: ((s: Sent) => boolean)[], combine: 'and' | 'or', limit: number, spss: number, traceFilter?: (spans: Sent[]) => boolean) {
  const byTrace = new Map<string, Sent[]>();
  for (const s of sent) byTrace.set(s.trace, [...(byTrace.get(s.trace) ?? []), s]);
  const out = [];
  for (const [traceID, spans] of byTrace) {
    if (traceFilter && !traceFilter(spans)) continue;
    const matched = sets.map((p) => spans.filter(p));
    if (combine === 'and' ? matched.some((m) => m.length === 0) : matched.every((m) => m.length === 0)) continue;
    const union = [...new Set(matched.flat())].sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : a.id < b.id ? -1 : 1));
    const start = spans.reduce((m, s) => (s.start < m ? s.start : m), spans[0].start);
    const end = spans.reduce((m, s) => (s.end > m ? s.end : m), spans[0].end);
    const root = spans.find((s) => s.parent === undefined)!;
    out.push({
      traceID,
      rootServiceName: root.service,
      rootTraceName: root.name,
      startTimeUnixNano: String(start),
      durationMs: Number((end - start) / 1_000_000n),
      matched: union.length,
      spans: union.slice(0, spss).map((s) => ({ spanID: s.id, name: s.name, startTimeUnixNano: String(s.start), durationNanos: String(s.end - s.start) })),
    });
  }
  out.sort((a, b) => (BigInt(a.startTimeUnixNano) > BigInt(b.startTimeUnixNano) ? -1 : 1));
  return out.slice(0, limit);
}

interface SearchAnswer {
  traces: {
    traceID: string;
    rootServiceName: string;
    rootTraceName: string;
    startTimeUnixNano: string;
    durationMs: number;
    spanSets: { matched: number; spans: { spanID: string; name: string; startTimeUnixNano: string; durationNanos: string; attributes: { key: string; value: Record<string, unknown> }[] }[] }[];
  }[];
}

describe('Tempo API (Grafana Tempo data source)', () => {
  let server: TestServer;
  let sent: Sent[];
  const base = BigInt(Date.now() - 20 * 60_000) * 1_000_000n;
  // Grafana sends its time range in whole seconds.
  const range = { start: String(Number(base / 1_000_000_000n) - 60), end: String(Math.ceil(Date.now() / 1000) + 60) };

  const get = (path: string, params: Record<string, string> = {}, headers: Record<string, string> = {}) =>
    server.request(`/tempo${path}?${new URLSearchParams(params)}`, { headers });
  const search = async (q: string, limit = 20, spss = 3): Promise<SearchAnswer> => {
    const res = await get('/api/search', { q, limit: String(limit), spss: String(spss), ...range });
    expect(res.status, await res.clone().text()).toBe(200);
    return (await res.json()) as SearchAnswer;
  };
  const shape = (a: SearchAnswer) =>
    a.traces.map((t) => ({
      traceID: t.traceID,
      rootServiceName: t.rootServiceName,
      rootTraceName: t.rootTraceName,
      startTimeUnixNano: t.startTimeUnixNano,
      durationMs: t.durationMs,
      matched: t.spanSets[0].matched,
      spans: t.spanSets[0].spans.map(({ spanID, name, startTimeUnixNano, durationNanos }) => ({ spanID, name, startTimeUnixNano, durationNanos })),
    }));

  beforeAll(async () => {
    server = await startServer({ env: { P_API_KEYS: `${ADMIN_KEY}:admin,other-key:reader:elsewhere` } });
    sent = await sendTraces(server, base);
    await waitFor('all spans queryable', async () => {
      const found = (await search('{}', 100, 1000)).traces.reduce((n, t) => n + t.spanSets[0].matched, 0);
      if (found !== sent.length) throw new Error(`${found} of ${sent.length} spans found`);
      return true;
    });
  }, 120_000);
  afterAll(() => server?.stop());

  it('answers echo and buildinfo', async () => {
    expect(await (await get('/api/echo')).text()).toBe('echo');
    expect(((await (await get('/api/status/buildinfo')).json()) as { version: string }).version).toMatch(/^\d+\.\d+\.\d+$/);
  });

  const is = (service: string) => (s: Sent) => s.service === service;
  it.each([
    ['{}', [() => true], 'or'],
    ['{ resource.service.name = "payment" }', [is('payment')], 'or'],
    ['{ .service.name = "cart" && status = error }', [(s: Sent) => s.service === 'cart' && s.status === 'error'], 'or'],
    ['{ status = error } && { kind = client }', [(s: Sent) => s.status === 'error', (s: Sent) => s.kind === 'client'], 'and'],
    ['{ .service.name = "cart" } && { .service.name = "payment" }', [is('cart'), is('payment')], 'and'],
    ['{ span.http.response.status_code >= 500 } || { name =~ "GET /page/[01]" }', [(s: Sent) => Number(s.attrs['http.response.status_code']) >= 500, (s: Sent) => /^GET \/page\/[01]$/.test(s.name)], 'or'],
    ['{ duration > 300ms && kind != server }', [(s: Sent) => s.end - s.start > 300_000_000n && s.kind !== 'server'], 'or'],
    ['{ traceDuration > 500ms && rootServiceName = "frontend" && .retry = true }', [(s: Sent) => s.attrs.retry === true], 'or'],
    ['{ .deployment.environment = "staging" && .db.rows < 50 }', [(s: Sent) => s.attrs['deployment.environment'] === 'staging' && Number(s.attrs['db.rows']) < 50], 'or'],
  ] as const)('TraceQL %s', async (q, sets, combine) => {
    // traceDuration > 500ms and rootServiceName = "frontend" hold for the whole trace: checked on its spans sent.
    const traceFilter = q.includes('traceDuration') ? (spans: Sent[]) => traceDuration(spans) > 500_000_000n && spans.find((s) => !s.parent)!.service === 'frontend' : undefined;
    const expected = expectedSearch(sent, [...sets], combine, 20, 3, traceFilter);
    const answer = await search(q);
    expect(expected.length).toBeGreaterThan(0);
    expect(shape(answer)).toEqual(expected);
  });

  it('limit and spss as Grafana sends them: the most recent traces first, spss spans each', async () => {
    const answer = await search('{ kind = client || kind = internal }', 2, 1);
    const expected = expectedSearch(sent, [(s) => s.kind === 'client' || s.kind === 'internal'], 'or', 2, 1);
    expect(shape(answer)).toEqual(expected);
  });

  it('select() and the conditions name the attributes answered per span', async () => {
    const answer = await search('{ status = error } | select(resource.service.name, span.db.rows)');
    const byId = new Map(sent.map((s) => [s.id, s]));
    expect(answer.traces.length).toBeGreaterThan(0);
    for (const t of answer.traces) {
      for (const s of t.spanSets[0].spans) {
        const span = byId.get(s.spanID)!;
        expect(s.attributes).toEqual([
          { key: 'status', value: { stringValue: 'error' } },
          { key: 'service.name', value: { stringValue: span.service } },
          { key: 'db.rows', value: { intValue: String(span.attrs['db.rows']) } },
        ]);
      }
    }
  });

  it('the older tag search: tags (logfmt), minDuration, maxDuration', async () => {
    const res = await get('/api/search', { tags: 'service.name=pay http.response.status_code=500', minDuration: '100ms', limit: '20', ...range });
    expect(res.status).toBe(200);
    const answer = (await res.json()) as SearchAnswer;
    const expected = expectedSearch(sent, [(s) => s.service.includes('pay') && s.attrs['http.response.status_code'] === 500], 'or', 20, 3, (spans) => traceDuration(spans) >= 100_000_000n);
    expect(expected.length).toBeGreaterThan(0);
    expect(answer.traces.map((t) => t.traceID)).toEqual(expected.map((t) => t.traceID));
  });

  it('trace by id: OTLP protobuf as Grafana asks for it, and OTLP/JSON, equal to the spans sent', async () => {
    const withLink = sent.find((s) => s.span.links.length > 0)!;
    const errored = sent.find((s) => s.span.events.length > 0)!;
    for (const id of new Set([withLink.trace, errored.trace])) {
      const res = await get(`/api/v2/traces/${id}`, range, { Accept: 'application/protobuf' });
      expect(res.status).toBe(200);
      const bytes = new Uint8Array(await res.arrayBuffer());
      // TraceByIDResponse: field 1 (the Trace) first; read its length and decode the Trace as OTLP's TracesData.
      expect(bytes[0]).toBe(0x0a);
      let len = 0;
      let i = 1;
      for (let shift = 0; ; shift += 7) {
        const b = bytes[i++];
        len += (b & 0x7f) * 2 ** shift;
        if (b < 0x80) break;
      }
      const fromProto = requestClass.traces.toObject(requestClass.traces.decode(bytes.subarray(i, i + len)), { longs: String, bytes: String }) as unknown as OtlpTrace;
      const json = (await (await get(`/api/traces/${id}`)).json()) as { batches: OtlpTrace['resourceSpans'] };
      const expected = sent.filter((s) => s.trace === id).map(otlpOf).sort(byId);
      expect(flatten({ resourceSpans: fromProto.resourceSpans }, 'base64')).toEqual(expected);
      expect(flatten({ resourceSpans: json.batches }, 'hex')).toEqual(expected);
    }
    expect((await get(`/api/traces/${'f'.repeat(32)}`)).status).toBe(404);
    expect((await get('/api/traces/not-an-id')).status).toBe(400);
  });

  it('tag names by scope and tag values filtered by a span set', async () => {
    const tags = (await (await get('/api/v2/search/tags', { scope: 'all', ...range })).json()) as { scopes: { name: string; tags: string[] }[] };
    const all = new Set(tags.scopes.filter((s) => s.name !== 'intrinsic').flatMap((s) => s.tags));
    for (const key of new Set(sent.flatMap((s) => Object.keys(s.attrs)))) expect(all, key).toContain(key);
    expect(tags.scopes.find((s) => s.name === 'intrinsic')!.tags).toEqual(expect.arrayContaining(['name', 'status', 'duration', 'kind']));
    // The resource's attributes are told apart from the spans' (the traces store keeps which keys came from the resource).
    const resourceKeys = [...new Set(sent.flatMap((s) => Object.keys(s.span.resource.attributes)))].sort();
    expect(tags.scopes.find((s) => s.name === 'resource')!.tags).toEqual(resourceKeys);
    expect(tags.scopes.find((s) => s.name === 'span')!.tags.filter((t) => resourceKeys.includes(t))).toEqual([]);
    expect((await search('{ span.service.name = "cart" }')).traces).toEqual([]);

    const values = async (tag: string, q?: string) =>
      ((await (await get(`/api/v2/search/tag/${tag}/values`, { ...(q ? { q } : {}), ...range })).json()) as { tagValues: { type: string; value: string }[] }).tagValues;
    expect(await values('resource.service.name')).toEqual([...SERVICES].sort().map((value) => ({ type: 'string', value })));
    const erroring = [...new Set(sent.filter((s) => s.status === 'error').map((s) => s.service))].sort();
    expect(await values('resource.service.name', '{ status = error }')).toEqual(erroring.map((value) => ({ type: 'string', value })));
    expect((await values('status')).map((v) => v.value).sort()).toEqual([...new Set(sent.map((s) => s.status))].sort());
    const v1 = (await (await get('/api/search/tag/service.name/values', range)).json()) as { tagValues: string[] };
    expect(v1.tagValues).toEqual([...SERVICES].sort());
  });

  it('refuses what it does not support with a 400 naming it, and applies the key', async () => {
    for (const [q, naming] of [
      ['{ .a = 1 } | count() > 1', 'count()'],
      ['{ .a = 1 } >> { .b = 2 }', '>>'],
      ['{ .a = 1 } | by(resource.service.name)', 'by()'],
    ]) {
      const res = await get('/api/search', { q, ...range });
      expect(res.status).toBe(400);
      expect(await res.text()).toContain(naming);
    }
    expect((await server.request('/tempo/api/search?q={}', { headers: { 'X-API-Key': 'wrong' } })).status).toBe(401);
    expect((await server.request('/tempo/api/search?q={}', { headers: { 'X-API-Key': 'other-key' } })).status).toBe(403);
    expect((await server.request('/tempo/api/search?q={}', { headers: { Authorization: `Basic ${Buffer.from(`x:${ADMIN_KEY}`).toString('base64')}` } })).status).toBe(200);
  });

  it('deep and expensive TraceQL is refused or bounded like any statement (the door contract), and the door still answers', async () => {
    // Issue 30's contract: every language through the same sandbox and limits. Each answer is a clear 4xx/503
    // (400: checked, 408: time limit, 413: too large, 503: memory/slots) or a correct 200 — never a 500 or a hang.
    const deep = `{ ${Array.from({ length: 700 }, (_, i) => `.a${i} = ${i}`).join(' && ')} }`;
    const nested = `${'('.repeat(500)}{ .a = 1 }${')'.repeat(500)}`;
    const regex = `{ .http.route =~ "${'(a+)+'.repeat(50)}b" }`;
    const huge = `{ name = "${'x'.repeat(2_000_000)}" }`;
    for (const [label, q] of [['700 conditions', deep], ['500 nested parentheses', nested], ['a backtracking-shaped regex', regex]]) {
      const res = await get('/api/search', { q, ...range });
      const text = await res.clone().text();
      expect([200, 400, 408, 413, 503], `${label}: ${res.status} ${text}`).toContain(res.status);
      if (res.status === 200) expect(((await res.json()) as SearchAnswer).traces).toEqual([]);
    }
    const res = await server.request('/tempo/api/search', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ q: huge, ...range }).toString() });
    expect([400, 404, 405, 413, 414, 431], `2 MB query: ${res.status}`).toContain(res.status);
    expect((await search('{}', 100, 1000)).traces.length).toBeGreaterThan(0);
  });
});

// ---- OTLP comparison ------------------------------------------------------------------------------

type OtlpValue = Record<string, unknown>;
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes?: { key: string; value: OtlpValue }[];
  events?: { timeUnixNano: string; name: string; attributes?: { key: string; value: OtlpValue }[] }[];
  links?: { traceId: string; spanId: string; attributes?: { key: string; value: OtlpValue }[] }[];
  status?: { code?: number; message?: string };
}
interface OtlpTrace {
  resourceSpans: { resource?: { attributes?: { key: string; value: OtlpValue }[] }; scopeSpans: { scope?: { name?: string }; spans: OtlpSpan[] }[] }[];
}

const scalar = (v: OtlpValue): unknown => v.stringValue ?? v.boolValue ?? (v.intValue !== undefined ? Number(v.intValue) : v.doubleValue);
const kv = (attrs: { key: string; value: OtlpValue }[] | undefined) => Object.fromEntries((attrs ?? []).map((a) => [a.key, scalar(a.value)]));
const byId = (a: { spanId: string }, b: { spanId: string }) => (a.spanId < b.spanId ? -1 : 1);

/** A span as the comparison sees it, from what the SDK recorded. */
function otlpOf(s: Sent) {
  const { span } = s;
  return {
    traceId: s.trace,
    spanId: s.id,
    parentSpanId: s.parent ?? '',
    name: s.name,
    kind: span.kind + 1,
    start: String(s.start),
    end: String(s.end),
    service: s.service,
    scope: span.instrumentationScope.name,
    attributes: { ...span.resource.attributes, ...span.attributes },
    events: span.events.map((e) => ({ name: e.name, time: String(ns(e.time)), attributes: e.attributes ?? {} })),
    links: span.links.map((l) => ({ traceId: l.context.traceId, spanId: l.context.spanId, attributes: l.attributes ?? {} })),
    status: { code: span.status.code, message: span.status.message ?? '' },
  };
}

/** The answer's spans in the same form (ids hex from base64 when the answer is protobuf). */
function flatten(t: OtlpTrace, ids: 'hex' | 'base64') {
  const id = (x: string | undefined) => (x === undefined || x === '' ? '' : ids === 'hex' ? x : Buffer.from(x, 'base64').toString('hex'));
  return t.resourceSpans
    .flatMap((rs) =>
      rs.scopeSpans.flatMap((ss) =>
        ss.spans.map((sp) => ({
          traceId: id(sp.traceId),
          spanId: id(sp.spanId),
          parentSpanId: id(sp.parentSpanId),
          name: sp.name,
          kind: sp.kind,
          start: sp.startTimeUnixNano,
          end: sp.endTimeUnixNano,
          service: kv(rs.resource?.attributes)['service.name'],
          scope: ss.scope?.name,
          attributes: { ...kv(rs.resource?.attributes), ...kv(sp.attributes) },
          events: (sp.events ?? []).map((e) => ({ name: e.name, time: e.timeUnixNano, attributes: kv(e.attributes) })),
          links: (sp.links ?? []).map((l) => ({ traceId: id(l.traceId), spanId: id(l.spanId), attributes: kv(l.attributes) })),
          status: { code: sp.status?.code ?? 0, message: sp.status?.message ?? '' },
        })),
      ),
    )
    .sort(byId);
}
