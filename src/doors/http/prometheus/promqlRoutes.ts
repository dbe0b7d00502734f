import type { Context, Hono } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { DomainError, notFound } from '../../../errors.ts';
import type { PromqlRequest } from '../../../query/promql/executor.ts';
import { otlpMetadataSql } from '../../../query/promql/otlp.ts';
import { authorize, canAccess } from '../../shared/auth.ts';
import { readBody } from '../body.ts';
import type { AppEnv, Services } from '../../shared/context.ts';
import { STATUS } from '../errors.ts';
import { checkRange, MAX_TIME_MS, MIN_TIME_MS, parseDurationParam, parseTime, PromqlParamError } from './promqlParams.ts';

/**
 * The Prometheus HTTP query API over a metrics dataset, for Grafana's Prometheus data source, promtool,
 * vmalert and Parseable's Grafana plugin (docs/promql.md). Two spellings: `/prometheus/api/v1/…` with
 * the dataset in `X-P-Stream` or `?stream=`, and `/prometheus/{dataset}/api/v1/…` for tools that take
 * only a base URL. Answers and errors use Prometheus' JSON envelope; a key reads only the datasets it
 * may read, with the same roles and scopes as the rest of the API.
 */

/** Prometheus' error types → status (web/api/v1 returnAPIError). */
const ERROR_STATUS: Record<string, ContentfulStatusCode> = {
  bad_data: 400,
  execution: 422,
  timeout: 503,
  canceled: 503,
  internal: 500,
  unavailable: 503,
  not_found: 404,
};

interface MetricMeta {
  type: string;
  help: string;
  unit: string;
}

/** The version Grafana reads to pick the Prometheus features it uses: the engine's (module v0.316 = Prometheus 3.16). */
const BUILD_INFO = { version: '3.16.0', revision: 'lakehouse', branch: 'lakehouse', buildUser: 'lakehouse', buildDate: '', goVersion: 'go1.26' };

function envelopeOf(err: DomainError): { status: ContentfulStatusCode; errorType: string } {
  switch (err.kind) {
    case 'invalid':
      return { status: 400, errorType: 'bad_data' };
    // Prometheus answers a query past its time limit with 503 and errorType timeout.
    case 'timeout':
      return { status: 503, errorType: 'timeout' };
    case 'not_found':
      return { status: 404, errorType: 'not_found' };
    case 'unavailable':
    case 'too_many_requests':
      return { status: STATUS[err.kind], errorType: 'unavailable' };
    case 'storage':
      return { status: 500, errorType: 'internal' };
    default:
      return { status: STATUS[err.kind], errorType: err.kind };
  }
}

function errorBody(c: Context, status: ContentfulStatusCode, errorType: string, message: string, headers: Record<string, string> = {}) {
  for (const [k, v] of Object.entries(headers)) c.header(k, v);
  return c.json({ status: 'error', errorType, error: message }, status);
}

/**
 * A failure in Prometheus' envelope (`{status, errorType, error}`), for the routes and for what fails
 * before them (a missing or unknown key, in the app's key check); undefined for an unexpected error.
 */
export function promqlError(c: Context, err: unknown): Response | undefined {
  if (err instanceof PromqlParamError) return errorBody(c, 400, 'bad_data', err.message);
  if (!(err instanceof DomainError)) return undefined;
  const { status, errorType } = envelopeOf(err);
  const headers: Record<string, string> = {};
  if (err.retryAfterSec !== undefined) headers['Retry-After'] = String(Math.max(1, Math.ceil(err.retryAfterSec)));
  if (err.kind === 'unauthorized') headers['WWW-Authenticate'] = 'Bearer';
  return errorBody(c, status, errorType, err.message, headers);
}

/** Every parameter of the request: the URL's, then a form-encoded body's (as Go's r.Form merges them). */
async function formOf(c: Context, maxBytes: number): Promise<URLSearchParams> {
  const params = new URLSearchParams(new URL(c.req.url).search);
  if (c.req.method === 'POST' && /^application\/x-www-form-urlencoded/i.test(c.req.header('content-type') ?? '')) {
    const body = await readBody(c, maxBytes);
    for (const [k, v] of new URLSearchParams(body.toString('utf8'))) params.append(k, v);
  }
  return params;
}

