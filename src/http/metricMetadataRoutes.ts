import type { Hono } from 'hono';
import type { AppEnv, Services } from './context.ts';
import { knownDataset, requires } from './middleware.ts';

/**
 * `GET /api/v1/logstream/{name}/metric-metadata[?metric=family]`: the remote-write metric metadata the
 * dataset remembers (docs/console.md "Metric metadata"), in the shape of the `data` of Prometheus'
 * `/api/v1/metadata`: family name → `[{type, help, unit}]`.
 */
export function registerMetricMetadataRoutes(app: Hono<AppEnv>, { storage }: Services): void {
  app.get('/api/v1/logstream/:name/metric-metadata', requires('read', 'name'), knownDataset(storage), async (c) => {
    const families = await storage.metricMetadataOf(c.req.param('name'));
    const only = c.req.query('metric');
    const out: Record<string, { type: string; help: string; unit: string }[]> = {};
    for (const [name, f] of families) if (only === undefined || only === name) out[name] = [f];
    return c.json(out);
  });
}
