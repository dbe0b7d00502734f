import type { Context, Hono } from 'hono';
import { decodeBody, decodeOtlp, encodeOtlpResponse, otlpFormat, type OtlpSignal } from '../ingest/otlp/index.ts';
import type { RowBatch } from '../ingest/types.ts';
import type { DatasetKind, DatasetRegistry } from '../storage/datasets.ts';
import { authorize, type Principal } from './auth.ts';
import { readBody } from './body.ts';
import type { AppEnv, Services } from './context.ts';
import { TIME_COLUMN } from './datasetRoutes.ts';
import { badRequest } from './errors.ts';
import { streamName } from './ingestRoutes.ts';

const KIND: Record<OtlpSignal, DatasetKind> = { logs: 'otel-logs', traces: 'otel-traces', metrics: 'otel-metrics' };

/**
 * `X-P-Log-Source` may be omitted (the path names the kind, and some clients cannot send custom
 * headers); when present it must agree with the path.
 */
export function checkLogSource(c: Context, kind: DatasetKind): void {
  const source = c.req.header('x-p-log-source');
  if (source !== undefined && source !== kind) {
    throw badRequest(`X-P-Log-Source "${source}" does not match this endpoint, which takes ${kind}`);
  }
}

/** Finds or creates the dataset; a dataset keeps the one telemetry kind it was created with. */
export async function targetDataset(registry: DatasetRegistry, principal: Principal, name: string, kind: DatasetKind): Promise<void> {
  let meta = registry.find(name);
  if (!meta) {
    authorize(principal, 'create', name);
    meta = (await registry.create(name, kind, TIME_COLUMN[kind])).meta;
  }
  if (meta.kind !== kind) throw badRequest(`dataset "${name}" holds ${meta.kind} data, not ${kind}`);
}

/** Every row also gets `p_timestamp`, the receive time, as JSON events do. */
export function stampReceiveTime<T extends RowBatch>(batch: T): T {
  const now = new Date().toISOString();
  for (const row of batch.rows) row.p_timestamp = now;
  batch.knownTypes = { ...batch.knownTypes, p_timestamp: 'TIMESTAMP' };
  return batch;
}

export function registerOtlpRoutes(app: Hono<AppEnv>, { registry, config }: Services): void {
  const otlp = (signal: OtlpSignal) => async (c: Context<AppEnv>) => {
    const kind = KIND[signal];
    checkLogSource(c, kind);
    const name = streamName(c);
    const principal = c.get('principal');
    authorize(principal, 'ingest', name);
    const format = otlpFormat(c.req.header('content-type'));
    const raw = await readBody(c, config.maxBodyBytes);
    const decoded = decodeOtlp(signal, format, decodeBody(raw, c.req.header('content-encoding'), config.maxDecompressedBytes));
    await targetDataset(registry, principal, name, kind);
    await registry.ingest(name, stampReceiveTime(decoded), raw.length);
    const res = encodeOtlpResponse(signal, format, decoded.rejected, decoded.rejectionMessage);
    return c.body(typeof res.body === 'string' ? res.body : new Uint8Array(res.body), 200, { 'Content-Type': res.contentType });
  };
  app.post('/v1/logs', otlp('logs'));
  app.post('/v1/traces', otlp('traces'));
  app.post('/v1/metrics', otlp('metrics'));
}
