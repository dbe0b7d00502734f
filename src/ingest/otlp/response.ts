import type { OtlpFormat } from './decode.ts';
import { responseClass } from './generated.ts';
import type { OtlpSignal } from './index.ts';

/** The partial_success field that counts what was rejected, per signal. */
const REJECTED_FIELD: Record<OtlpSignal, string> = {
  logs: 'rejectedLogRecords',
  traces: 'rejectedSpans',
  metrics: 'rejectedDataPoints',
};

/**
 * Export{Logs,Trace,Metrics}ServiceResponse in the request's encoding. partial_success is set only when
 * something was rejected or there is a message (OTLP allows a warning with rejected = 0); a full success
 * is an empty message, as the spec asks.
 */
export function encodeOtlpResponse(
  signal: OtlpSignal,
  format: OtlpFormat,
  rejected: number,
  message?: string,
): { body: Buffer | string; contentType: string } {
  const response: Record<string, unknown> = {};
  if (rejected > 0 || (message !== undefined && message !== '')) {
    // OTLP/JSON writes int64 as decimal text; protobufjs's fromObject takes the same.
    response.partialSuccess = { [REJECTED_FIELD[signal]]: String(rejected), errorMessage: message ?? '' };
  }
  if (format === 'json') return { body: JSON.stringify(response), contentType: 'application/json' };
  const cls = responseClass[signal];
  const bytes = cls.encode(cls.fromObject(response)).finish();
  return { body: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), contentType: 'application/x-protobuf' };
}
