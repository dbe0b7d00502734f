import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { DomainError, ErrorKind } from '../../errors.ts';

/** The Elasticsearch door's map from a domain error's kind to an HTTP status, and Elasticsearch's error type for it. */
const STATUS: Record<ErrorKind, [ContentfulStatusCode, string]> = {
  invalid: [400, 'illegal_argument_exception'],
  unauthorized: [401, 'security_exception'],
  forbidden: [403, 'security_exception'],
  not_found: [404, 'index_not_found_exception'],
  timeout: [408, 'timeout_exception'],
  conflict: [409, 'version_conflict_engine_exception'],
  too_large: [413, 'content_too_long_exception'],
  unsupported: [415, 'media_type_header_exception'],
  too_many_requests: [429, 'es_rejected_execution_exception'],
  storage: [500, 'exception'],
  unavailable: [503, 'unavailable_shards_exception'],
  // The client went away: nobody reads the answer.
  cancelled: [400, 'task_cancelled_exception'],
  internal: [500, 'exception'],
};

export function esStatus(err: DomainError): ContentfulStatusCode {
  return STATUS[err.kind][0];
}

/** Elasticsearch's error object: `{type, reason}` (also the `error` of a failed bulk item). */
export function esError(err: DomainError): { type: string; reason: string } {
  return { type: STATUS[err.kind][1], reason: err.message };
}

/** A whole response's error body, as Elasticsearch shapes it. */
export function esErrorBody(status: number, type: string, reason: string) {
  return { error: { root_cause: [{ type, reason }], type, reason }, status };
}
