import { Hono } from 'hono';
import { log } from '../../log.ts';
import { authenticate, canAccess } from '../shared/auth.ts';
import type { AppEnv, Services } from '../shared/context.ts';
import { requestBody } from '../shared/requestBody.ts';
import { registerDatasetRoutes } from './datasetRoutes.ts';
import { registerAccessRoutes } from './userRoutes.ts';
import { registerIngestRoutes } from './ingestRoutes.ts';
import { registerQueryRoutes } from './queryRoutes.ts';
import { registerOtlpRoutes } from './otlpRoutes.ts';
import { registerPrometheusRoutes } from './prometheus/prometheusRoutes.ts';
import { promqlError, registerPromqlRoutes } from './prometheus/promqlRoutes.ts';
import { registerCompatRoutes } from './compatRoutes.ts';
import { registerFilterRoutes } from './filterRoutes.ts';
import { registerConsoleRoutes } from './console/consoleRoutes.ts';
import { registerConsoleApiRoutes } from './console/consoleApiRoutes.ts';
import { registerMetricMetadataRoutes } from './prometheus/metricMetadataRoutes.ts';
import { principalOf, registerOidcRoutes } from './oidcRoutes.ts';
import { createIcebergApp, icebergError } from '../iceberg/routes.ts';
import { createEsApp } from '../es/app.ts';
import { createHecApp, registerHecHealth } from '../hec/app.ts';
import { createLokiApp } from '../loki/app.ts';
import { createTempoApp } from '../tempo/app.ts';
import { createJaegerApp } from '../jaeger/app.ts';
import { DomainError } from '../../errors.ts';
import { errorResponse } from './errors.ts';
import { matchedRoutes } from 'hono/route';
import { httpDuration, httpRequests, registry as metricsRegistry } from '../../metrics.ts';

/**
 * The labelled counter and histogram of one (route, method, status): looked up once, not hashed from a
 * label object on every request. Routes are patterns, so the set is small.
 */
const metricChildren = new Map<string, { observe: (seconds: number) => void }>();
function requestMetrics(route: string, method: string, status: number) {
  const id = `${route} ${method} ${status}`;
  let m = metricChildren.get(id);
  if (!m) {
    const count = httpRequests.labels({ route, method, status: String(status) });
    const duration = httpDuration.labels({ route, method });
    m = {
      observe: (seconds) => {
        count.inc();
        duration.observe(seconds);
      },
    };
    metricChildren.set(id, m);
  }
  return m;
}

/** Prometheus text without the samples whose `dataset` label names a dataset `keep` refuses. */
function onlyDatasets(text: string, keep: (dataset: string) => boolean): string {
  return text
    .split('\n')
    .filter((line) => {
      const m = /[{,]dataset="([^"]*)"/.exec(line);
      return !m || line.startsWith('#') || keep(m[1]);
    })
    .join('\n');
}

export function createApp(services: Services): Hono<AppEnv> {
  const app = new Hono<AppEnv>();

  // One structured log line and one metrics sample per request; keys and bodies are never logged.
  app.use('*', async (c, next) => {
    const started = performance.now();
    await next();
    const ms = performance.now() - started;
    log.info('request', { method: c.req.method, path: c.req.path, status: c.res.status, ms: Math.round(ms * 10) / 10 });
    // The route pattern, not the path: dataset names must not multiply the series.
    const handler = matchedRoutes(c).filter((r) => r.method !== 'ALL').pop();
    requestMetrics(handler?.path ?? 'unmatched', c.req.method, c.res.status).observe(ms / 1000);
  });

  // Probes (load balancers, Docker and Kubernetes health checks) send no key: liveness and
  // readiness answer without one (GET and HEAD). Readiness details (storage reachability, damaged
  // objects set aside, by key and dataset) are shown only to a request with an admin key.
  app.get('/api/v1/liveness', (c) => c.json({ status: 'ok' }));
  app.get('/api/v1/readiness', async (c) => {
    const { details, ...state } = await services.isReady();
    let admin = false;
    try {
      admin = (await authenticate(services.keys, c.req.raw.headers, requestBody(c).peer)).role === 'admin';
    } catch {
      // No key or an unknown one: the probe's answer only.
    }
    return c.json(admin ? { ...state, ...details } : state, state.ready ? 200 : 503);
  });
  // The web console's page and assets hold no data: public, before the key check.
  registerConsoleRoutes(app);
  registerHecHealth(app);
  // Single sign-on's routes hand a browser its session: before the key check.
  registerOidcRoutes(app, services);

  // The Iceberg REST catalog checks keys itself (its OAuth2 token endpoint takes none; errors in the spec's model).
  if (services.config.iceberg) app.route('/iceberg', createIcebergApp(services));
  else app.all('/iceberg/*', (c) => icebergError(c, 404, 'NoSuchTableException', 'Iceberg publishing is off (P_ICEBERG=off)'));

  // Every other endpoint needs a key (or a console session's cookie, from this origin).
  app.use('*', async (c, next) => {
    c.set('principal', await principalOf(services, c));
    await next();
  });

  // Prometheus text format; needs a key (any role), which Prometheus sends as `authorization: credentials`.
  // Per-dataset series show only the datasets the key may access (their names and volumes are data).
  app.get('/metrics', async (c) => {
    const p = c.get('principal');
    const text = await metricsRegistry.metrics();
    const body = p.role === 'admin' ? text : onlyDatasets(text, (name) => canAccess(p, name));
    return c.body(body, 200, { 'Content-Type': metricsRegistry.contentType });
  });

  registerDatasetRoutes(app, services);
  registerIngestRoutes(app, services);
  registerQueryRoutes(app, services);
  registerOtlpRoutes(app, services);
  registerPrometheusRoutes(app, services);
  registerPromqlRoutes(app, services);
  registerCompatRoutes(app, services);
  registerFilterRoutes(app, services);
  registerConsoleApiRoutes(app, services);
  registerMetricMetadataRoutes(app, services);
  registerAccessRoutes(app, services);
  // The log shippers' doors: their own routes and answers, this listener's guards and key check.
  const es = createEsApp(services);
  app.route('/es', es);
  // The clients' base URL often ends in a slash: `GET|HEAD /es/` answers as `/es` does.
  app.get('/es/', (c) => es.request('/', { method: c.req.method, headers: c.req.raw.headers }, c.env));
  app.route('/loki', createLokiApp(services));
  // The Jaeger query API (docs/traces.md): this listener's guards and key check.
  app.route('/jaeger', createJaegerApp(services));
  app.route('/services/collector', createHecApp(services));
  // Grafana's Tempo data source (docs/traces.md).
  app.route('/tempo', createTempoApp(services));

  app.notFound((c) => c.json({ error: `no route for ${c.req.method} ${c.req.path}` }, 404));
  app.onError((err, c) => {
    // The PromQL API's clients (Grafana, vmalert, promtool) read errors in Prometheus' envelope, a
    // rejected key included.
    const promql = c.req.path.startsWith('/prometheus/') ? promqlError(c, err) : undefined;
    if (promql) return promql;
    if (err instanceof DomainError) {
      const { status, headers, body } = errorResponse(err);
      for (const [k, v] of Object.entries(headers)) c.header(k, v);
      return c.json(body, status);
    }
    log.error('unhandled error', { method: c.req.method, path: c.req.path, error: err });
    return c.json({ error: 'internal server error' }, 500);
  });
  return app;
}
