import { badRequest, type HttpError } from '../../http/errors.ts';

/**
 * Readers for one field of a decoded OTLP message. The same converters serve both encodings: protobuf
 * messages from the generated classes (ints as Long, bytes as Buffer, unset fields null) and parsed
 * OTLP/JSON (ints as strings or numbers, ids as hex, unset fields absent). JSON is untrusted, so every
 * reader checks the type and a mismatch is a 400 naming the field's path.
 */
export type Msg = Record<string, unknown>;

export const invalid = (at: string, problem: string): HttpError => badRequest(`invalid OTLP payload at ${at}: ${problem}`);

/** A nested message: null when unset. */
export function msg(v: unknown, at: string): Msg | null {
  if (v === null || v === undefined) return null;
  if (typeof v === 'object' && !Array.isArray(v) && !ArrayBuffer.isView(v)) return v as Msg;
  throw invalid(at, 'expected an object');
}

/** A repeated field: empty when unset. */
export function list(v: unknown, at: string): unknown[] {
  if (v === null || v === undefined) return [];
  if (Array.isArray(v)) return v;
  throw invalid(at, 'expected an array');
}

// String.prototype.isWellFormed/toWellFormed exist in Node 20 (V8 11.3) but not in the ES2022 lib.
interface WellFormed {
  isWellFormed(): boolean;
  toWellFormed(): string;
}

/** Lone UTF-16 surrogates (JSON "\ud800" escapes) cannot be written as UTF-8; they become U+FFFD. */
export function wellFormed(s: string): string {
  const w = s as unknown as WellFormed;
  return w.isWellFormed() ? s : w.toWellFormed();
}

/** A string field; '' and unset are both null (proto3 cannot tell them apart). */
export function str(v: unknown, at: string): string | null {
  if (v === null || v === undefined || v === '') return null;
  if (typeof v === 'string') return wellFormed(v);
  throw invalid(at, 'expected a string');
}

export function bool(v: unknown, at: string): boolean | null {
  if (v === null || v === undefined) return null;
  if (typeof v === 'boolean') return v;
  throw invalid(at, 'expected a boolean');
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

function int64(v: unknown, at: string, signed: boolean): bigint | null {
  if (v === null || v === undefined) return null;
  let out: bigint;
  if (typeof v === 'bigint') out = v;
  else if (typeof v === 'number') {
    if (!Number.isInteger(v)) throw invalid(at, `expected an integer, got ${v}`);
    out = BigInt(v);
  } else if (typeof v === 'string') {
    if (!INT_TEXT.test(v)) throw invalid(at, `expected an integer, got "${v.slice(0, 40)}"`);
    out = BigInt(v);
  } else if (typeof v === 'object' && isLong(v)) {
    // protobufjs Long: the field's declared signedness decides, not the Long's own flag.
    const bits = (BigInt(v.high >>> 0) << 32n) | BigInt(v.low >>> 0);
    return signed ? BigInt.asIntN(64, bits) : bits;
  } else throw invalid(at, 'expected an integer');
  if (signed ? out < I64_MIN || out > I64_MAX : out < 0n || out > U64_MAX) {
    throw invalid(at, `${out} is out of range for a ${signed ? 'signed' : 'unsigned'} 64-bit integer`);
  }
  return out;
}

export const u64 = (v: unknown, at: string) => int64(v, at, false);
export const i64 = (v: unknown, at: string) => int64(v, at, true);

/**
 * A 32-bit int, enum number or count as a JS number; unset is `dflt` (proto3 zero unless the caller
 * wants null).
 */
export function int(v: unknown, at: string, dflt: number | null = 0): number | null {
  if (v === null || v === undefined) return dflt;
  if (typeof v === 'number' && Number.isInteger(v)) return v;
  if (typeof v === 'string' && INT_TEXT.test(v) && v.length < 16) return Number(v);
  // A 64-bit count arriving as Long or big text still fits a JS number closely enough for a count.
  if (typeof v === 'object' || typeof v === 'string' || typeof v === 'bigint') {
    const n = int64(v, at, true);
    return n === null ? dflt : Number(n);
  }
  throw invalid(at, 'expected an integer');
}

/** uint64 counts (bucket counts, count) as JS numbers; above 2^53 they lose precision, never wrap. */
export function count(v: unknown, at: string): number | null {
  const n = u64(v, at);
  return n === null ? null : Number(n);
}

const SPECIAL_DOUBLES: Record<string, number> = { NaN: NaN, Infinity: Infinity, '-Infinity': -Infinity };

/** A double; proto3 JSON spells the non-finite ones "NaN", "Infinity", "-Infinity". */
export function dbl(v: unknown, at: string): number | null {
  if (v === null || v === undefined) return null;
  if (typeof v === 'number') return v;
  if (typeof v === 'string') {
    const special = SPECIAL_DOUBLES[v];
    if (special !== undefined) return special;
    const n = Number(v);
    if (v.trim() !== '' && !Number.isNaN(n)) return n;
  }
  if (typeof v === 'object' && isLong(v)) return Number(int64(v, at, true));
  throw invalid(at, 'expected a number');
}

/** An enum: a number, or (OTLP/JSON) the value's name. */
export function enumNumber(v: unknown, names: readonly string[], at: string): number {
  if (v === null || v === undefined) return 0;
  if (typeof v === 'number' && Number.isInteger(v)) return v;
  if (typeof v === 'string') {
    const i = names.indexOf(v);
    if (i >= 0) return i;
    if (/^\d+$/.test(v) && v.length < 10) return Number(v);
  }
  throw invalid(at, `expected an enum number or one of ${names.filter(Boolean).slice(0, 3).join(', ')}…`);
}

export const hex = (bytes: Uint8Array): string => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');

const BASE64 = /^[A-Za-z0-9+/\-_]*={0,2}$/;

/** A bytes field that is not an id: protobuf gives bytes, OTLP/JSON base64 (proto3 JSON mapping). */
export function bytes(v: unknown, at: string): Uint8Array | null {
  if (v === null || v === undefined) return null;
  if (v instanceof Uint8Array) return v;
  if (typeof v === 'string' && BASE64.test(v)) return Buffer.from(v, 'base64');
  throw invalid(at, 'expected base64 text');
}

export type IdResult = { hex: string | null; error?: undefined } | { hex?: undefined; error: string };

const HEX = /^[0-9a-fA-F]*$/;

/**
 * A trace or span id → lowercase hex, null when empty. A wrong length or (JSON) non-hex text is not a
 * 400: the caller rejects only the record that carries it.
 */
export function id(v: unknown, size: 8 | 16, field: string): IdResult {
  if (v === null || v === undefined) return { hex: null };
  if (v instanceof Uint8Array) {
    if (v.length === 0) return { hex: null };
    if (v.length !== size) return { error: `${field} is ${v.length} bytes, expected ${size}` };
    return { hex: hex(v) };
  }
  if (typeof v === 'string') {
    if (v === '') return { hex: null };
    if (!HEX.test(v)) return { error: `${field} "${v.slice(0, 64)}" is not hex (OTLP/JSON ids are hex, not base64)` };
    if (v.length !== size * 2) return { error: `${field} has ${v.length} hex digits, expected ${size * 2}` };
    return { hex: v.toLowerCase() };
  }
  return { error: `${field} must be a hex string` };
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
export function time(v: unknown, at: string): string | null {
  const ns = u64(v, at);
  return ns === null || ns === 0n ? null : nanosToIso(ns);
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
