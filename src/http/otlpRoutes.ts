import type { Context, Hono } from 'hono';
import { encodeOtlpResponse, otlpFormat, type OtlpSignal } from '../ingest/otlp/index.ts';
import type { IngestJob } from '../ingest/pipeline.ts';
import type { DatasetKind, DatasetRegistry } from '../storage/datasets.ts';
import { authorize, type Principal } from './auth.ts';
import { readBody } from './body.ts';
import type { AppEnv, Services } from './context.ts';
import { TIME_COLUMN } from '../model.ts';
import { decodeAndStore, requestLimits, streamName } from './ingestRoutes.ts';
import { invalidInput } from '../errors.ts';

const KIND: Record<OtlpSignal, DatasetKind> = { logs: 'otel-logs', traces: 'otel-traces', metrics: 'otel-metrics' };

/**
 * `X-P-Log-Source` may be omitted (the path names the kind, and some clients cannot send custom
 * headers); when present it must agree with the path.
 */
export function checkLogSource(c: Context, kind: DatasetKind): void {
  const source = c.req.header('x-p-log-source');
  if (source !== undefined && source !== kind) {
    throw invalidInput(`X-P-Log-Source "${source}" does not match this endpoint, which takes ${kind}`);
  }
}

/** Finds or creates the dataset; a dataset keeps the one telemetry kind it was created with. */
export async function targetDataset(registry: DatasetRegistry, principal: Principal, name: string, kind: DatasetKind): Promise<void> {
  let meta = registry.find(name);
  if (!meta) {
    authorize(principal, 'create', name);
    meta = (await registry.create(name, kind, TIME_COLUMN[kind])).meta;
  }
  if (meta.kind !== kind) throw invalidInput(`dataset "${name}" holds ${meta.kind} data, not ${kind}`);
}

export function registerOtlpRoutes(app: Hono<AppEnv>, { registry, config, ingestPool }: Services): void {
  const otlp = (signal: OtlpSignal) => async (c: Context<AppEnv>) => {
    const kind = KIND[signal];
    checkLogSource(c, kind);
    const name = streamName(c);
    const principal = c.get('principal');
    authorize(principal, 'ingest', name);
    const format = otlpFormat(c.req.header('content-type'));
    const raw = await readBody(c, config.maxBodyBytes);
    const job: IngestJob = {
      kind: 'otlp',
      body: raw,
      contentEncoding: c.req.header('content-encoding'),
      maxDecompressedBytes: config.maxDecompressedBytes,
      limits: requestLimits(config),
      signal,
      format,
      received: new Date().toISOString(),
    };
    const { info } = await decodeAndStore(ingestPool, registry, config, name, job, () => targetDataset(registry, principal, name, kind));
    const res = encodeOtlpResponse(signal, format, info.rejected ?? 0, info.rejectionMessage);
    return c.body(typeof res.body === 'string' ? res.body : new Uint8Array(res.body), 200, { 'Content-Type': res.contentType });
  };
  app.post('/v1/logs', otlp('logs'));
  app.post('/v1/traces', otlp('traces'));
  app.post('/v1/metrics', otlp('metrics'));
}
