import type { IncomingMessage } from 'node:http';
import type { Context, Hono } from 'hono';
import { stampFromRequest } from '../ingest/jsonEvents.ts';
import type { IngestJob } from '../ingest/pipeline.ts';
import { authorize } from './auth.ts';
import { withIngestBody } from './body.ts';
import type { AppEnv, Services } from './context.ts';
import { streamName } from './streams.ts';

export function registerIngestRoutes(app: Hono<AppEnv>, { storage, config, ingest }: Services): void {
  const ingestJson = async (c: Context<AppEnv>, name: string, createIfMissing: boolean) => {
    authorize(c.get('principal'), 'ingest', name);
    if (!createIfMissing && !(await storage.resolve(name))) return c.json({ error: `dataset "${name}" does not exist` }, 404);
    const principal = c.get('principal');
    return withIngestBody(c, ingest, config, async (base, lease) => {
      const job: IngestJob = {
        ...base,
        kind: 'json',
        stamp: stampFromRequest(c.req.raw.headers, (c.env as { incoming?: IncomingMessage } | undefined)?.incoming?.socket.remoteAddress),
        maxDepth: config.maxNesting,
      };
      const { count } = await ingest.store({ name, kind: 'json', create: createIfMissing, authorizeCreate: () => authorize(principal, 'create', name) }, job, lease);
      return c.json({ message: 'ingested', count });
    });
  };

  app.post('/api/v1/logstream/:name', (c) => ingestJson(c, c.req.param('name'), false));
  app.post('/api/v1/ingest', (c) => ingestJson(c, streamName(c), true));
}
