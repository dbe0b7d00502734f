import type { Hono } from 'hono';
import { rememberRequestMetadata } from '../../../ingest/metricMetadata.ts';
import { remoteWriteResponseHeaders } from '../../../ingest/prometheus/index.ts';
import { ingestRights } from '../../shared/auth.ts';
import { ingestSource } from '../body.ts';
import type { AppEnv, Services } from '../../shared/context.ts';
import { requires } from '../middleware.ts';
import { streamName } from '../streams.ts';

export function registerPrometheusRoutes(app: Hono<AppEnv>, { ingest, storage }: Services): void {
  app.post('/v1/prometheus/write', requires('ingest'), async (c) => {
    const { dataset, count, info } = await ingest.ingest({
      format: { kind: 'prometheus', contentType: c.req.header('content-type') },
      dataset: streamName(c),
      headers: c.req.raw.headers,
      ...ingestSource(c),
      rights: ingestRights(c.get('principal')),
    });
    // Metadata-only requests (how Prometheus sends it) are acknowledged once the metadata is durable.
    await rememberRequestMetadata(storage, dataset, count, info);
    for (const [k, v] of Object.entries(remoteWriteResponseHeaders(info))) c.header(k, v);
    // Remote write senders treat any 2xx as stored; the body is for people (JSON like every endpoint).
    return c.json({ message: 'ingested', count, samples: info.samples, histograms: info.histograms, exemplars: info.exemplars });
  });
}
