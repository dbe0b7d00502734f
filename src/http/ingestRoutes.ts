import type { Context, Hono } from 'hono';
import { decodeBody } from '../ingest/compression.ts';
import { jsonEventsToBatch } from '../ingest/jsonEvents.ts';
import { authorize } from './auth.ts';
import { parseJson, readBody } from './body.ts';
import type { AppEnv, Services } from './context.ts';
import { TIME_COLUMN } from './datasetRoutes.ts';
import { badRequest } from './errors.ts';

/** Dataset named by `X-P-Stream`, else by the `stream` query parameter (for clients without custom headers). */
export function streamName(c: Context): string {
  const name = c.req.header('x-p-stream') ?? c.req.query('stream');
  if (!name) throw badRequest('missing dataset: send the X-P-Stream header (or the ?stream= query parameter)');
  return name;
}

export function registerIngestRoutes(app: Hono<AppEnv>, { registry, config }: Services): void {
  const ingestJson = async (c: Context<AppEnv>, name: string, createIfMissing: boolean) => {
    authorize(c.get('principal'), 'ingest', name);
    const body = await readBody(c, config.maxBodyBytes);
    // Parse and validate everything before touching the dataset: a rejected request stores nothing.
    const json = parseJson(decodeBody(body, c.req.header('content-encoding'), config.maxDecompressedBytes));
    const batch = jsonEventsToBatch(json, c.req.raw.headers, config.maxNesting);
    let meta = registry.find(name);
    if (!meta) {
      if (!createIfMissing) return c.json({ error: `dataset "${name}" does not exist` }, 404);
      authorize(c.get('principal'), 'create', name);
      meta = (await registry.create(name, 'json', TIME_COLUMN.json)).meta;
    }
    if (meta.kind !== 'json') throw badRequest(`dataset "${name}" holds ${meta.kind} data; send JSON events to a JSON dataset`);
    const count = await registry.ingest(name, batch, body.length);
    return c.json({ message: 'ingested', count });
  };

  app.post('/api/v1/logstream/:name', (c) => ingestJson(c, c.req.param('name'), false));
  app.post('/api/v1/ingest', (c) => ingestJson(c, streamName(c), true));
}
