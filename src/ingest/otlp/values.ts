
/**
 * Readers for one field of a decoded OTLP message. The same converters serve both encodings: protobuf
 * messages from the generated classes (ints as Long, bytes as Buffer, unset fields null) and parsed
 * OTLP/JSON (ints as strings or numbers, ids as hex, unset fields absent). JSON is untrusted, so every
 * reader checks the type and a mismatch is a 400 naming the field's path.
 *
 * Readers take the enclosing message's path and the field (name or list index) separately and join
 * them only for an error message: building a path string for every field of every record was the
 * largest cost of decoding.
 */
export type Msg = Record<string, unknown>;
import { DomainError, invalidInput } from '../../errors.ts';
import { wellFormed } from '../names.ts';

export { wellFormed };

/** A field of the message at `at`: a name (`.name`) or a list index (`[3]`). */
export type Field = string | number | undefined;

export const path = (at: string, field: Field): string =>
  field === undefined ? at : typeof field === 'number' ? `${at}[${field}]` : `${at}.${field}`;

export const invalid = (at: string, field: Field, problem: string): DomainError =>
  invalidInput(`invalid OTLP payload at ${path(at, field)}: ${problem}`);

/** A nested message: null when unset. */
export function msg(v: unknown, at: string, field?: Field): Msg | null {
  if (v === null || v === undefined) return null;
  if (typeof v === 'object' && !Array.isArray(v) && !ArrayBuffer.isView(v)) return v as Msg;
  throw invalid(at, field, 'expected an object');
}

/** A repeated field: empty when unset. */
export function list(v: unknown, at: string, field?: Field): unknown[] {
  if (v === null || v === undefined) return [];
  if (Array.isArray(v)) return v;
  throw invalid(at, field, 'expected an array');
}

/** A string field; '' and unset are both null (proto3 cannot tell them apart). */
export function str(v: unknown, at: string, field?: Field): string | null {
  if (v === null || v === undefined || v === '') return null;
  if (typeof v === 'string') return wellFormed(v);
  throw invalid(at, field, 'expected a string');
}

export function bool(v: unknown, at: string, field?: Field): boolean | null {
  if (v === null || v === undefined) return null;
  if (typeof v === 'boolean') return v;
  throw invalid(at, field, 'expected a boolean');
}

interface LongBits {
  low: number;
  high: number;
}

const isLong = (v: object): v is LongBits =>
  typeof (v as Partial<LongBits>).low === 'number' && typeof (v as Partial<LongBits>).high === 'number';

const U64_MAX = (1n << 64n) - 1n;
const I64_MIN = -(1n << 63n);
const I64_MAX = (1n << 63n) - 1n;
const INT_TEXT = /^-?\d+$/;

function int64(v: unknown, at: string, field: Field, signed: boolean): bigint | null {
  if (v === null || v === undefined) return null;
  let out: bigint;
  if (typeof v === 'bigint') out = v;
  else if (typeof v === 'number') {
    if (!Number.isInteger(v)) throw invalid(at, field, `expected an integer, got ${v}`);
    out = BigInt(v);
  } else if (typeof v === 'string') {
    if (!INT_TEXT.test(v)) throw invalid(at, field, `expected an integer, got "${v.slice(0, 40)}"`);
    out = BigInt(v);
  } else if (typeof v === 'object' && isLong(v)) {
    // protobufjs Long: the field's declared signedness decides, not the Long's own flag.
    const bits = (BigInt(v.high >>> 0) << 32n) | BigInt(v.low >>> 0);
    return signed ? BigInt.asIntN(64, bits) : bits;
  } else throw invalid(at, field, 'expected an integer');
  if (signed ? out < I64_MIN || out > I64_MAX : out < 0n || out > U64_MAX) {
    throw invalid(at, field, `${out} is out of range for a ${signed ? 'signed' : 'unsigned'} 64-bit integer`);
  }
  return out;
}

export const u64 = (v: unknown, at: string, field?: Field) => int64(v, at, field, false);

const TWO_32 = 4294967296;

/**
 * A 64-bit integer as a JS number when that is exact, else null — the fast path that avoids BigInt for
 * the common small values. `undefined` means "not a small integer": use u64 (or int64).
 */
