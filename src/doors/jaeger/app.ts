/**
 * The Jaeger query API, mounted at `/jaeger` under the HTTP listener (its guards and key check apply):
 * `/api/*` as Jaeger UI and Grafana's Jaeger data source call it, and `/api/v3/*` (HTTP JSON). Everything
 * is read through the trace query service (src/query/traces/), over one traces dataset.
 */
import { Hono, type Context } from 'hono';
import { DomainError, invalidInput, isDomainError } from '../../errors.ts';
import { log } from '../../log.ts';
import * as traces from '../../query/traces/store.ts';
import { otlpTracesData } from '../../query/traces/otlp.ts';
import { normalTraceId } from '../../query/traces/sql.ts';
import { canAccess } from '../shared/auth.ts';
import type { AppEnv, Services } from '../shared/context.ts';
import { STATUS } from '../shared/httpStatus.ts';
import { jaegerTrace } from './model.ts';
import { parseGoDuration, parseSearch, parseSpanKind } from './params.ts';

type C = Context<AppEnv>;

/** Jaeger's envelope of every `/api/*` answer. */
const envelope = (data: unknown, total = Array.isArray(data) ? data.length : 0) => ({ data, total, limit: 0, offset: 0, errors: null });

/** The trace reader of a request: its dataset (`?dataset=`, `X-P-Stream`, or the default) and its caller. */
function reader(c: C, services: Services): traces.TraceReader {
  const p = c.get('principal');
  const dataset = c.req.query('dataset') || c.req.header('x-p-stream') || services.config.traces.defaultDataset;
  return { queries: services.queries, dataset, principalId: p.id, canRead: (n) => canAccess(p, n), signal: c.req.raw.signal };
}

/** Service and operation lists cover the lookback before now; a dataset not yet created has none. */
const recent = (services: Services): traces.TimeWindow => ({ startMs: Date.now() - services.config.traces.lookbackMs, endMs: Date.now() + 60_000 });
async function orEmpty<T>(run: () => Promise<T[]>): Promise<T[]> {
  try {
    return await run();
  } catch (err) {
    if (isDomainError(err) && err.kind === 'not_found') return [];
    throw err;
  }
}

/** Trace by id: `start`/`end` (µs) when given, else the lookback before now. */
function traceWindow(c: C, services: Services, unit: 'us' | 'rfc3339'): traces.TimeWindow {
  const [startText, endText] = unit === 'us' ? [c.req.query('start'), c.req.query('end')] : [c.req.query('start_time'), c.req.query('end_time')];
  const ms = (t: string | undefined) => {
    if (!t) return undefined;
    const v = unit === 'us' ? (/^\d+$/.test(t) ? Number(t) / 1000 : NaN) : Date.parse(t);
    if (!Number.isFinite(v)) throw invalidInput(`malformed time: ${t.slice(0, 40)}`);
    return v;
  };
  const endMs = ms(endText) ?? Date.now() + 60_000;
  return { startMs: Math.floor(ms(startText) ?? endMs - services.config.traces.lookbackMs), endMs: Math.floor(endMs) + 1 };
}

function traceIdParam(c: C, name: string): string {
  const raw = c.req.param(name) ?? '';
  const id = normalTraceId(raw);
  if (id === undefined) throw invalidInput(`cannot parse traceID param: ${raw.slice(0, 64)}`);
  return id;
}

async function getTrace(c: C, services: Services) {
  const id = traceIdParam(c, 'id');
  const spans = await orEmpty(() => traces.traceById(reader(c, services), id, traceWindow(c, services, 'us')));
  if (!spans.length) return c.json({ data: null, total: 0, limit: 0, offset: 0, errors: [{ code: 404, msg: 'trace not found' }] }, 404);
  return c.json(envelope([jaegerTrace(spans)]));
}

async function findTraces(c: C, services: Services) {
  const r = reader(c, services);
  const ids = c.req.queries('traceID') ?? [];
  if (ids.length) {
    const found = await orEmpty(async () => [...(await traces.tracesById(r, ids, traceWindow(c, services, 'us'))).values()]);
    return c.json(envelope(found.map(jaegerTrace)));
  }
  const { window, search } = parseSearch((n) => c.req.query(n), (n) => c.req.queries(n) ?? [], services.config.traces.lookbackMs);
  const found = await orEmpty(async () => {
    const hits = await traces.searchTraceIds(r, window, search);
    // The whole of each trace, not only its matching spans (its other spans may start before `start`).
    const byId = await traces.tracesById(r, hits, { startMs: window.startMs - services.config.traces.lookbackMs, endMs: window.endMs + services.config.traces.lookbackMs });
    return hits.map((id) => byId.get(id)).filter((spans) => spans !== undefined);
  });
  return c.json(envelope(found.map(jaegerTrace)));
}

async function dependencies(c: C, services: Services) {
  const num = (name: string, fallback: number) => {
    const t = c.req.query(name);
    if (!t) return fallback;
    if (!/^\d+$/.test(t)) throw invalidInput(`unable to parse param '${name}': ${t.slice(0, 40)}`);
    return Number(t);
  };
  const endMs = num('endTs', Date.now());
  const lookbackMs = num('lookback', 86_400_000);
  const deps = await orEmpty(() => traces.dependencies(reader(c, services), { startMs: endMs - lookbackMs, endMs: endMs + 1 }));
  return c.json(envelope(deps.map((d) => ({ parent: d.parent, child: d.child, callCount: d.call_count }))));
}

