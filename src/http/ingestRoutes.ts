import type { Context, Hono } from 'hono';
import type { IngestPool } from '../ingest/ingestPool.ts';
import { stampFromRequest } from '../ingest/jsonEvents.ts';
import { decodeJob, type IngestInfo, type IngestJob } from '../ingest/pipeline.ts';
import type { DatasetRegistry } from '../storage/datasets.ts';
import { ingestedBytes, ingestedRows } from '../metrics.ts';
import { authorize } from './auth.ts';
import { readBody } from './body.ts';
import type { AppEnv, Services } from './context.ts';
import { TIME_COLUMN } from '../model.ts';
import { invalidInput, notFound } from '../errors.ts';

/** Dataset named by `X-P-Stream`, else by the `stream` query parameter (for clients without custom headers). */
export function streamName(c: Context): string {
  const name = c.req.header('x-p-stream') ?? c.req.query('stream');
  if (!name) throw invalidInput('missing dataset: send the X-P-Stream header (or the ?stream= query parameter)');
  return name;
}

/**
 * Decodes a body in an ingest worker and stores it. `prepare` runs between decoding and storing: it
 * finds or creates the dataset, so a body that cannot be decoded never creates one. The worker's
 * lines are stored as they are, unless some values must become text first (a number sent to a
 * VARCHAR column): then the rows are rebuilt here, where they can be rewritten.
 */
export async function decodeAndStore(
  pool: IngestPool,
  registry: DatasetRegistry,
  name: string,
  job: IngestJob,
  prepare: () => Promise<void>,
): Promise<{ count: number; info: IngestInfo }> {
  const serialized = await pool.serialize(job);
  await prepare();
  const count =
    (await registry.ingestSerialized(name, serialized.lines, serialized.rows, serialized.types, job.body.byteLength)) ??
    (await registry.ingest(name, decodeJob(job).batch, job.body.byteLength));
  ingestedRows.inc({ dataset: name }, count);
  ingestedBytes.inc({ dataset: name }, job.body.byteLength);
  return { count, info: serialized.info };
}

export function registerIngestRoutes(app: Hono<AppEnv>, { registry, config, ingestPool }: Services): void {
  const ingestJson = async (c: Context<AppEnv>, name: string, createIfMissing: boolean) => {
    authorize(c.get('principal'), 'ingest', name);
    if (!createIfMissing && !(await registry.resolve(name))) return c.json({ error: `dataset "${name}" does not exist` }, 404);
    const body = await readBody(c, config.maxBodyBytes);
    const job: IngestJob = {
      kind: 'json',
      body,
      contentEncoding: c.req.header('content-encoding'),
      maxDecompressedBytes: config.maxDecompressedBytes,
      stamp: stampFromRequest(c.req.raw.headers),
      maxDepth: config.maxNesting,
    };
    const { count } = await decodeAndStore(ingestPool, registry, name, job, async () => {
      let meta = registry.find(name);
      if (!meta) {
        if (!createIfMissing) throw notFound(`dataset "${name}" does not exist`);
        authorize(c.get('principal'), 'create', name);
        meta = (await registry.create(name, 'json', TIME_COLUMN.json)).meta;
      }
      if (meta.kind !== 'json') throw invalidInput(`dataset "${name}" holds ${meta.kind} data; send JSON events to a JSON dataset`);
    });
    return c.json({ message: 'ingested', count });
  };

  app.post('/api/v1/logstream/:name', (c) => ingestJson(c, c.req.param('name'), false));
  app.post('/api/v1/ingest', (c) => ingestJson(c, streamName(c), true));
}
