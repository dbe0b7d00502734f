/**
 * Bounds on the work one request may cost (docs/ingestion.md "Limits per request"): a body is refused with 413 as soon as it
 * is known to hold more than P_MAX_EVENTS_PER_REQUEST events (JSON events, OTLP log records / spans /
 * data points, remote-write samples and histogram samples) or more than P_MAX_VALUES_PER_REQUEST
 * values (JSON objects, arrays and their members; protobuf messages and packed elements). Both are
 * checked before or while the body is decoded, never after everything is in memory:
 *
 * - JSON (events and OTLP/JSON): one pass over the bytes before JSON.parse counts containers and
 *   commas (outside strings), and the top-level array's elements;
 * - protobuf (OTLP, remote write): every message decoder counts what it creates (and the distinct
 *   attribute keys and label names), and the decode stops at the first message over a limit.
 *
 * The size limits (P_MAX_BODY_BYTES, P_MAX_DECOMPRESSED_BYTES) bound the bytes; these bound what the
 * bytes turn into, which for tiny events (`[{},{},…]`) is far more than their size.
 */
import protobuf from 'protobufjs';
import { tooLarge } from '../errors.ts';
import type { OtlpSignal } from './otlp/index.ts';
import type { Msg } from './otlp/values.ts';
import { messageTypes } from './protobuf.ts';
import { QUOTE, stringEnd } from './json/jsonScan.ts';

export interface RequestLimits {
  maxEvents: number;
  maxValues: number;
  /**
   * Distinct field names per request. Each new name costs far more than a value (a V8 hidden class in
   * JSON.parse, a column decision, an overflow entry), so a body of unique names (`{"<id>":…}` maps)
   * is bounded apart: 4 × P_MAX_COLUMNS (at least 1,000), more names than a dataset could hold.
   */
  maxNames: number;
  /** How far past the receive time a dataset's time field may be (P_EVENT_TIME_FUTURE_LIMIT); unset: 1 hour. */
  eventTimeFutureMs?: number;
  /** How long before the receive time an OTLP record or remote-write sample may be timed (P_SIGNAL_TIME_PAST_LIMIT); unset: 30 days. */
  signalTimePastMs?: number;
}

export const tooManyNames = (limits: RequestLimits) =>
  tooLarge(`request holds more than ${limits.maxNames} distinct field names (4 × P_MAX_COLUMNS); send smaller batches or fewer distinct names`);

const tooManyEvents = (noun: string, limits: RequestLimits) =>
  tooLarge(`request holds more than ${limits.maxEvents} ${noun} (P_MAX_EVENTS_PER_REQUEST); send smaller batches`);
const tooManyValues = (limits: RequestLimits) =>
  tooLarge(`request holds more than ${limits.maxValues} values (P_MAX_VALUES_PER_REQUEST); send smaller batches`);

const COLON = 0x3a;
/**
 * JSON bodies up to this size are parsed without a scan first: JSON.parse turns a byte into at most
 * ~20 bytes of heap (`[{},{},…]`), so 4 MiB stays under ~80 MB and ~0.2 s before the event count is
 * checked on the parsed array. The scan costs ~15% of ingesting a body, so typical batches skip it.
 */
export const SCAN_JSON_ABOVE = 4 * 1024 * 1024;

/**
 * Counts a JSON body's values (objects, arrays, and commas between members and elements), the
 * elements of a top-level array (the events) and the distinct member names (by a 30-bit hash of their
 * bytes, so a count may fall short, never over) without parsing it, and throws 413 past a limit.
 * Strings are jumped over with indexOf. Malformed JSON is left to JSON.parse to report. A body no larger than
 * SCAN_JSON_ABOVE and than the values limit (every counted token is at least one byte) is not scanned:
 * its events are counted after parsing (`checkEventCount`).
 */
export function checkJsonShape(buf: Uint8Array, limits: RequestLimits, noun = 'events'): void {
  if (buf.length <= Math.min(SCAN_JSON_ABOVE, limits.maxValues)) return;
  let depth = 0;
  let values = 0;
  let events = 0;
  let topArray = false;
  const names = new Set<number>();
  const n = buf.length;
  for (let i = 0; i < n; i++) {
    const c = buf[i];
    if (c === QUOTE) {
      const j = stringEnd(buf, i);
      if (j === -1) return;
      // A member name (compact JSON: the colon follows the quote). FNV-1a over its bytes.
      if (buf[j + 1] === COLON) {
        let h = 0x811c9dc5;
        for (let k = i + 1; k < j; k++) h = Math.imul(h ^ buf[k], 0x01000193);
        names.add(h & 0x3fffffff);
        if (names.size > limits.maxNames) throw tooManyNames(limits);
      }
      i = j;
    } else if (c === 0x7b || c === 0x5b) {
      depth++;
      if (depth === 1) topArray = c === 0x5b;
      else if (depth === 2 && topArray && ++events > limits.maxEvents) throw tooManyEvents(noun, limits);
      if (++values > limits.maxValues) throw tooManyValues(limits);
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
    } else if (c === 0x2c) {
      if (++values > limits.maxValues) throw tooManyValues(limits);
    }
  }
}

