/**
 * The OTLP/gRPC front door: LogsService, TraceService and MetricsService `Export`, and
 * grpc.health.v1.Health, served by @grpc/grpc-js on P_OTLP_GRPC_ADDR. Each export goes through the same
 * ingest service as OTLP/HTTP protobuf: the message's bytes are handed over undecoded (the service
 * definitions below deserialize to the raw Buffer), so decoding happens in the ingest worker threads,
 * inside the same in-flight budget and per-request limits; an OK answer means every record is in the WAL.
 */
import * as net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import protobuf from 'protobufjs';
import type { Config } from '../../config.ts';
import { DomainError, listenError } from '../../errors.ts';
import { encodeOtlpResponse, type OtlpSignal } from '../../ingest/otlp/index.ts';
import type { Ingest, IngestService } from '../../ingest/service.ts';
import { log } from '../../log.ts';
import { grpcDuration, grpcRequests } from '../../metrics.ts';
import { ingestRights, type ApiKeys } from '../shared/auth.ts';
import type { Connection, ConnectionBudget } from '../shared/connections.ts';
import { KeySlots } from '../shared/slots.ts';
import { admissionInterceptor, headersOf, type AdmittedExport } from './admission.ts';
import { GRPC_STATUS } from './errors.ts';

const SERVICE: Record<OtlpSignal, string> = {
  logs: 'opentelemetry.proto.collector.logs.v1.LogsService',
  traces: 'opentelemetry.proto.collector.trace.v1.TraceService',
  metrics: 'opentelemetry.proto.collector.metrics.v1.MetricsService',
};

const raw = (b: Buffer) => b;

/** One unary `Export` whose request and response are bytes as they travel (decoded in the ingest worker). */
function exportDefinition(signal: OtlpSignal): grpc.ServiceDefinition {
  return {
    Export: {
      path: `/${SERVICE[signal]}/Export`,
      requestStream: false,
      responseStream: false,
      requestSerialize: raw,
      requestDeserialize: raw,
      responseSerialize: raw,
      responseDeserialize: raw,
    },
  };
}

/** google.rpc.Status carrying a google.rpc.RetryInfo, the trailer (grpc-status-details-bin) clients read a retry delay from. */
const rpc = protobuf.Root.fromJSON({
  nested: {
    google: {
      nested: {
        protobuf: {
          nested: {
            Any: { fields: { type_url: { type: 'string', id: 1 }, value: { type: 'bytes', id: 2 } } },
            Duration: { fields: { seconds: { type: 'int64', id: 1 }, nanos: { type: 'int32', id: 2 } } },
          },
        },
        rpc: {
          nested: {
            Status: { fields: { code: { type: 'int32', id: 1 }, message: { type: 'string', id: 2 }, details: { rule: 'repeated', type: 'google.protobuf.Any', id: 3 } } },
            RetryInfo: { fields: { retry_delay: { type: 'google.protobuf.Duration', id: 1 } } },
          },
        },
      },
    },
  },
});
const StatusType = rpc.lookupType('google.rpc.Status');
const RetryInfoType = rpc.lookupType('google.rpc.RetryInfo');

/** The gRPC error of a failed export: the status the OTLP specification asks for, and a RetryInfo when retrying helps. */
export function grpcError(err: unknown): Partial<grpc.StatusObject> {
  if (!(err instanceof DomainError)) {
    return { code: grpc.status.INTERNAL, details: 'internal server error' };
  }
  const { code, retry } = GRPC_STATUS[err.kind];
  const metadata = new grpc.Metadata();
  if (retry) {
    const seconds = Math.max(1, Math.ceil(err.retryAfterSec ?? 1));
    const retryInfo = RetryInfoType.encode(RetryInfoType.fromObject({ retry_delay: { seconds, nanos: 0 } })).finish();
    const status = StatusType.encode(
      StatusType.fromObject({ code, message: err.message, details: [{ type_url: 'type.googleapis.com/google.rpc.RetryInfo', value: retryInfo }] }),
    ).finish();
    metadata.set('grpc-status-details-bin', Buffer.from(status));
  }
  return { code, details: err.message, metadata };
}

export interface OtlpGrpcServer {
  addr: string;
  /** The port bound (P_OTLP_GRPC_ADDR may ask for port 0: any free one). */
  port: number;
  /** The paths of every method registered (`/package.Service/Method`); any other path is UNIMPLEMENTED. */
  methods: string[];
  close(): Promise<void>;
}

export interface OtlpGrpcDeps {
  keys: ApiKeys;
  /** The ingest seam and its in-flight budget (an IngestService; in-process tests: RecordingIngest with a budget). */
  ingest: Ingest & Pick<IngestService, 'inflight'>;
  connections: ConnectionBudget;
  /** The slow-body bounds of ingestion, applied to a message as it arrives. */
  slowBody: { bodyTimeoutMs: number; minBodyRate: number };
}

const GRPC_DOOR = { name: 'grpc', ingest: true };

