import type { Context, Hono } from 'hono';
import { ingestRights } from '../shared/auth.ts';
import { ingestSource } from './body.ts';
import type { AppEnv, Services } from '../shared/context.ts';
import { requires } from './middleware.ts';
import { streamName } from './streams.ts';

export function registerIngestRoutes(app: Hono<AppEnv>, { ingest }: Services): void {
  const ingestJson = async (c: Context<AppEnv>, dataset: string | undefined, existingOnly: boolean) => {
    const { count } = await ingest.ingest({
      format: { kind: 'json', existingOnly },
      dataset,
      headers: c.req.raw.headers,
      ...ingestSource(c),
      rights: ingestRights(c.get('principal')),
    });
    return c.json({ message: 'ingested', count });
  };

  app.post('/api/v1/logstream/:name', requires('ingest', 'name'), (c) => ingestJson(c, c.req.param('name'), true));
  app.post('/api/v1/ingest', requires('ingest'), (c) => ingestJson(c, streamName(c), false));
}
