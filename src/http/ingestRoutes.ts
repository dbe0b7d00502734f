import type { IncomingMessage } from 'node:http';
import type { Context, Hono } from 'hono';
import type { Config } from '../config.ts';
import type { IngestPool } from '../ingest/ingestPool.ts';
import { stampFromRequest } from '../ingest/jsonEvents.ts';
import type { RequestLimits } from '../ingest/limits.ts';
import type { IngestInfo, IngestJob } from '../ingest/pipeline.ts';
import type { DatasetRegistry } from '../storage/datasets.ts';
import { emptySchema } from '../storage/schema.ts';
import { authorize } from './auth.ts';
import { readBody } from './body.ts';
import type { AppEnv, Services } from './context.ts';
import { TIME_COLUMN } from '../model.ts';
import { invalidInput, notFound, unavailable } from '../errors.ts';
import { ingestedBytes, ingestedRows } from '../metrics.ts';

/** Dataset named by `X-P-Stream`, else by the `stream` query parameter (for clients without custom headers). */
export function streamName(c: Context): string {
  const name = c.req.header('x-p-stream') ?? c.req.query('stream');
  if (!name) throw invalidInput('missing dataset: send the X-P-Stream header (or the ?stream= query parameter)');
  return name;
}

/** The per-request work limits of a job (README "Limits"). */
export const requestLimits = (config: Config): RequestLimits => ({
  maxEvents: config.maxEventsPerRequest,
  maxValues: config.maxValuesPerRequest,
  maxNames: Math.max(1000, 4 * config.maxColumns),
});

/** How often a batch is placed again because the schema changed under it before giving up (503). */
const MAX_PLACEMENTS = 4;

/**
 * Decodes a body in an ingest worker and stores it. The worker places every value against the
 * dataset's schema as it is now (a conflicting value goes to a typed or overflow column there, so the
 * event loop never decodes or rewrites a body); `prepare` runs between decoding and storing: it finds
 * or creates the dataset, so a body that cannot be decoded never creates one. If another request
 * changed the schema in between so that the batch no longer fits, the worker places it again against
 * the new schema.
 */
export async function decodeAndStore(
  pool: IngestPool,
  registry: DatasetRegistry,
  config: Config,
  name: string,
  job: IngestJob,
  prepare: () => Promise<void>,
): Promise<{ count: number; info: IngestInfo }> {
  const maxColumns = config.maxColumns;
  let serialized = await pool.serialize(job, { schema: registry.find(name) ? registry.schemaOf(name).schema : emptySchema(), maxColumns });
  await prepare();
  for (let placements = 1; ; placements++) {
    const stored = await registry.ingestSerialized(name, serialized, job.body.byteLength);
    if ('count' in stored) {
      ingestedRows.inc({ dataset: name }, stored.count);
      ingestedBytes.inc({ dataset: name }, job.body.byteLength);
      return { count: stored.count, info: serialized.info };
    }
    if (placements >= MAX_PLACEMENTS) throw unavailable(`the schema of dataset "${name}" kept changing while this request was stored (${stored.conflict}); retry`, 1);
    serialized = await pool.serialize(job, { schema: stored.schema, maxColumns });
  }
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
      limits: requestLimits(config),
      stamp: stampFromRequest(c.req.raw.headers, (c.env as { incoming?: IncomingMessage } | undefined)?.incoming?.socket.remoteAddress),
      maxDepth: config.maxNesting,
    };
    const { count } = await decodeAndStore(ingestPool, registry, config, name, job, async () => {
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