/** The gRPC server with the door contract in front of its calls (./admission.ts) and HTTP/2's bounds per connection. */
function newServer(settings: Config['otlpGrpc'], deps: OtlpGrpcDeps, connectionOf: (peer: string) => Connection | undefined): grpc.Server {
  return new grpc.Server({
    'grpc.max_receive_message_length': settings.maxMessageBytes,
    // Long-lived HTTP/2 connections would pin a client to one worker behind a load balancer.
    'grpc.max_connection_age_ms': settings.maxConnectionAgeMs,
    'grpc.max_connection_age_grace_ms': settings.maxConnectionAgeGraceMs,
    // Streams per connection; each unread one holds at most a flow-control window (the stream is paused).
    'grpc.max_concurrent_streams': settings.maxStreams,
    interceptors: [
      admissionInterceptor({
        keys: deps.keys,
        inflight: deps.ingest.inflight,
        calls: new KeySlots('OTLP/gRPC exports in progress (P_OTLP_GRPC_MAX_CALLS)', Math.max(1, Math.ceil(settings.maxCalls / 2)), settings.maxCalls),
        ...deps.slowBody,
        connectionOf,
        statusOf: grpcError,
        refused: (path, code) => {
          log.info('grpc', { method: path.slice(1), code, refused: true });
          grpcRequests.inc({ method: path.slice(1), code: String(code) });
        },
      }, settings.maxMessageBytes),
    ],
  });
}

/** The paths of every method `server` gets from here on, whoever adds the service (grpc-js has no public list). */
function recordMethods(server: grpc.Server): string[] {
  const methods: string[] = [];
  const addService = server.addService.bind(server);
  server.addService = (service, implementation) => {
    methods.push(...Object.values(service).map((m) => m.path));
    addService(service, implementation);
  };
  return methods;
}

/** One Export handler: the admitted message goes to the ingest service with its reservation. */
function exportHandler(signal: OtlpSignal, ingest: Ingest): grpc.handleUnaryCall<AdmittedExport, Buffer> {
  const method = `${SERVICE[signal]}/Export`;
  return (call, callback) => {
    const started = performance.now();
    const done = (err: Partial<grpc.StatusObject> | null, response?: Buffer) => {
      const ms = performance.now() - started;
      const code = err?.code ?? grpc.status.OK;
      log.info('grpc', { method, code, ms: Math.round(ms * 10) / 10 });
      grpcRequests.inc({ method, code: String(code) });
      grpcDuration.observe({ method }, ms / 1000);
      callback(err, response);
    };
    // A client that cancels or goes away: nothing is stored after that, and the budget is given back.
    const aborted = new AbortController();
    call.on('cancelled', () => aborted.abort(new DomainError('unavailable', 'the client cancelled the export')));
    const { body, lease, principal } = call.request;
    const headers = headersOf(call.metadata);
    ingest
      .ingest({ format: { kind: 'otlp', signal, format: 'protobuf' }, dataset: headers.get('x-p-stream') ?? undefined, headers, body, lease, rights: ingestRights(principal), signal: aborted.signal })
      .then(
        ({ info }) => done(null, encodeOtlpResponse(signal, 'protobuf', info.rejected ?? 0, info.rejectionMessage).body as Buffer),
        (err: unknown) => {
          if (!(err instanceof DomainError)) log.error('unhandled error', { method, error: err as Error });
          done(grpcError(err));
        },
      );
  };
}

/**
 * Starts the server on `settings.addr` (host:port); resolves once it listens. Its listener is a plain
 * TCP server whose connections come from the shared connection budget and are then handed to grpc-js.
 */
export async function startOtlpGrpc(settings: Config['otlpGrpc'] & { addr: string }, deps: OtlpGrpcDeps): Promise<OtlpGrpcServer> {
  const addr = settings.addr;
  const m = /^(.*):(\d+)$/.exec(addr);
  if (!m) throw new Error(`invalid configuration: P_OTLP_GRPC_ADDR must be host:port or off, got ${addr}`);
  const host = m[1].replace(/^\[(.*)\]$/, '$1') || '0.0.0.0';
  const peers = new Map<string, Connection>();
  const server = newServer(settings, deps, (peer) => peers.get(peer));
  const methods = recordMethods(server);
  for (const signal of ['logs', 'traces', 'metrics'] as const) {
    server.addService(exportDefinition(signal), { Export: exportHandler(signal, deps.ingest) });
  }

  // grpc.health.v1.Health: the whole server ("") and each OTLP service, for Kubernetes gRPC probes and load balancers.
  const health = new HealthImplementation({ '': 'SERVING', ...Object.fromEntries(Object.values(SERVICE).map((s) => [s, 'SERVING' as const])) });
  health.addToServer(server);

  const injector = server.createConnectionInjector(grpc.ServerCredentials.createInsecure());
  const listener = net.createServer((socket) => {
    const conn = deps.connections.admit(socket, GRPC_DOOR);
    if (!conn) return;
    const peer = `${socket.remoteAddress}:${socket.remotePort}`;
    peers.set(peer, conn);
    socket.once('close', () => peers.delete(peer));
    injector.injectConnection(socket);
  });
  const port = await new Promise<number>((resolve, reject) => {
    listener.once('error', (err) => reject(listenError('OTLP/gRPC', addr, 'P_OTLP_GRPC_ADDR', err, true)));
    listener.listen(Number(m[2]), host, () => resolve((listener.address() as net.AddressInfo).port));
  });
  // Every method the server answers: the door contract (docs/security.md) has no statements row for
  // this door because none of them carries one; test/doorContract.test.ts reads this list.
  log.info('OTLP/gRPC listening', { addr, port, methods });
  return {
    addr,
    port,
    methods,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of ['', ...Object.values(SERVICE)]) health.setStatus(s, 'NOT_SERVING');
        listener.close();
        // Running exports finish (their batches are acknowledged); then anything left is cut.
        const force = setTimeout(() => server.forceShutdown(), settings.maxConnectionAgeGraceMs);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      }),
  };
}
