import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { ErrorKind } from '../../errors.ts';

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
