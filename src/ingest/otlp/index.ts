import type { ColumnType, FlatRow, RowBatch } from '../../model.ts';
import type { OtlpFormat } from './decode.ts';
import { requestClass } from './generated.ts';
import { decodeMessage } from '../protobuf.ts';
import { parseOtlpJson } from './json.ts';
import { LOGS_KNOWN_TYPES, LOGS_TIME_COLUMN, logRows } from './logs.ts';
import { METRICS_KNOWN_TYPES, METRICS_TIME_COLUMN, metricRows } from './metrics.ts';
import { TRACES_KNOWN_TYPES, TRACES_TIME_COLUMN, spanRows } from './traces.ts';
import { nanosToIso, Rejections, type ConvertContext, type Msg } from './values.ts';
import { DomainError, invalidInput } from '../../errors.ts';

export { decodeBody, otlpFormat, type OtlpFormat } from './decode.ts';
export { encodeOtlpResponse } from './response.ts';

export type OtlpSignal = 'logs' | 'traces' | 'metrics';

export interface OtlpDecoded extends RowBatch {
  timeColumn: string;
  /** Records (log records, spans, data points) left out because they were invalid. */
  rejected: number;
  /** Why, for partial_success.error_message; set when rejected > 0. */
  rejectionMessage?: string;
}

/** The time column each signal's datasets select and partition on. */
export const OTLP_TIME_COLUMN: Record<OtlpSignal, string> = {
  logs: LOGS_TIME_COLUMN,
  traces: TRACES_TIME_COLUMN,
  metrics: METRICS_TIME_COLUMN,
};

/** Types of the columns each signal defines itself; attribute columns are left to inference. */
export const OTLP_KNOWN_TYPES: Record<OtlpSignal, Record<string, ColumnType>> = {
  logs: LOGS_KNOWN_TYPES,
  traces: TRACES_KNOWN_TYPES,
  metrics: METRICS_KNOWN_TYPES,
};

const CONVERT: Record<OtlpSignal, (request: Msg, ctx: ConvertContext) => FlatRow[]> = {
  logs: logRows,
  traces: spanRows,
  metrics: metricRows,
};

const NOUN: Record<OtlpSignal, string> = { logs: 'log record', traces: 'span', metrics: 'data point' };

function parseProtobuf(signal: OtlpSignal, body: Buffer): Msg {
  try {
    // A Buffer (not a bare Uint8Array) makes protobufjs decode strings with Buffer#utf8Slice, which
    // turns invalid UTF-8 into U+FFFD; its own decoder can leave lone surrogates.
    const buf = Buffer.isBuffer(body) ? body : Buffer.from(body);
    return decodeMessage(requestClass[signal], buf) as unknown as Msg;
  } catch (err) {
    // A limit reached while decoding (src/ingest/limits.ts) is not a malformed body.
    if (err instanceof DomainError) throw err;
    throw invalidInput(`request body is not a valid OTLP protobuf ${NOUN[signal]} export request: ${(err as Error).message}`);
  }
}

/**
 * Decodes an OTLP/HTTP export request into one row per log record, span or metric data point.
 * A body that cannot be parsed, or whose JSON has the wrong shape, is a 400; a record with a bad trace
 * or span id is only left out and counted in `rejected`. `now` is the receive time used for records
 * that carry no time of their own. `parsedJson`: the JSON body already parsed (by `parseOtlpJson`).
 */
export function decodeOtlp(signal: OtlpSignal, format: OtlpFormat, body: Buffer, now: Date = new Date(), parsedJson?: Msg): OtlpDecoded {
  const ctx: ConvertContext = {
    receivedAt: nanosToIso(BigInt(now.getTime()) * 1_000_000n),
    rejections: new Rejections(),
  };
  let rows: FlatRow[];
  try {
    const request = format === 'protobuf' ? parseProtobuf(signal, body) : (parsedJson ?? parseOtlpJson(body));
    rows = CONVERT[signal](request, ctx);
  } catch (err) {
    if (err instanceof DomainError) throw err;
    // Recursion over absurdly nested JSON containers can exhaust the stack before a depth check.
    if (err instanceof RangeError) throw invalidInput(`OTLP payload is nested too deeply: ${err.message}`);
    throw err;
  }
  const out: OtlpDecoded = {
    rows,
    // A copy: the batch is the caller's to change.
    knownTypes: { ...OTLP_KNOWN_TYPES[signal] },
    timeColumn: OTLP_TIME_COLUMN[signal],
    rejected: ctx.rejections.count,
  };
  const message = ctx.rejections.message(NOUN[signal]);
  if (message !== undefined) out.rejectionMessage = message;
  return out;
}
