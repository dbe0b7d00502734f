import type { Hono } from 'hono';
import { decodeRemoteWrite, remoteWriteResponseHeaders } from '../ingest/prometheus/index.ts';
import { authorize } from './auth.ts';
import { readBody } from './body.ts';
import type { AppEnv, Services } from './context.ts';
import { streamName } from './ingestRoutes.ts';
import { checkLogSource, stampReceiveTime, targetDataset } from './otlpRoutes.ts';

export function registerPrometheusRoutes(app: Hono<AppEnv>, { registry, config }: Services): void {
  app.post('/v1/prometheus/write', async (c) => {
    checkLogSource(c, 'otel-metrics');
    const name = streamName(c);
    const principal = c.get('principal');
    authorize(principal, 'ingest', name);
    const raw = await readBody(c, config.maxBodyBytes);
    const decoded = decodeRemoteWrite(raw, c.req.header('content-type'), c.req.header('content-encoding'), config.maxDecompressedBytes);
    await targetDataset(registry, principal, name, 'otel-metrics');
    const count = await registry.ingest(name, stampReceiveTime(decoded), raw.length);
    for (const [k, v] of Object.entries(remoteWriteResponseHeaders(decoded))) c.header(k, v);
    // Remote write senders treat any 2xx as stored; the body is for people (JSON like every endpoint).
    return c.json({ message: 'ingested', count, samples: decoded.samples, histograms: decoded.histograms, exemplars: decoded.exemplars });
  });
}
