import type { Context, Hono } from 'hono';
import { encodeOtlpResponse, otlpFormat, type OtlpSignal } from '../ingest/otlp/index.ts';
import type { IngestJob } from '../ingest/pipeline.ts';
import type { DatasetKind } from '../model.ts';
import { authorize } from './auth.ts';
import { withIngestBody } from './body.ts';
import type { AppEnv, Services } from './context.ts';
import { checkLogSource, streamName } from './streams.ts';

const KIND: Record<OtlpSignal, DatasetKind> = { logs: 'otel-logs', traces: 'otel-traces', metrics: 'otel-metrics' };

export function registerOtlpRoutes(app: Hono<AppEnv>, { config, ingest }: Services): void {
  const otlp = (signal: OtlpSignal) => async (c: Context<AppEnv>) => {
    const kind = KIND[signal];
    checkLogSource(c, kind);
    const name = streamName(c);
    const principal = c.get('principal');
    authorize(principal, 'ingest', name);
    const format = otlpFormat(c.req.header('content-type'));
    return withIngestBody(c, ingest, config, async (base, lease) => {
      const job: IngestJob = {
        ...base,
        kind: 'otlp',
        signal,
        format,
        received: new Date().toISOString(),
      };
      const { info } = await ingest.store({ name, kind, create: true, authorizeCreate: () => authorize(principal, 'create', name) }, job, lease);
      const res = encodeOtlpResponse(signal, format, info.rejected ?? 0, info.rejectionMessage);
      return c.body(typeof res.body === 'string' ? res.body : new Uint8Array(res.body), 200, { 'Content-Type': res.contentType });
    });
  };
  app.post('/v1/logs', otlp('logs'));
  app.post('/v1/traces', otlp('traces'));
  app.post('/v1/metrics', otlp('metrics'));
}
