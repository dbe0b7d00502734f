import type { Hono } from 'hono';
import type { AppEnv, Services } from '../../shared/context.ts';
import { knownDataset, requires } from '../middleware.ts';

/**
 * `GET /api/v1/logstream/{name}/metric-metadata[?metric=family]`: the remote-write metric metadata the
 * dataset remembers (docs/console.md "Metric metadata"), in the shape of the `data` of Prometheus'
 * `/api/v1/metadata`: family name → `[{type, help, unit}]`.
 */
export function registerMetricMetadataRoutes(app: Hono<AppEnv>, { storage }: Services): void {
  app.get('/api/v1/logstream/:name/metric-metadata', requires('read', 'name'), knownDataset(storage), async (c) => {
    const families = await storage.metricMetadataOf(c.req.param('name'));
    const only = c.req.query('metric');
    // fromEntries defines own properties: a family named `__proto__` is a key like any other.
    return c.json(Object.fromEntries([...families].filter(([name]) => only === undefined || only === name).map(([name, f]) => [name, [f]])));
  });
}
