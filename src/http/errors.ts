import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { DomainError, ErrorKind } from '../errors.ts';

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
};

/** Status, headers and JSON body `{"error": message}` of a domain error. */
export function errorResponse(err: DomainError): { status: ContentfulStatusCode; headers: Record<string, string>; body: { error: string } } {
  const headers: Record<string, string> = {};
  if (err.retryAfterSec !== undefined) headers['Retry-After'] = String(Math.max(1, Math.ceil(err.retryAfterSec)));
  if (err.kind === 'unauthorized') headers['WWW-Authenticate'] = 'Bearer';
  return { status: STATUS[err.kind], headers, body: { error: err.message } };
}

/**
 * The same map for the OTLP/gRPC front door, as the OTLP specification tells clients to act on a code:
 * UNAVAILABLE (and RESOURCE_EXHAUSTED with RetryInfo) is retried, INVALID_ARGUMENT, UNAUTHENTICATED,
 * PERMISSION_DENIED and RESOURCE_EXHAUSTED without RetryInfo are not. `retry`: the answer carries a
 * google.rpc.RetryInfo with the error's delay. Numbers are gRPC's status codes.
 */
export const GRPC_STATUS: Record<ErrorKind, { code: number; retry: boolean }> = {
  invalid: { code: 3, retry: false }, // INVALID_ARGUMENT
  unauthorized: { code: 16, retry: false }, // UNAUTHENTICATED
  forbidden: { code: 7, retry: false }, // PERMISSION_DENIED
  not_found: { code: 5, retry: false }, // NOT_FOUND
  timeout: { code: 4, retry: false }, // DEADLINE_EXCEEDED (retried by clients as it is)
  conflict: { code: 10, retry: false }, // ABORTED (retried)
  too_large: { code: 8, retry: false }, // RESOURCE_EXHAUSTED without RetryInfo: permanent
  unsupported: { code: 3, retry: false }, // INVALID_ARGUMENT
  too_many_requests: { code: 8, retry: true }, // RESOURCE_EXHAUSTED with RetryInfo: throttled, retried
  storage: { code: 13, retry: false }, // INTERNAL
  unavailable: { code: 14, retry: true }, // UNAVAILABLE
};
