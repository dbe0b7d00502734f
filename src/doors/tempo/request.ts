/**
 * What every Tempo API call needs: the traces dataset it reads (`?dataset=`, `X-P-Stream`, else
 * P_TRACES_DEFAULT_DATASET), checked against the caller's key, its schema as TraceQL sees it, the time range
 * (Tempo's `start`/`end` in Unix seconds) and the caller's identity for the SQL executor.
 */
import type { Context } from 'hono';
import { z } from 'zod';
import { invalidInput, notFound } from '../../errors.ts';
import type { TraceSchema } from '../../query/traceql/conditions.ts';
import { authorize, canAccess } from '../shared/auth.ts';
import type { AppEnv, Services } from '../shared/context.ts';

/** Without `start`/`end` a search looks this far back (Tempo then searches its recent data only). */
export const SEARCH_DEFAULT_LOOKBACK_MS = 3_600_000;
/** The column the traces store lists a span's resource attribute keys in (when the dataset has it). */
const RESOURCE_KEYS_COLUMN = 'resource_attribute_keys';

export interface TempoRequest {
  dataset: string;
  schema: TraceSchema;
  principalId: string;
  canRead: (dataset: string) => boolean;
  signal: AbortSignal;
}

/** The dataset, authorised for reading, with its schema; 404 when it does not exist, 400 when it holds no traces. */
export async function tempoRequest(c: Context<AppEnv>, services: Services): Promise<TempoRequest> {
  const p = c.get('principal');
  const name = c.req.query('dataset') || c.req.header('x-p-stream') || services.config.traces.defaultDataset;
  authorize(p, 'read', name);
  const meta = await services.storage.resolve(name);
  if (meta === undefined) throw notFound(`dataset "${name}" not found (send OTLP traces to it first, or name another with ?dataset=)`);
  if (meta.kind !== 'otel-traces') throw invalidInput(`dataset "${name}" holds ${meta.kind}, not OTLP traces`);
  const columns = services.storage.schemaOf(meta.name).schema;
  const keys = columns[RESOURCE_KEYS_COLUMN];
  const schema: TraceSchema = { columns, ...(keys === 'VARCHAR' || keys === 'VARCHAR[]' ? { resourceKeys: RESOURCE_KEYS_COLUMN } : {}) };
  return { dataset: meta.name, schema, principalId: p.id, canRead: (n) => canAccess(p, n), signal: c.req.raw.signal };
}

const seconds = z.coerce.number().finite().nonnegative();
const count = (max: number) => z.coerce.number().int().positive().max(max);

/** Tempo's query parameters, checked. */
export const searchParams = z.object({
  q: z.string().optional(),
  tags: z.string().optional(),
  minDuration: z.string().optional(),
  maxDuration: z.string().optional(),
  limit: count(10_000).default(20),
  spss: count(1_000).default(3),
  start: seconds.optional(),
  end: seconds.optional(),
});

export const rangeParams = z.object({ start: seconds.optional(), end: seconds.optional(), limit: count(100_000).optional(), q: z.string().optional(), scope: z.string().optional() });

/** Parses query parameters with a schema; a bad one is a 400 naming it. */
export function params<T extends z.ZodType>(c: Context<AppEnv>, schema: T): z.infer<T> {
  const parsed = schema.safeParse(c.req.query());
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw invalidInput(`invalid parameter ${issue.path.join('.')}: ${issue.message}`);
  }
  return parsed.data;
}

/**
 * `start`/`end` (Unix seconds) as a millisecond range; `end` is inclusive of its whole second. Absent,
 * the range is the last `lookbackMs` (or everything when that is undefined).
 */
export function timeRange(p: { start?: number; end?: number }, lookbackMs?: number, now = Date.now()): { startMs: number; endMs: number } {
  const endMs = p.end !== undefined ? p.end * 1000 + 999 : now + 60_000;
  const startMs = p.start !== undefined ? p.start * 1000 : lookbackMs !== undefined ? now - lookbackMs : 0;
  if (startMs > endMs) throw invalidInput('start is after end');
  return { startMs, endMs };
}
