import type { ErrorKind } from '../../errors.ts';

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
  cancelled: { code: 1, retry: false }, // CANCELLED
  internal: { code: 13, retry: false }, // INTERNAL
};
