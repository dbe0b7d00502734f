import * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs';

export type Signal = 'logs' | 'traces' | 'metrics';

export const GRPC_SERVICE: Record<Signal, string> = {
  logs: 'opentelemetry.proto.collector.logs.v1.LogsService',
  traces: 'opentelemetry.proto.collector.trace.v1.TraceService',
  metrics: 'opentelemetry.proto.collector.metrics.v1.MetricsService',
};

const raw = (b: Buffer) => b;
const method = (path: string) => ({ path, requestStream: false, responseStream: false, requestSerialize: raw, requestDeserialize: raw, responseSerialize: raw, responseDeserialize: raw });

/** A bare gRPC client that sends and receives message bytes as they travel (so a test can send garbage). */
const RawClient = grpc.makeGenericClientConstructor(
  {
    logs: method(`/${GRPC_SERVICE.logs}/Export`),
    traces: method(`/${GRPC_SERVICE.traces}/Export`),
    metrics: method(`/${GRPC_SERVICE.metrics}/Export`),
    health: method('/grpc.health.v1.Health/Check'),
  },
  'RawOtlp',
);

export interface RawAnswer {
  code: number;
  details: string;
  response?: Buffer;
  /** The retry delay of a google.rpc.RetryInfo in the status details, in seconds. */
  retryDelaySec?: number;
}

export class RawOtlpClient {
  private readonly client: grpc.Client;

  constructor(target: string, options: grpc.ChannelOptions = {}) {
    this.client = new RawClient(target, grpc.credentials.createInsecure(), { 'grpc.max_send_message_length': 64 * 1024 * 1024, ...options });
  }

  /** One unary call; `headers` become metadata; resolves with the status (never rejects on a gRPC error). */
  call(rpc: Signal | 'health', body: Buffer, headers: Record<string, string> = {}, deadlineMs = 30_000, gzip = false): Promise<RawAnswer> {
    const metadata = new grpc.Metadata();
    for (const [k, v] of Object.entries(headers)) metadata.set(k, v);
    if (gzip) metadata.set('grpc-internal-encoding-request', 'gzip');
    return new Promise((resolve) => {
      const fn = (this.client as unknown as Record<string, (b: Buffer, m: grpc.Metadata, o: grpc.CallOptions, cb: grpc.requestCallback<Buffer>) => void>)[rpc];
      fn.call(this.client, body, metadata, { deadline: Date.now() + deadlineMs }, (err, response) => {
        if (!err) return resolve({ code: grpc.status.OK, details: '', response: response ?? Buffer.alloc(0) });
        const details = err.metadata?.get('grpc-status-details-bin')[0];
        resolve({ code: err.code, details: err.details, retryDelaySec: details instanceof Buffer ? retryDelayOf(details) : undefined });
      });
    });
  }

  close(): void {
    this.client.close();
  }
}

const rpcRoot = protobuf.Root.fromJSON({
  nested: {
    Any: { fields: { type_url: { type: 'string', id: 1 }, value: { type: 'bytes', id: 2 } } },
    Duration: { fields: { seconds: { type: 'int64', id: 1 }, nanos: { type: 'int32', id: 2 } } },
    Status: { fields: { code: { type: 'int32', id: 1 }, message: { type: 'string', id: 2 }, details: { rule: 'repeated', type: 'Any', id: 3 } } },
    RetryInfo: { fields: { retry_delay: { type: 'Duration', id: 1 } } },
  },
});

function retryDelayOf(statusBytes: Buffer): number | undefined {
  const status = rpcRoot.lookupType('Status').toObject(rpcRoot.lookupType('Status').decode(statusBytes), { longs: Number }) as { details?: { type_url: string; value: Uint8Array }[] };
  const info = status.details?.find((d) => d.type_url === 'type.googleapis.com/google.rpc.RetryInfo');
  if (!info) return undefined;
  const decoded = rpcRoot.lookupType('RetryInfo').toObject(rpcRoot.lookupType('RetryInfo').decode(info.value), { longs: Number }) as { retry_delay?: { seconds?: number } };
  return decoded.retry_delay?.seconds ?? 0;
}
