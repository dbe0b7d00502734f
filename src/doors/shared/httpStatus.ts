import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { DomainError, type ErrorKind } from '../../errors.ts';
import { log } from '../../log.ts';

/** The one map from a domain error's kind to an HTTP status, for every door answering over HTTP with plain statuses (HTTP, Loki). */
export const STATUS: Record<ErrorKind, ContentfulStatusCode> = {
  invalid: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  timeout: 408,
  conflict: 409,
  too_large: 413,
  unsupported: 415,
  too_many_requests: 429,
  storage: 500,
  unavailable: 503,
  // The client went away (or asked to stop): nobody reads the answer, 400 for the log.
  cancelled: 400,
  internal: 500,
};

/**
 * The error handler of a door whose clients read errors as plain text (Loki's and Tempo's APIs; Grafana
 * shows the text): a domain error's message with its kind's status, anything else a bare 500 that
 * discloses nothing.
 */
export function plainTextError(err: Error, c: Context): Response {
  if (err instanceof DomainError) {
    if (err.retryAfterSec !== undefined) c.header('Retry-After', String(Math.max(1, Math.ceil(err.retryAfterSec))));
    return c.text(`${err.message}\n`, STATUS[err.kind]);
  }
  log.error('unhandled error', { method: c.req.method, path: c.req.path, error: err });
  return c.text('internal server error\n', 500);
}