/** Jaeger's `/api/v3` error: its grpc-gateway shape. */
const v3Error = (c: C, status: 400 | 404, message: string) => c.json({ error: { httpCode: status, message } }, status);

async function v3FindTraces(c: C, services: Services) {
  const service = c.req.query('query.service_name') ?? '';
  const minText = c.req.query('query.start_time_min');
  const maxText = c.req.query('query.start_time_max');
  if (!minText || !maxText) return v3Error(c, 400, 'query.start_time_min and query.start_time_max are required');
  const [startMs, endMs] = [Date.parse(minText), Date.parse(maxText)];
  if (!Number.isFinite(startMs) || !Number.isFinite(endMs)) return v3Error(c, 400, 'malformed parameter query.start_time_min or query.start_time_max');
  const duration = (name: string) => {
    const t = c.req.query(name);
    const ns = t ? parseGoDuration(t) : undefined;
    if (t && ns === undefined) throw invalidInput(`malformed parameter ${name}: time: invalid duration "${t.slice(0, 40)}"`);
    return ns || undefined;
  };
  const limit = Number(c.req.query('query.num_traces') || 100) || 100;
  const search = { service: service || undefined, operation: c.req.query('query.operation_name') || undefined, minDurationNs: duration('query.duration_min'), maxDurationNs: duration('query.duration_max'), limit };
  const r = reader(c, services);
  const spans = await orEmpty(async () => {
    const hits = await traces.searchTraceIds(r, { startMs, endMs: endMs + 1 }, search);
    const byId = await traces.tracesById(r, hits, { startMs: startMs - services.config.traces.lookbackMs, endMs: endMs + services.config.traces.lookbackMs });
    return hits.flatMap((id) => byId.get(id) ?? []);
  });
  if (!spans.length) return v3Error(c, 404, 'No traces found');
  return c.json({ result: otlpTracesData(spans) });
}

function registerV3(app: Hono<AppEnv>, services: Services) {
  app.get('/api/v3/services', async (c) => c.json({ services: await orEmpty(() => traces.services(reader(c, services), recent(services))) }));
  app.get('/api/v3/operations', async (c) => {
    const ops = await orEmpty(() => traces.operations(reader(c, services), recent(services), c.req.query('service') ?? '', parseSpanKind(c.req.query('span_kind'))));
    return c.json({ operations: ops.map((o) => ({ name: o.name, spanKind: o.kind === 'unspecified' ? '' : o.kind })) });
  });
  app.get('/api/v3/traces/:id', async (c) => {
    const id = normalTraceId(c.req.param('id'));
    if (id === undefined) return v3Error(c, 400, `malformed parameter trace_id: ${c.req.param('id').slice(0, 64)}`);
    const spans = await orEmpty(() => traces.traceById(reader(c, services), id, traceWindow(c, services, 'rfc3339')));
    if (!spans.length) return v3Error(c, 404, 'trace not found');
    return c.json({ result: otlpTracesData(spans) });
  });
  app.get('/api/v3/traces', (c) => v3FindTraces(c, services));
}

/** The `/jaeger` sub-app. */
export function createJaegerApp(services: Services): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  registerV3(app, services);
  app.get('/api/services', async (c) => c.json(envelope(await orEmpty(() => traces.services(reader(c, services), recent(services))))));
  app.get('/api/services/:service/operations', async (c) => {
    const ops = await orEmpty(() => traces.operations(reader(c, services), recent(services), c.req.param('service')));
    return c.json(envelope([...new Set(ops.map((o) => o.name))]));
  });
  app.get('/api/operations', async (c) => {
    const service = c.req.query('service') ?? '';
    if (!service) throw invalidInput("parameter 'service' is required");
    const ops = await orEmpty(() => traces.operations(reader(c, services), recent(services), service, parseSpanKind(c.req.query('spanKind'))));
    return c.json(envelope(ops.map((o) => ({ name: o.name, spanKind: o.kind === 'unspecified' ? '' : o.kind }))));
  });
  app.get('/api/traces', (c) => findTraces(c, services));
  app.get('/api/traces/:id', (c) => getTrace(c, services));
  app.get('/api/dependencies', (c) => dependencies(c, services));
  app.onError((err, c) => {
    if (!(err instanceof DomainError)) log.error('unhandled error', { method: c.req.method, path: c.req.path, error: err });
    const status = err instanceof DomainError ? STATUS[err.kind] : 500;
    if (err instanceof DomainError && err.retryAfterSec !== undefined) c.header('Retry-After', String(Math.max(1, Math.ceil(err.retryAfterSec))));
    const msg = err instanceof DomainError ? err.message : 'internal server error';
    if (c.req.path.includes('/api/v3/')) return c.json({ error: { httpCode: status, message: msg } }, status);
    return c.json({ data: null, total: 0, limit: 0, offset: 0, errors: [{ code: status, msg }] }, status);
  });
  return app;
}
