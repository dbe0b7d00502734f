/**
 * Domain errors: what went wrong, in the words of the domain, not of HTTP. Any layer throws them;
 * the HTTP edge (`src/doors/http/errors.ts`) is the one place that turns a kind into a status and a body,
 * so storage, ingest and query never know about status codes.
 */
export type ErrorKind =
  /** The client sent something that can never succeed as it is (400). */
  | 'invalid'
  /** No key, or an unknown key (401). */
  | 'unauthorized'
  /** The key may not do this (403). */
  | 'forbidden'
  | 'not_found'
  /** A query ran past its time limit (408). */
  | 'timeout'
  | 'conflict'
  /** A body, a decompressed body, a result or a batch over a limit (413). */
  | 'too_large'
  /** A media type or encoding the service does not speak (415). */
  | 'unsupported'
  /** Admission control: this key has too much in flight (429, retry later). */
  | 'too_many_requests'
  /** Temporarily unable: WAL full, bucket unreachable, all query slots busy (503, retry later). */
  | 'unavailable'
  /** Stored data could not be read or written (500). */
  | 'storage'
  /** The caller went away or asked to stop (a closed connection, a PostgreSQL CancelRequest). */
  | 'cancelled'
  /** A fault of the service itself, not of the input or the storage (500). */
  | 'internal';

export class DomainError extends Error {
  constructor(
    readonly kind: ErrorKind,
    message: string,
    /** Seconds after which a retry may succeed (kinds that are temporary). */
    readonly retryAfterSec?: number,
  ) {
    super(message);
    this.name = 'DomainError';
  }
}

/**
 * A start-up failure the operator fixes with a setting (a port taken, say): logged as its message
 * alone, one line naming the setting, instead of a stack.
 */
export class StartupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StartupError';
  }
}

/** The one line for a listener that could not bind: where, which setting, and what else to set. */
export function listenError(door: string, addr: string, setting: string, err: Error, canTurnOff: boolean): StartupError {
  // gRPC wraps the socket error ("No address added out of total 1 resolved errors: [listen EADDRINUSE …]").
  const reason = /\bE[A-Z]+: [^\]]*/.exec(err.message)?.[0] ?? err.message;
  const hint = canTurnOff ? `set ${setting} to a free host:port (port 0: any), or ${setting}=off` : `set ${setting} to a free host:port (port 0: any)`;
  return new StartupError(`cannot listen for ${door} on ${addr} (${setting}): ${reason}; ${hint}`);
}

export const isDomainError = (err: unknown): err is DomainError => err instanceof DomainError;

export const invalidInput = (message: string) => new DomainError('invalid', message);
export const unauthorized = (message: string) => new DomainError('unauthorized', message);
export const forbidden = (message: string) => new DomainError('forbidden', message);
export const notFound = (message: string) => new DomainError('not_found', message);
export const timedOut = (message: string) => new DomainError('timeout', message);
export const conflict = (message: string) => new DomainError('conflict', message);
export const tooLarge = (message: string) => new DomainError('too_large', message);
export const unsupported = (message: string) => new DomainError('unsupported', message);
export const tooManyRequests = (message: string, retryAfterSec = 1) => new DomainError('too_many_requests', message, retryAfterSec);
export const unavailable = (message: string, retryAfterSec = 5) => new DomainError('unavailable', message, retryAfterSec);
