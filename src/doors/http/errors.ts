import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { DomainError, ErrorKind } from '../../errors.ts';

/** The one map from a domain error's kind to an HTTP status. */
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

/** Status, headers and JSON body `{"error": message}` of a domain error. */
export function errorResponse(err: DomainError): { status: ContentfulStatusCode; headers: Record<string, string>; body: { error: string } } {
  const headers: Record<string, string> = {};
  if (err.retryAfterSec !== undefined) headers['Retry-After'] = String(Math.max(1, Math.ceil(err.retryAfterSec)));
  if (err.kind === 'unauthorized') headers['WWW-Authenticate'] = 'Bearer';
  return { status: STATUS[err.kind], headers, body: { error: err.message } };
}
