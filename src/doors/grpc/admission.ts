/**
 * The door contract on OTLP/gRPC (docs/security.md "The door contract"): a server interceptor that runs
 * on a call's metadata, before grpc-js reads its message (grpc-js keeps the HTTP/2 stream paused until
 * the handler asks for the message, so an unread stream holds at most one flow-control window):
 *
 * 1. authenticates from the metadata — a call without a valid key is answered UNAUTHENTICATED and its
 *    message is never read;
 * 2. takes one of the key's export slots (P_OTLP_GRPC_MAX_CALLS in all, half of them per key);
 * 3. reserves the largest message (P_MAX_BODY_BYTES) in the ingest in-flight budget, waiting its turn
 *    like an HTTP body, and only then lets the message be read; once read, the reservation shrinks to
 *    the message's size and travels with it to the ingest service, which releases it.
 *
 * The connection's head is done (the budget stops counting it as silent) at its first authenticated call.
 */
import * as grpc from '@grpc/grpc-js';
import type { InflightBudget, InflightLease } from '../../ingest/inflight.ts';
import type { Connection } from '../shared/connections.ts';
import { authenticate, type ApiKeys, type Principal } from '../shared/auth.ts';
import type { KeySlots } from '../shared/slots.ts';

/** What the handler gets instead of the bare message: its bytes, its reservation and its key. */
export interface AdmittedExport {
  body: Buffer;
  lease: InflightLease;
  principal: Principal;
}

export interface AdmissionDeps {
  keys: ApiKeys;
  inflight: InflightBudget;
  calls: KeySlots;
  /** The largest message, reserved before reading one. */
  maxMessageBytes: number;
  /** The budget's connection behind a peer address (grpc-js names a call's peer `address:port`). */
  connectionOf: (peer: string) => Connection | undefined;
  /** Turns a refusal into the status the client gets. */
  statusOf: (err: unknown) => Partial<grpc.StatusObject>;
}

/** Metadata as HTTP headers (text entries; binary `-bin` ones carry nothing the service reads). */
export function headersOf(metadata: grpc.Metadata): Headers {
  const headers = new Headers();
  for (const [key, value] of Object.entries(metadata.getMap())) {
    if (typeof value === 'string') headers.set(key, value);
  }
  return headers;
}

/** Export calls only: the health service is open to probes without a key, and reads no message worth bounding. */
const guarded = (path: string) => path.endsWith('/Export');

export function admissionInterceptor(deps: AdmissionDeps): grpc.ServerInterceptor {
  return (method, call) => {
    if (!guarded(method.path)) return new grpc.ServerInterceptingCall(call);
    let principal: Principal | undefined;
    let lease: InflightLease | undefined;
    let giveSlot: (() => void) | undefined;
    let finished = false;
    const finish = () => {
      finished = true;
      giveSlot?.();
      // The ingest service released it already when it took it; otherwise (refused, cancelled) here.
      lease?.release();
    };
    const refuse = (err: unknown) => {
      finish();
      call.sendStatus({ code: grpc.status.INTERNAL, details: '', metadata: new grpc.Metadata(), ...deps.statusOf(err) } as grpc.StatusObject);
    };
    const admit = async (metadata: grpc.Metadata): Promise<void> => {
      principal = authenticate(deps.keys, headersOf(metadata));
      deps.connectionOf(call.getPeer())?.ready();
      giveSlot = deps.calls.take(principal.id);
      lease = await deps.inflight.acquire(deps.maxMessageBytes, principal.id);
      if (finished) lease.release();
    };
    return new grpc.ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (metadata, mdNext) => {
            admit(metadata).then(
              () => {
                if (!finished) mdNext(metadata);
              },
              refuse,
            );
          },
          onReceiveMessage: (message: Buffer, msgNext) => {
            // The reservation now matches what arrived (the ingest service grows it again to decode).
            void lease!.resize(message.byteLength).then(() => msgNext({ body: message, lease: lease!, principal: principal! } satisfies AdmittedExport));
          },
          onCancel: finish,
        }),
      sendStatus: (status, next) => {
        finish();
        next(status);
      },
    });
  };
}
