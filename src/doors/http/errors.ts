import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { DomainError } from '../../errors.ts';
import { STATUS } from '../shared/httpStatus.ts';

export { STATUS } from '../shared/httpStatus.ts';

/** Status, headers and JSON body `{"error": message}` of a domain error. */
export function errorResponse(err: DomainError): { status: ContentfulStatusCode; headers: Record<string, string>; body: { error: string } } {
  const headers: Record<string, string> = {};
  if (err.retryAfterSec !== undefined) headers['Retry-After'] = String(Math.max(1, Math.ceil(err.retryAfterSec)));
  if (err.kind === 'unauthorized') headers['WWW-Authenticate'] = 'Bearer';
  return { status: STATUS[err.kind], headers, body: { error: err.message } };
}