function smallInt(v: unknown, signed: boolean): number | null | undefined {
  if (v === null || v === undefined) return null;
  if (typeof v === 'number') return Number.isSafeInteger(v) && (signed || v >= 0) ? v : undefined;
  if (typeof v === 'string') {
    // Up to 15 digits is always a safe integer.
    if (v.length > 0 && v.length < 16 && INT_TEXT.test(v)) {
      const n = Number(v);
      return signed || n >= 0 ? n : undefined;
    }
    return undefined;
  }
  if (typeof v === 'object' && isLong(v)) {
    const high = signed ? v.high | 0 : v.high >>> 0;
    // |high| < 2^21 keeps high * 2^32 + low within the safe range.
    if (high > -0x200000 && high < 0x200000) return high * TWO_32 + (v.low >>> 0);
  }
  return undefined;
}

/** A 32-bit int, enum number or count as a JS number; unset is `dflt` (proto3's zero unless the caller says otherwise). */
export function int(v: unknown, at: string, field?: Field, dflt: number | null = 0): number | null {
  if (v === null || v === undefined) return dflt;
  const small = smallInt(v, true);
  if (typeof small === 'number') return small;
  const n = int64(v, at, field, true);
  return n === null ? dflt : Number(n);
}

/** A signed 64-bit value (asInt) as a JS number; beyond 2^53 it is rounded, as a DOUBLE column would. */
export function i64Number(v: unknown, at: string, field?: Field): number | null {
  const small = smallInt(v, true);
  if (small !== undefined) return small;
  const n = int64(v, at, field, true);
  return n === null ? null : Number(n);
}

const SAFE_MIN = BigInt(Number.MIN_SAFE_INTEGER);
const SAFE_MAX = BigInt(Number.MAX_SAFE_INTEGER);

/** An int64 as a JS number when that is exact, else its decimal text, so nothing is rounded. */
export function i64Exact(v: unknown, at: string, field?: Field): number | string | null {
  const small = smallInt(v, true);
  if (small !== undefined) return small;
  const n = int64(v, at, field, true);
  if (n === null) return null;
  return n >= SAFE_MIN && n <= SAFE_MAX ? Number(n) : n.toString();
}

/** uint64 counts (bucket counts, count) as JS numbers; above 2^53 they lose precision, never wrap. */
export function count(v: unknown, at: string, field?: Field): number | null {
  const small = smallInt(v, false);
  if (small !== undefined) return small;
  const n = int64(v, at, field, false);
  return n === null ? null : Number(n);
}

const SPECIAL_DOUBLES: Record<string, number> = { NaN: NaN, Infinity: Infinity, '-Infinity': -Infinity };

/** A double; proto3 JSON spells the non-finite ones "NaN", "Infinity", "-Infinity". */
export function dbl(v: unknown, at: string, field?: Field): number | null {
  if (v === null || v === undefined) return null;
  if (typeof v === 'number') return v;
  if (typeof v === 'string') {
    const special = SPECIAL_DOUBLES[v];
    if (special !== undefined) return special;
    const n = Number(v);
    if (v.trim() !== '' && !Number.isNaN(n)) return n;
  }
  throw invalid(at, field, 'expected a number');
}

/** An enum: a number, or (OTLP/JSON) the value's name. Unset is 0, the UNSPECIFIED value. */
export function enumNumber(v: unknown, names: readonly string[], at: string, field?: Field): number {
  if (v === null || v === undefined) return 0;
  if (typeof v === 'number' && Number.isInteger(v)) return v;
  if (typeof v === 'string') {
    const i = names.indexOf(v);
    if (i >= 0) return i;
    if (/^\d{1,9}$/.test(v)) return Number(v);
  }
  throw invalid(at, field, `expected an enum number or a name such as ${names[1] ?? names[0]}`);
}

export const hex = (bytes: Uint8Array): string => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');

const BASE64 = /^[A-Za-z0-9+/\-_]*={0,2}$/;

/** A bytes field that is not an id: protobuf gives bytes, OTLP/JSON base64 (proto3 JSON mapping). */
export function bytes(v: unknown, at: string, field?: Field): Uint8Array | null {
  if (v === null || v === undefined) return null;
  if (v instanceof Uint8Array) return v;
  if (typeof v === 'string' && BASE64.test(v)) return Buffer.from(v, 'base64');
  throw invalid(at, field, 'expected base64 text');
}

/** `error` is set when the id is malformed; `hex` is then null. */
export interface IdResult {
  hex: string | null;
  error?: string;
}

const NO_ID: IdResult = { hex: null };
const HEX = /^[0-9a-fA-F]*$/;

/**
 * A trace or span id → lowercase hex, null when empty. A wrong length or (JSON) non-hex text is not a
 * 400: the caller rejects only the record that carries it.
 */
