/**
 * The Splunk HTTP Event Collector door, mounted at `/services/collector` under the HTTP listener (its
 * key check, connection cap and body limits apply; the key comes as `Authorization: Splunk <key>`).
 * Answers are Splunk's: `{"text":"Success","code":0}`, errors with Splunk's codes.
 */
import { Hono, type Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { z } from 'zod';
import { DomainError, tooLarge, type ErrorKind } from '../../errors.ts';
import { log } from '../../log.ts';
import { decodeEvents, decodeRaw, HEC_TIME_FIELD, HecError } from '../../ingest/hec/decode.ts';
import { ingestRights } from '../shared/auth.ts';
import type { AppEnv, Services } from '../shared/context.ts';
import { requestBody } from '../shared/requestBody.ts';

/** Where events go that name no `index` (and no X-P-Stream header or ?stream=). */
export const HEC_DEFAULT_DATASET = 'hec';

/** Status and Splunk's code per domain error kind (Splunk: 6 invalid data, 7 incorrect index, 9 busy, 8 internal). */
const STATUS: Record<ErrorKind, [ContentfulStatusCode, number]> = {
  invalid: [400, 6],
  unauthorized: [401, 3],
  forbidden: [403, 7],
  not_found: [400, 7],
  timeout: [408, 9],
  conflict: [409, 6],
  too_large: [413, 6],
  unsupported: [415, 6],
  too_many_requests: [429, 9],
  storage: [500, 8],
  unavailable: [503, 9],
  cancelled: [400, 6],
  internal: [500, 8],
};

/**
 * Indexer acknowledgement: a 200 already means the events are fsynced, so every ack id handed out is
 * true at once. Ids count per channel; only the channels' counters are kept (bounded).
 */
const channels = new Map<string, number>();
const MAX_CHANNELS = 10_000;

function nextAck(channel: string): number {
  const id = channels.get(channel) ?? 0;
  if (!channels.has(channel) && channels.size >= MAX_CHANNELS) channels.delete(channels.keys().next().value as string);
  channels.set(channel, id + 1);
  return id;
}

const channelOf = (c: Context) => c.req.header('x-splunk-request-channel') || c.req.query('channel') || undefined;
const datasetOf = (c: Context) => c.req.header('x-p-stream') || c.req.query('stream') || HEC_DEFAULT_DATASET;

async function ingest(c: Context<AppEnv>, services: Services, raw: boolean) {
  const received = new Date().toISOString();
  const results = await services.ingest.ingestGroups({
    headers: c.req.raw.headers,
    ...requestBody(c),
    rights: ingestRights(c.get('principal')),
    decode: (body) => {
      if (raw) {
        const meta = { host: c.req.query('host'), source: c.req.query('source'), sourcetype: c.req.query('sourcetype') };
        return [{ dataset: c.req.query('index') || datasetOf(c), events: decodeRaw(body, meta, received), time: HEC_TIME_FIELD }];
      }
      const groups = decodeEvents(body, { dataset: datasetOf(c), receivedIso: received });
      return [...groups].map(([dataset, events]) => ({ dataset, events, time: HEC_TIME_FIELD }));
    },
  });
  const failed = results.find((r) => 'error' in r);
  if (failed && 'error' in failed) throw failed.error;
  const channel = channelOf(c);
  return c.json(channel ? { text: 'Success', code: 0, ackId: nextAck(channel) } : { text: 'Success', code: 0 });
}

const AckRequest = z.object({ acks: z.array(z.number().int().nonnegative()) });
/** An ack request lists ids: anything larger than this is not one. */
const MAX_ACK_BODY = 64 * 1024;

/** A small JSON body (an ack request), read up to MAX_ACK_BODY; undefined when it is not JSON. */
async function smallJson(c: Context): Promise<unknown> {
  const { body } = requestBody(c);
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of body instanceof Uint8Array ? [body] : body) {
    size += chunk.byteLength;
    if (size > MAX_ACK_BODY) throw tooLarge(`an ack request is larger than ${MAX_ACK_BODY} bytes`);
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    return undefined;
  }
}

/** The `/services/collector` sub-app. */
export function createHecApp(services: Services): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  for (const p of ['/', '/event', '/event/1.0']) app.post(p, (c) => ingest(c, services, false));
  for (const p of ['/raw', '/raw/1.0']) app.post(p, (c) => ingest(c, services, true));
  app.post('/ack', async (c) => {
    const parsed = AckRequest.safeParse(await smallJson(c));
    if (!parsed.success) throw new HecError(6, 'Invalid data format');
    return c.json({ acks: Object.fromEntries(parsed.data.acks.map((id) => [String(id), true])) });
  });
  app.onError((err, c) => {
    if (err instanceof DomainError) {
      const [status, code] = STATUS[err.kind];
      const body: Record<string, unknown> = { text: err.message, code: err instanceof HecError ? err.code : code };
      if (err instanceof HecError && err.invalidEventNumber !== undefined) body['invalid-event-number'] = err.invalidEventNumber;
      if (err.retryAfterSec !== undefined) c.header('Retry-After', String(Math.max(1, Math.ceil(err.retryAfterSec))));
      return c.json(body, status);
    }
    log.error('unhandled error', { method: c.req.method, path: c.req.path, error: err });
    return c.json({ text: 'Internal server error', code: 8 }, 500);
  });
  return app;
}

/** `GET /services/collector/health`: answered without a key, as Splunk does (load balancers probe it). */
export function registerHecHealth(app: Hono<AppEnv>): void {
  for (const p of ['/services/collector/health', '/services/collector/health/1.0']) app.get(p, (c) => c.json({ text: 'HEC is healthy', code: 17 }));
}