const optional = (v: string | null) => (v === null ? undefined : v);

function limitOf(form: URLSearchParams): number | undefined {
  const v = form.get('limit');
  if (v === null || v === '') return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new PromqlParamError(`invalid parameter "limit": cannot parse "${v}" to a valid limit`);
  return n || undefined;
}

/**
 * Metric metadata (type, help, unit): what remote write sent as metadata on its own (the families the
 * dataset remembers: a real Prometheus sends it in requests of its own), then, for names it has not,
 * the rows that carry it (remote write's metadata riding with samples, OTLP with every point).
 */
async function metricMetadata({ queries, storage }: Pick<Services, 'queries' | 'storage'>, c: Context<AppEnv>, dataset: string, form: URLSearchParams): Promise<Response> {
  const limit = limitOf(form);
  const metric = form.get('metric') ?? undefined;
  const meta = await storage.resolve(dataset);
  if (!meta) throw notFound(`dataset "${dataset}" does not exist`);
  const merged = new Map<string, MetricMeta>();
  for (const [name, f] of await storage.metricMetadataOf(meta.name)) if (metric === undefined || name === metric) merged.set(name, { type: f.type, help: f.help, unit: f.unit });
  for (const [name, f] of await rowMetadata({ queries, storage }, c, meta.name, metric)) if (!merged.has(name)) merged.set(name, f);
  const names = [...merged.keys()].sort().slice(0, limit ?? Infinity);
  // fromEntries defines own properties: a family named `__proto__` is a key like any other.
  return c.json({ status: 'success', data: Object.fromEntries(names.map((n) => [n, [merged.get(n)!]])) });
}

/** Metadata from the rows that carry it, read over the last day so that the call does not scan all history. */
async function rowMetadata({ queries, storage }: Pick<Services, 'queries' | 'storage'>, c: Context<AppEnv>, dataset: string, metric: string | undefined): Promise<Map<string, MetricMeta>> {
  const out = new Map<string, MetricMeta>();
  const now = Date.now();
  const principal = c.get('principal');
  // Only the metadata columns the dataset has (each appears with the first row that carries it).
  const { schema } = storage.schemaOf(dataset);
  const col = (name: string) => (schema[name] ? `any_value(${name})` : 'NULL');
  if (!schema.metric_name || (!schema.metric_type && !schema.metric_description)) return out;
  // OTLP metrics under their Prometheus names and types (docs/promql.md, OTLP metrics as Prometheus series).
  const table = `"${dataset.replaceAll('"', '""')}"`;
  const otlp = otlpMetadataSql(table, schema);
  const sql =
    `SELECT metric_name, ${col('metric_type')} AS type, ${col('metric_description')} AS help, ${col('metric_unit')} AS unit FROM ${otlp ? `(${otlp})` : table}` +
    ` WHERE metric_name IS NOT NULL AND (${schema.metric_type ? 'metric_type IS NOT NULL' : 'false'} OR ${schema.metric_description ? 'metric_description IS NOT NULL' : 'false'})` +
    `${metric ? ` AND metric_name = '${metric.replaceAll("'", "''")}'` : ''} GROUP BY metric_name ORDER BY metric_name`;
  try {
    const answer = await queries.execute({
      sql,
      startMs: now - 86_400_000,
      endMs: now + 60_000,
      sendNull: true,
      timeFormat: 'iso',
      streaming: false,
      principalId: principal.id,
      canRead: (n) => canAccess(principal, n),
      signal: c.req.raw.signal,
    });
    const parts: string[] = [];
    for await (const chunk of answer.chunks) parts.push(chunk);
    const rows = JSON.parse(`[${parts.join(',')}]`) as { metric_name: string; type: string | null; help: string | null; unit: string | null }[];
    for (const r of rows) out.set(r.metric_name, { type: r.type ?? 'unknown', help: r.help ?? '', unit: r.unit ?? '' });
  } catch (err) {
    // A dataset without metadata columns (nothing sent metadata yet) has no metadata.
    if (!(err instanceof DomainError && err.kind === 'invalid')) throw err;
  }
  return out;
}