export function id(v: unknown, size: 8 | 16, name: string): IdResult {
  if (v === null || v === undefined) return NO_ID;
  if (v instanceof Uint8Array) {
    if (v.length === 0) return NO_ID;
    if (v.length !== size) return { hex: null, error: `${name} is ${v.length} bytes, expected ${size}` };
    return { hex: hex(v) };
  }
  if (typeof v === 'string') {
    if (v === '') return NO_ID;
    if (!HEX.test(v)) return { hex: null, error: `${name} "${v.slice(0, 64)}" is not hex (OTLP/JSON ids are hex, not base64)` };
    if (v.length !== size * 2) return { hex: null, error: `${name} has ${v.length} hex digits, expected ${size * 2}` };
    return { hex: v.toLowerCase() };
  }
  return { hex: null, error: `${name} must be a hex string` };
}

const NS_PER_S = 1_000_000_000n;
let cachedSecond = -1n;
let cachedPrefix = '';

/** Unix nanoseconds → `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ`, exact: the fraction comes from BigInt, not a float. */
export function nanosToIso(ns: bigint): string {
  const second = ns / NS_PER_S;
  if (second !== cachedSecond) {
    // uint64 nanoseconds end in the year 2554, well inside Date's range and its 4-digit years.
    cachedPrefix = new Date(Number(second) * 1000).toISOString().slice(0, 20);
    cachedSecond = second;
  }
  return `${cachedPrefix}${(ns % NS_PER_S).toString().padStart(9, '0')}Z`;
}

/** A *_unix_nano field as an ISO string; 0 and unset mean "unknown" and are null. */
export function time(v: unknown, at: string, field?: Field): string | null {
  const ns = u64(v, at, field);
  return ns === null || ns === 0n ? null : nanosToIso(ns);
}

/**
 * Thrown while converting one record (log record, span, data point) to leave out just that record; it
 * is counted in partial_success like a record with a bad id.
 */
export class RecordRejection {
  constructor(
    readonly at: string,
    readonly problem: string,
  ) {}
}

/**
 * The latest time a TIMESTAMP_NS column holds: nanoseconds since the epoch as a signed 64-bit integer,
 * whose maximum DuckDB reserves for 'infinity' (2262-04-11T23:47:16.854775806Z). A later uint64 time
 * cannot be stored: written to the WAL, it made every query of the dataset and every flush fail.
 */
export const MAX_TIMESTAMP_NS = I64_MAX - 1n;

/** Checks that a time can be stored in a TIMESTAMP_NS column; if not, the record is rejected. */
export function storableNanos(ns: bigint, at: string, field: Field): bigint {
  if (ns > MAX_TIMESTAMP_NS) {
    throw new RecordRejection(path(at, field), `${ns} ns is after 2262-04-11T23:47:16.854775806Z, the latest time that can be stored`);
  }
  return ns;
}

/** Nineteen digits from 1e18 to under 9e18 ns (2001–2255): every OTLP/JSON time of these centuries, all storable. */
const NANOS_19 = /^[1-8]\d{18}$/;
let cachedSecondText = '';
let cachedSecondPrefix = '';

/** Like `time`, for a field stored in a TIMESTAMP_NS column: a time too late to store rejects the record. */
export function timeColumn(v: unknown, at: string, field: Field): string | null {
  // The decimal text OTLP/JSON sends is cut into seconds and fraction as is: what nanosToIso gives
  // for it, without a BigInt per time.
  if (typeof v === 'string' && v.length === 19 && NANOS_19.test(v)) {
    const second = v.slice(0, 10);
    if (second !== cachedSecondText) {
      cachedSecondPrefix = new Date(Number(second) * 1000).toISOString().slice(0, 20);
      cachedSecondText = second;
    }
    return `${cachedSecondPrefix}${v.slice(10)}Z`;
  }
  const ns = u64(v, at, field);
  return ns === null || ns === 0n ? null : nanosToIso(storableNanos(ns, at, field));
}

/** Collects per-record rejections for the partial_success response. */
export class Rejections {
  count = 0;
  private first?: string;

  add(at: string, problem: string): void {
    this.count++;
    this.first ??= `${at}: ${problem}`;
  }

  message(noun: string): string | undefined {
    if (this.count === 0) return undefined;
    return `${this.count} ${noun}${this.count === 1 ? ' was' : 's were'} rejected; first: ${this.first}`;
  }
}

/** What every signal's converter needs besides the request. */
export interface ConvertContext {
  /** The receive time, used when a record carries no time of its own. */
  receivedAt: string;
  rejections: Rejections;
}