/** After JSON.parse, before any event is looked at: too many events is 413. */
export function checkEventCount(count: number, limits: RequestLimits, noun: string): void {
  if (count > limits.maxEvents) throw tooLarge(`request holds ${count} ${noun}, over the limit of ${limits.maxEvents} per request (P_MAX_EVENTS_PER_REQUEST); send smaller batches`);
}

const RECORD_PATH: Record<OtlpSignal, string[]> = {
  logs: ['resourceLogs', 'scopeLogs', 'logRecords'],
  traces: ['resourceSpans', 'scopeSpans', 'spans'],
  metrics: ['resourceMetrics', 'scopeMetrics', 'metrics'],
};
const METRIC_KINDS = ['gauge', 'sum', 'histogram', 'exponentialHistogram', 'summary'];
const arrayAt = (v: unknown, key: string): unknown[] => {
  const x = v !== null && typeof v === 'object' ? (v as Msg)[key] : undefined;
  return Array.isArray(x) ? x : [];
};

/** Records (log records, spans, data points) of a parsed OTLP/JSON request; shapes are checked later. */
export function countOtlpJsonRecords(signal: OtlpSignal, request: Msg): number {
  const [resources, scopes, records] = RECORD_PATH[signal];
  let n = 0;
  for (const r of arrayAt(request, resources)) {
    for (const s of arrayAt(r, scopes)) {
      const list = arrayAt(s, records);
      if (signal !== 'metrics') n += list.length;
      else for (const m of list) for (const kind of METRIC_KINDS) n += arrayAt((m as Msg | null)?.[kind], 'dataPoints').length;
    }
  }
  return n;
}

/** What one protobuf decode has created so far; the decoders below count into it while it is set. */
class DecodeBudget {
  values = 0;
  records = 0;
  names = new Set<unknown>();
  constructor(
    readonly limits: RequestLimits,
    readonly noun: string,
  ) {}
}
let budget: DecodeBudget | null = null;

/** Runs a protobuf decode with its messages counted against the limits (decoding is synchronous). */
export function withDecodeBudget<T>(limits: RequestLimits, noun: string, decode: () => T): T {
  budget = new DecodeBudget(limits, noun);
  try {
    return decode();
  } finally {
    budget = null;
  }
}

/**
 * For decoders that build one row from a list of named fields (OTLP attributes): a list longer than
 * the distinct-names limit is refused before its row is built, since such a row is where the cost of
 * many names lies (a dictionary-mode object of that many properties).
 */
export function checkFieldCount(n: number): void {
  const b = budget;
  if (b !== null && n > b.limits.maxNames) throw tooManyNames(b.limits);
}

type Decoder = (reader: unknown, length?: number) => unknown;

/** Which messages of a root count as what, beyond one value each. */
export interface DecodeCounts {
  /** Message types that are records (events): log records, spans, data points, samples. */
  records: ReadonlySet<string>;
  /** Packed repeated fields whose elements count as values, by message type. */
  packed: Readonly<Record<string, string[]>>;
  /** The field holding a distinct name (attribute key, label name), by message type. */
  names: Readonly<Record<string, string>>;
}

/**
 * Counts what a decoder module's own message types create against the request's budget: each message
 * a value (and a record, if it is one), plus the elements of its packed repeated fields, and the names.
 * Called by each decoder module on the root it loaded (src/ingest/otlp/generated.ts,
 * src/ingest/prometheus/decode.ts), after its types are set up: generated decoders look nested types'
 * `decode` up at call time, so wrapping each type's own property counts nested messages too. Nothing
 * outside those roots is touched.
 */
export function countDecodes(root: protobuf.NamespaceBase, counts: DecodeCounts): void {
  for (const t of messageTypes(root)) {
    countDecodesOf(t as unknown as { decode: Decoder }, counts.records.has(t.name), counts.packed[t.name] ?? [], counts.names[t.name]);
  }
}

function countDecodesOf(holder: { decode: Decoder }, record: boolean, packed: string[], nameField?: string): void {
  const decode = holder.decode;
  holder.decode = function counted(this: unknown, reader: unknown, length?: number) {
    const b = budget;
    if (b !== null) {
      if (++b.values > b.limits.maxValues) throw tooManyValues(b.limits);
      if (record && ++b.records > b.limits.maxEvents) throw tooManyEvents(b.noun, b.limits);
    }
    const message = decode.call(this, reader, length) as Msg;
    if (b !== null) {
      if (packed.length) {
        for (const field of packed) b.values += (message[field] as unknown[] | undefined)?.length ?? 0;
        if (b.values > b.limits.maxValues) throw tooManyValues(b.limits);
      }
      // Attribute keys and label names: the decode stops at the first name over the limit.
      if (nameField !== undefined && b.names.add(message[nameField]).size > b.limits.maxNames) throw tooManyNames(b.limits);
    }
    return message;
  };
}
