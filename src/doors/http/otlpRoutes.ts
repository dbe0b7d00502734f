import type { Context, Hono } from 'hono';
import { encodeOtlpResponse, otlpFormat, type OtlpSignal } from '../../ingest/otlp/index.ts';
import { ingestRights } from '../shared/auth.ts';
import { ingestSource } from './body.ts';
import type { AppEnv, Services } from '../shared/context.ts';
import { requires } from './middleware.ts';
import { streamName } from './streams.ts';

export function registerOtlpRoutes(app: Hono<AppEnv>, { ingest }: Services): void {
  const otlp = (signal: OtlpSignal) => async (c: Context<AppEnv>) => {
    const format = otlpFormat(c.req.header('content-type'));
    const { info } = await ingest.ingest({
      format: { kind: 'otlp', signal, format },
      dataset: streamName(c),
      headers: c.req.raw.headers,
      ...ingestSource(c),
      rights: ingestRights(c.get('principal')),
    });
    const res = encodeOtlpResponse(signal, format, info.rejected ?? 0, info.rejectionMessage);
    return c.body(typeof res.body === 'string' ? res.body : new Uint8Array(res.body), 200, { 'Content-Type': res.contentType });
  };
  app.post('/v1/logs', requires('ingest'), otlp('logs'));
  app.post('/v1/traces', requires('ingest'), otlp('traces'));
  app.post('/v1/metrics', requires('ingest'), otlp('metrics'));
}
