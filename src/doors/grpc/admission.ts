/**
 * The door contract on OTLP/gRPC (docs/security.md "The door contract"): a server interceptor that runs
 * on a call's metadata, before grpc-js reads its message (grpc-js keeps the HTTP/2 stream paused until
 * the handler asks for the message, so an unread stream holds at most one flow-control window):
 *
 * 1. authenticates from the metadata — a call without a valid key is answered UNAUTHENTICATED and its
 *    message is never read;
 * 2. takes one of the key's export slots (P_OTLP_GRPC_MAX_CALLS in all, half of them per key);
 * 3. reserves a first step (one flow-control window) in the ingest in-flight budget, waiting its turn
 *    like an HTTP body, and only then lets the message be read; as the message arrives the reservation
 *    grows in steps, the stream paused while it waits for room (HTTP/2 flow control then holds the
 *    sender), so what a call holds is always reserved; once read, the reservation travels with the
 *    message to the ingest service, which releases it;
 * 4. a message slower than P_INGEST_MIN_BODY_RATE after P_INGEST_BODY_TIMEOUT ends the call
 *    (DEADLINE_EXCEEDED), as a slow HTTP body is cut.
 *
 * The connection's head is done (the budget stops counting it as silent) at its first authenticated call.
 */
import type { ServerHttp2Stream } from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { timedOut } from '../../errors.ts';
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
  /** The slow-message deadline: P_INGEST_BODY_TIMEOUT's grace, then P_INGEST_MIN_BODY_RATE (bytes/s). */
  bodyTimeoutMs: number;
  minBodyRate: number;
  /** The budget's connection behind a peer address (grpc-js names a call's peer `address:port`). */
  connectionOf: (peer: string) => Connection | undefined;
  /** Turns a refusal into the status the client gets. */
  statusOf: (err: unknown) => Partial<grpc.StatusObject>;
  /** Counts a call refused here (its handler never runs): the method's path and the code. */
  refused: (path: string, code: number) => void;
}

/** The address of grpc-js's peer name (`ipv4:port`, `[ipv6]:port`, or a `scheme:` prefix). */
export function peerAddress(peer: string): string {
  const bare = peer.replace(/^[a-z0-9]+:(?=[\d[])/i, '');
  return bare.replace(/^\[(.*)\](:\d+)?$/, '$1').replace(/:\d+$/, '');
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

/** The reservation grows in steps of this much: HTTP/2's initial flow-control window, what an unread stream may already hold. */
const RESERVE_STEP = 64 * 1024;

/**
 * The HTTP/2 stream under a call: grpc-js hands the innermost interceptor its base call, which keeps
 * the stream as `stream` (not part of its typed interface). Undefined if that ever changes: then the
 * reservation covers the largest message before reading (correct, only less concurrent).
 */
function streamOf(call: grpc.ServerInterceptingCallInterface): ServerHttp2Stream | undefined {
  const stream = (call as unknown as { stream?: unknown }).stream;
  return stream && typeof (stream as ServerHttp2Stream).pause === 'function' ? (stream as ServerHttp2Stream) : undefined;
}

/** One guarded call's admission: its key, slot, reservation and the stream it meters. */
class Admission {
  principal: Principal | undefined;
  lease: InflightLease | undefined;
  private giveSlot: (() => void) | undefined;
  private received = 0;
  private growing = false;
  private deadline: NodeJS.Timeout | undefined;
  /** The reservation went with the message to the ingest service, which releases it. */
  private handedOn = false;
  finished = false;

  constructor(
    private readonly deps: AdmissionDeps,
    private readonly call: grpc.ServerInterceptingCallInterface,
    private readonly maxMessageBytes: number,
    private readonly path: string,
  ) {}

  /** Authenticates, takes a slot and the first step of the budget; throws the refusal. */
  async admit(metadata: grpc.Metadata): Promise<void> {
    this.principal = await authenticate(this.deps.keys, headersOf(metadata), peerAddress(this.call.getPeer()));
    this.deps.connectionOf(this.call.getPeer())?.ready();
    this.giveSlot = this.deps.calls.take(this.principal.id);
    const stream = streamOf(this.call);
    const lease = await this.deps.inflight.acquire(stream ? RESERVE_STEP : this.maxMessageBytes, this.principal.id);
    this.lease = lease;
    if (this.finished) return lease.release();
    if (stream) this.meter(stream);
    this.armDeadline();
  }

  /** Counts what arrives; past the reservation the stream pauses until the next step is granted. */
  private meter(stream: ServerHttp2Stream): void {
    stream.on('data', (chunk: Buffer) => {
      this.received += chunk.byteLength;
      if (this.received <= this.lease!.bytes || this.growing || this.finished) return;
      this.growing = true;
      stream.pause();
      const want = Math.min(this.maxMessageBytes + RESERVE_STEP, (Math.ceil(this.received / RESERVE_STEP) + 1) * RESERVE_STEP);
      this.lease!.resize(want).then(
        () => {
          this.growing = false;
          if (!this.finished) stream.resume();
        },
        // Once the message went on, the ingest service sizes the reservation (and answers a refusal) itself.
        (err: unknown) => {
          if (!this.handedOn) this.refuse(err);
        },
      );
    });
  }

  private armDeadline(): void {
    const started = Date.now();
    const check = () => {
      const due = started + this.deps.bodyTimeoutMs + (this.received / this.deps.minBodyRate) * 1000;
      if (this.finished) return;
      if (Date.now() < due) {
        this.deadline = setTimeout(check, due - Date.now());
        return;
      }
      this.refuse(timedOut(`the message arrived too slowly (${this.received} bytes in ${Date.now() - started} ms; P_INGEST_MIN_BODY_RATE after P_INGEST_BODY_TIMEOUT)`));
    };
    this.deadline = setTimeout(check, this.deps.bodyTimeoutMs);
  }

  /** The message is here: its reservation matches what arrived and goes with it. */
  deliver(message: Buffer): AdmittedExport {
    clearTimeout(this.deadline);
    this.handedOn = true;
    // Only ever shrunk here (never waits, never refuses): growing it is the ingest service's, which
    // answers a refusal as the call's status.
    if (message.byteLength < this.lease!.bytes) void this.lease!.resize(message.byteLength);
    return { body: message, lease: this.lease!, principal: this.principal! };
  }

  refuse(err: unknown): void {
    if (this.finished) return;
    this.finish();
    const status = { code: grpc.status.INTERNAL, details: '', metadata: new grpc.Metadata(), ...this.deps.statusOf(err) } as grpc.StatusObject;
    this.deps.refused(this.path, status.code);
    this.call.sendStatus(status);
  }

  /** The call ended (answered, refused or cancelled): slot and any reservation not handed on go back. */
  finish(): void {
    this.finished = true;
    clearTimeout(this.deadline);
    this.giveSlot?.();
    if (!this.handedOn) this.lease?.release();
  }
}

export function admissionInterceptor(deps: AdmissionDeps, maxMessageBytes: number): grpc.ServerInterceptor {
  return (method, call) => {
    if (!guarded(method.path)) return new grpc.ServerInterceptingCall(call);
    const admission = new Admission(deps, call, maxMessageBytes, method.path);
    return new grpc.ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (metadata, mdNext) => {
            admission.admit(metadata).then(
              () => {
                if (!admission.finished) mdNext(metadata);
              },
              (err: unknown) => admission.refuse(err),
            );
          },
          onReceiveMessage: (message: Buffer, msgNext) => msgNext(admission.deliver(message)),
          onCancel: () => admission.finish(),
        }),
      sendStatus: (status, next) => {
        admission.finish();
        next(status);
      },
    });
  };
}
