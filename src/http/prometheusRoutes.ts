import type { Hono } from 'hono';
import { rememberRequestMetadata } from '../ingest/metricMetadata.ts';
import type { IngestJob } from '../ingest/pipeline.ts';
import { remoteWriteResponseHeaders } from '../ingest/prometheus/index.ts';
import { authorize } from './auth.ts';
import { withIngestBody } from './body.ts';
import type { AppEnv, Services } from './context.ts';
import { checkLogSource, streamName } from './streams.ts';

export function registerPrometheusRoutes(app: Hono<AppEnv>, { config, ingest, storage }: Services): void {
  app.post('/v1/prometheus/write', async (c) => {
    checkLogSource(c, 'otel-metrics');
    const name = streamName(c);
    const principal = c.get('principal');
    authorize(principal, 'ingest', name);
    return withIngestBody(c, ingest, config, async (base, lease) => {
      const job: IngestJob = {
        ...base,
        kind: 'prometheus',
        contentType: c.req.header('content-type'),
        received: new Date().toISOString(),
      };
      const { count, info } = await ingest.store({ name, kind: 'otel-metrics', create: true, authorizeCreate: () => authorize(principal, 'create', name) }, job, lease);
      await rememberRequestMetadata(storage, name, count, info);
      for (const [k, v] of Object.entries(remoteWriteResponseHeaders(info))) c.header(k, v);
      // Remote write senders treat any 2xx as stored; the body is for people (JSON like every endpoint).
      return c.json({ message: 'ingested', count, samples: info.samples, histograms: info.histograms, exemplars: info.exemplars });
    });
  });
}