export function registerPromqlRoutes(app: Hono<AppEnv>, { promql, queries, config, storage }: Services): void {
  type Handler = (c: Context<AppEnv>, dataset: string, form: URLSearchParams) => Promise<Response>;

  /** Resolves the dataset, checks the key, parses the form, and renders every failure in Prometheus' envelope. */
  const wrap = (handler: Handler) => async (c: Context<AppEnv>) => {
    try {
      const dataset = c.req.param('dataset') ?? c.req.header('x-p-stream') ?? c.req.query('stream');
      if (!dataset) throw new PromqlParamError('missing dataset: send the X-P-Stream header, the ?stream= parameter, or use /prometheus/{dataset}/api/v1/…');
      authorize(c.get('principal'), 'read', dataset);
      return await handler(c, dataset, await formOf(c, config.server.maxBodyBytes));
    } catch (err) {
      const answer = promqlError(c, err);
      if (answer) return answer;
      throw err;
    }
  };

  /** Runs a request in a query worker and answers with the engine's JSON (its error envelope's status by type). */
  const evaluate = async (c: Context<AppEnv>, dataset: string, request: PromqlRequest) => {
    const json = await promql.run({ dataset, request, principalId: c.get('principal').id, signal: c.req.raw.signal });
    let status: ContentfulStatusCode = 200;
    if (json.startsWith('{"status":"error"')) {
      const { errorType } = JSON.parse(json) as { errorType: string };
      status = ERROR_STATUS[errorType] ?? 500;
    }
    return c.body(json, status, { 'Content-Type': 'application/json' });
  };

  const lookback = (form: URLSearchParams) => {
    const v = form.get('lookback_delta');
    return v ? parseDurationParam(v, 'lookback_delta') : undefined;
  };

  const query: Handler = async (c, dataset, form) => {
    const q = form.get('query');
    if (!q) throw new PromqlParamError('invalid parameter "query": missing');
    return evaluate(c, dataset, { op: 'query', query: q, time: parseTime(optional(form.get('time')), 'time', Date.now()), lookbackMs: lookback(form) });
  };

  const queryRange: Handler = async (c, dataset, form) => {
    const q = form.get('query');
    if (!q) throw new PromqlParamError('invalid parameter "query": missing');
    const start = parseTime(optional(form.get('start')), 'start');
    const end = parseTime(optional(form.get('end')), 'end');
    const step = parseDurationParam(optional(form.get('step')), 'step');
    checkRange(start, end, step);
    return evaluate(c, dataset, { op: 'query_range', query: q, start, end, step, lookbackMs: lookback(form) });
  };

  const meta = (op: 'series' | 'labels' | 'label_values'): Handler => async (c, dataset, form) => {
    const start = parseTime(optional(form.get('start')), 'start', MIN_TIME_MS);
    const end = parseTime(optional(form.get('end')), 'end', MAX_TIME_MS);
    if (end < start) throw new PromqlParamError('invalid parameter "end": end timestamp must not be before start time');
    const match = form.getAll('match[]');
    const name = op === 'label_values' ? decodeURIComponent(c.req.param('name') ?? '') : undefined;
    return evaluate(c, dataset, { op, start, end, match, name, limit: limitOf(form) });
  };

  const metadata: Handler = (c, dataset, form) => metricMetadata({ queries, storage }, c, dataset, form);

  for (const prefix of ['/prometheus/api/v1', '/prometheus/:dataset/api/v1']) {
    app.on(['GET', 'POST'], `${prefix}/query`, wrap(query));
    app.on(['GET', 'POST'], `${prefix}/query_range`, wrap(queryRange));
    app.on(['GET', 'POST'], `${prefix}/series`, wrap(meta('series')));
    app.on(['GET', 'POST'], `${prefix}/labels`, wrap(meta('labels')));
    app.get(`${prefix}/label/:name/values`, wrap(meta('label_values')));
    app.get(`${prefix}/metadata`, wrap(metadata));
    app.on(['GET', 'POST'], `${prefix}/query_exemplars`, wrap(async (c) => c.json({ status: 'success', data: [] })));
    app.get(`${prefix}/status/buildinfo`, wrap(async (c) => c.json({ status: 'success', data: BUILD_INFO })));
  }
}
