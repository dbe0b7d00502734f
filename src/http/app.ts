import { Hono } from 'hono';
import { log } from '../log.ts';
import { authenticate } from './auth.ts';
import type { AppEnv, Services } from './context.ts';
import { registerDatasetRoutes } from './datasetRoutes.ts';
import { registerIngestRoutes } from './ingestRoutes.ts';
import { registerQueryRoutes } from './queryRoutes.ts';
import { registerOtlpRoutes } from './otlpRoutes.ts';
import { registerPrometheusRoutes } from './prometheusRoutes.ts';
import { registerConsoleRoutes } from './consoleRoutes.ts';
import { DomainError } from '../errors.ts';
import { errorResponse } from './errors.ts';

export function createApp(services: Services): Hono<AppEnv> {
  const app = new Hono<AppEnv>();

  // One structured log line per request; keys and bodies are never logged.
  app.use('*', async (c, next) => {
    const started = performance.now();
    await next();
    log.info('request', {
      method: c.req.method,
      path: c.req.path,
      status: c.res.status,
      ms: Math.round((performance.now() - started) * 10) / 10,
    });
  });

  app.get('/api/v1/liveness', (c) => c.json({ status: 'ok' }));
  // The web console's page and assets hold no data: public, before the key check.
  registerConsoleRoutes(app);

  // Every other endpoint needs a key.
  app.use('*', async (c, next) => {
    c.set('principal', authenticate(services.keys, c.req.raw.headers));
    await next();
  });

  app.get('/api/v1/readiness', async (c) => {
    const state = await services.isReady();
    return c.json(state, state.ready ? 200 : 503);
  });

  registerDatasetRoutes(app, services);
  registerIngestRoutes(app, services);
  registerQueryRoutes(app, services);
  registerOtlpRoutes(app, services);
  registerPrometheusRoutes(app, services);

  app.notFound((c) => c.json({ error: `no route for ${c.req.method} ${c.req.path}` }, 404));
  app.onError((err, c) => {
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
