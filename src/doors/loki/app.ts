/**
 * The Loki push door, mounted at `/loki` under the HTTP listener (its key check, connection cap and body
 * limits apply): `POST /loki/api/v1/push` stores a push whole or not at all into one dataset.
 */
import { plainTextError } from '../shared/httpStatus.ts';
import { Hono, type Context } from 'hono';
import { decodePush, LOKI_TIME_FIELD } from '../../ingest/loki/decode.ts';
import { ingestRights } from '../shared/auth.ts';
import type { AppEnv, Services } from '../shared/context.ts';
import { requestBody } from '../shared/requestBody.ts';

/** Where a push goes when it names no dataset (X-P-Stream header or ?stream=). */
export const LOKI_DEFAULT_DATASET = 'loki';
/** The Loki version `buildinfo` reports (the push API of Loki 3). */
export const LOKI_VERSION = '3.4.0';


async function push(c: Context<AppEnv>, services: Services) {
  const dataset = c.req.header('x-p-stream') || c.req.query('stream') || LOKI_DEFAULT_DATASET;
  const maxBytes = services.config.ingest.maxDecompressedBytes;
  const [result] = await services.ingest.ingestGroups({
    headers: c.req.raw.headers,
    ...requestBody(c),
    rights: ingestRights(c.get('principal')),
    decode: (body) => {
      const events = decodePush(body, c.req.header('content-type'), maxBytes);
      return events.length ? [{ dataset, events, time: LOKI_TIME_FIELD }] : [];
    },
  });
  if (result && 'error' in result) throw result.error;
  return c.body(null, 204);
}

/** The `/loki` sub-app. */
export function createLokiApp(services: Services): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.post('/api/v1/push', (c) => push(c, services));
  app.get('/api/v1/status/buildinfo', (c) => c.json({ version: LOKI_VERSION, revision: 'lakehouse', branch: 'lakehouse', buildUser: '', buildDate: '', goVersion: '' }));
  app.get('/ready', (c) => c.text('ready\n'));
  app.onError(plainTextError);
  return app;
}
