import type { Context, Hono } from 'hono';
import { decodeBody, decodeOtlp, encodeOtlpResponse, otlpFormat, type OtlpSignal } from '../ingest/otlp/index.ts';
import { decodeRemoteWrite, remoteWriteResponseHeaders } from '../ingest/prometheus/index.ts';
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
function checkLogSource(c: Context, kind: DatasetKind): void {
  const source = c.req.header('x-p-log-source');
  if (source !== undefined && source !== kind) {
    throw badRequest(`X-P-Log-Source "${source}" does not match this endpoint, which takes ${kind}`);
  }
}

/** Finds or creates the dataset; a dataset keeps the one telemetry kind it was created with. */
async function targetDataset(registry: DatasetRegistry, principal: Principal, name: string, kind: DatasetKind): Promise<void> {
  let meta = registry.find(name);
  if (!meta) {
    authorize(principal, 'create', name);
    meta = (await registry.create(name, kind, TIME_COLUMN[kind])).meta;
  }
  if (meta.kind !== kind) throw badRequest(`dataset "${name}" holds ${meta.kind} data, not ${kind}`);
}

/**
 * Prometheus samples are stored as OTel metric data points (the interface sends them with
 * `X-P-Log-Source: otel-metrics`), so one dataset can hold both: the sample time becomes
 * `time_unix_nano` and the value `data_point_value`.
 */
export function promToOtelColumns(batch: RowBatch): RowBatch {
  const rename: Record<string, string> = { timestamp: 'time_unix_nano', value: 'data_point_value' };
  const knownTypes: RowBatch['knownTypes'] = {};
  for (const [k, t] of Object.entries(batch.knownTypes)) knownTypes[rename[k] ?? k] = k === 'timestamp' ? 'TIMESTAMP_NS' : t;
  for (const row of batch.rows) {
    for (const [from, to] of Object.entries(rename)) {
      if (from in row) {
        row[to] = row[from];
        delete row[from];
      }
    }
  }
  return { rows: batch.rows, knownTypes };
}

export function registerTelemetryRoutes(app: Hono<AppEnv>, { registry, config }: Services): void {
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
    await registry.ingest(name, decoded, raw.length);
    const res = encodeOtlpResponse(signal, format, decoded.rejected, decoded.rejectionMessage);
    return c.body(typeof res.body === 'string' ? res.body : new Uint8Array(res.body), 200, { 'Content-Type': res.contentType });
  };
  app.post('/v1/logs', otlp('logs'));
  app.post('/v1/traces', otlp('traces'));
  app.post('/v1/metrics', otlp('metrics'));

  app.post('/v1/prometheus/write', async (c) => {
    checkLogSource(c, 'otel-metrics');
    const name = streamName(c);
    const principal = c.get('principal');
    authorize(principal, 'ingest', name);
    const raw = await readBody(c, config.maxBodyBytes);
    const decoded = decodeRemoteWrite(raw, c.req.header('content-type'), c.req.header('content-encoding'), config.maxDecompressedBytes);
    await targetDataset(registry, principal, name, 'otel-metrics');
    const count = await registry.ingest(name, promToOtelColumns(decoded), raw.length);
    for (const [k, v] of Object.entries(remoteWriteResponseHeaders(decoded))) c.header(k, v);
    // Remote write senders treat any 2xx as stored; the body is for people (JSON like every endpoint).
    return c.json({ message: 'ingested', count, samples: decoded.samples, histograms: decoded.histograms, exemplars: decoded.exemplars });
  });
}
