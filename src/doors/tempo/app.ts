/**
 * The Tempo HTTP API (docs/traces.md "Tempo"), mounted at `/tempo` under the HTTP listener (its guards
 * and key check apply), so Grafana's Tempo data source pointed at `{base}/tempo` works: echo, buildinfo,
 * traces by id (OTLP/JSON, or protobuf when asked), search (TraceQL and the older tag search), tag names
 * and values. Every read goes through the SQL executor under the caller's key.
 */
import { Hono, type Context } from 'hono';
import { invalidInput, notFound } from '../../errors.ts';
import { otlpTracesData } from '../../query/traces/otlp.ts';
import { normalTraceId as storedTraceId } from '../../query/traces/sql.ts';
import { traceById as storedTrace } from '../../query/traces/store.ts';
import type { AppEnv, Services } from '../shared/context.ts';
import { plainTextError } from '../shared/httpStatus.ts';
import { traceByIdResponseProto, tracesDataProto } from './otlp.ts';
import { params, rangeParams, tempoRequest, timeRange } from './request.ts';
import { search } from './search.ts';
import { tagNames, tagNamesV2, tagValues } from './tags.ts';

/** The Tempo version buildinfo reports: the API this door follows. */
export const TEMPO_VERSION = '2.8.0';

/** A trace id as stored (the traces store's rule: a shorter id is left-padded, as Tempo does), or Tempo's 400. */
export function normalTraceId(id: string): string {
  const normal = storedTraceId(id);
  if (normal === undefined) throw invalidInput(`invalid trace id "${id.slice(0, 64)}": expected up to 32 hex digits`);
  return normal;
}

const wantsProtobuf = (c: Context<AppEnv>) => /application\/(x-)?protobuf/i.test(c.req.header('accept') ?? '');

async function traceById(c: Context<AppEnv>, services: Services, v2: boolean) {
  const p = params(c, rangeParams);
  const id = normalTraceId(c.req.param('id') ?? '');
  // Tempo 2.9's span filter on a trace (q=) is not served: answering the whole trace would be a wrong answer.
  if (v2 && p.q !== undefined && !['', '{}', '{ }', '{ true }', '{true}'].includes(p.q.trim())) throw invalidInput('q= (a span filter on a trace by id) is not supported');
  const req = await tempoRequest(c, services);
  // Without start/end the traces store's look-back (P_TRACES_LOOKBACK) bounds the files read.
  const window = timeRange(p, services.config.traces.lookbackMs);
  const spans = await storedTrace({ queries: services.queries, dataset: req.dataset, principalId: req.principalId, canRead: req.canRead, signal: req.signal }, id, window);
  if (spans.length === 0) throw notFound(`trace ${id} not found`);
  const data = otlpTracesData(spans);
  if (wantsProtobuf(c)) {
    const bytes = tracesDataProto(data);
    return c.body(Buffer.from(v2 ? traceByIdResponseProto(bytes) : bytes), 200, { 'Content-Type': 'application/protobuf' });
  }
  // v1 answers Tempo's Trace (`batches`, its older name of resourceSpans); v2 a TraceByIDResponse.
  return c.json(v2 ? { trace: data, status: 'COMPLETE' } : { batches: data.resourceSpans });
}

/** The `/tempo` sub-app. */
export function createTempoApp(services: Services): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.get('/api/echo', (c) => c.text('echo'));
  app.get('/api/status/buildinfo', (c) => c.json({ version: TEMPO_VERSION, revision: 'lakehouse', branch: 'lakehouse', buildUser: '', buildDate: '', goVersion: '' }));
  app.get('/api/traces/:id', (c) => traceById(c, services, false));
  app.get('/api/v2/traces/:id', (c) => traceById(c, services, true));
  app.get('/api/search', (c) => search(c, services));
  app.get('/api/search/tags', (c) => tagNames(c, services));
  app.get('/api/v2/search/tags', (c) => tagNamesV2(c, services));
  app.get('/api/search/tag/:tag/values', (c) => tagValues(c, services, false));
  app.get('/api/v2/search/tag/:tag/values', (c) => tagValues(c, services, true));
  // Tempo answers errors as plain text; Grafana shows the text.
  app.onError(plainTextError);
  return app;
}
