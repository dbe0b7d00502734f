import type { FlatRow, FlatValue } from '../types.ts';
import { bool, bytes, dbl, hex, i64, invalid, list, msg, str, wellFormed } from './values.ts';

/** AnyValue nesting beyond this is a 400: it only ever comes from a broken or hostile client. */
const MAX_DEPTH = 32;

type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

const SAFE_MIN = BigInt(Number.MIN_SAFE_INTEGER);
const SAFE_MAX = BigInt(Number.MAX_SAFE_INTEGER);

/** An int64 as a JS number when that is exact, else its decimal text. */
function intValue(v: unknown, at: string): number | string | null {
  const n = i64(v, at);
  if (n === null) return null;
  return n >= SAFE_MIN && n <= SAFE_MAX ? Number(n) : n.toString();
}

type Scalar = { kind: 'scalar'; value: string | number | boolean | null } | { kind: 'array'; values: unknown[] } | { kind: 'kvlist'; values: unknown[] };

/** Which oneof member an AnyValue holds. The first set member wins, as in a protobuf decoder. */
function readAnyValue(v: unknown, at: string): Scalar {
  const m = msg(v, at);
  if (m === null) return { kind: 'scalar', value: null };
  if (m.stringValue !== null && m.stringValue !== undefined) {
    if (typeof m.stringValue !== 'string') throw invalid(`${at}.stringValue`, 'expected a string');
    return { kind: 'scalar', value: wellFormed(m.stringValue) };
  }
  if (m.boolValue !== null && m.boolValue !== undefined) return { kind: 'scalar', value: bool(m.boolValue, `${at}.boolValue`) };
  if (m.intValue !== null && m.intValue !== undefined) return { kind: 'scalar', value: intValue(m.intValue, `${at}.intValue`) };
  if (m.doubleValue !== null && m.doubleValue !== undefined) return { kind: 'scalar', value: dbl(m.doubleValue, `${at}.doubleValue`) };
  if (m.arrayValue !== null && m.arrayValue !== undefined) {
    const arr = msg(m.arrayValue, `${at}.arrayValue`);
    return { kind: 'array', values: list(arr?.values, `${at}.arrayValue.values`) };
  }
  if (m.kvlistValue !== null && m.kvlistValue !== undefined) {
    const kv = msg(m.kvlistValue, `${at}.kvlistValue`);
    return { kind: 'kvlist', values: list(kv?.values, `${at}.kvlistValue.values`) };
  }
  if (m.bytesValue !== null && m.bytesValue !== undefined) {
    const b = bytes(m.bytesValue, `${at}.bytesValue`);
    return { kind: 'scalar', value: b === null ? null : hex(b) };
  }
  return { kind: 'scalar', value: null };
}

/** An AnyValue as a plain JSON value (nested arrays/maps stay nested; bytes are hex). */
export function anyValueToJson(v: unknown, at: string, depth = 0): Json {
  if (depth > MAX_DEPTH) throw invalid(at, `AnyValue nesting is deeper than ${MAX_DEPTH} levels`);
  const r = readAnyValue(v, at);
  if (r.kind === 'scalar') return r.value;
  if (r.kind === 'array') return r.values.map((item, i) => anyValueToJson(item, `${at}.arrayValue.values[${i}]`, depth + 1));
  return keyValuesToObject(r.values, `${at}.kvlistValue.values`, depth + 1);
}

/** A KeyValue list as a JSON object (later duplicates of a key win). */
export function keyValuesToObject(kvs: unknown[], at: string, depth = 0): { [key: string]: Json } {
  const out: { [key: string]: Json } = {};
  for (let i = 0; i < kvs.length; i++) {
    const kv = msg(kvs[i], `${at}[${i}]`);
    const key = kv === null ? null : str(kv.key, `${at}[${i}].key`);
    if (key === null || kv === null) continue;
    out[key] = anyValueToJson(kv.value, `${at}[${i}].value`, depth);
  }
  return out;
}

/** The attributes of an event, link or exemplar, as a JSON object. */
export function attributesObject(attrs: unknown, at: string): { [key: string]: Json } {
  return keyValuesToObject(list(attrs, at), at);
}

/**
 * An AnyValue as one cell: scalars keep their type (int64 outside the safe range becomes text, bytes
 * become hex) and arrays/maps become JSON text, because their elements may mix types.
 */
export function anyValueToCell(v: unknown, at: string): string | number | boolean | null {
  const r = readAnyValue(v, at);
  if (r.kind === 'scalar') return r.value;
  const json = r.kind === 'array'
    ? r.values.map((item, i) => anyValueToJson(item, `${at}.arrayValue.values[${i}]`, 1))
    : keyValuesToObject(r.values, `${at}.kvlistValue.values`, 1);
  return JSON.stringify(json);
}

/** A log body: a string as is, bytes as hex, any other kind as JSON text. */
export function bodyCell(v: unknown, at: string): string | null {
  const cell = anyValueToCell(v, at);
  if (cell === null || typeof cell === 'string') return cell;
  return JSON.stringify(cell);
}

/**
 * Writes attributes into a row as columns named by their key verbatim, overwriting what is there (the
 * caller writes resource, then scope, then record attributes, so the most specific wins). Unset values
 * do not override and empty keys are skipped: neither can name or fill a column.
 */
export function putAttributes(row: FlatRow, attrs: unknown, at: string): void {
  const kvs = list(attrs, at);
  for (let i = 0; i < kvs.length; i++) {
    const kv = msg(kvs[i], `${at}[${i}]`);
    if (kv === null) continue;
    const key = str(kv.key, `${at}[${i}].key`);
    if (key === null) continue;
    const value: FlatValue = anyValueToCell(kv.value, `${at}[${i}].value`);
    if (value !== null) row[key] = value;
  }
}
