import { checkFieldCount } from '../limits.ts';
import { addOverflow, isServiceName, setField } from '../names.ts';
import type { FlatRow } from '../../model.ts';
import { bool, bytes, dbl, hex, i64Exact, invalid, list, msg, path, str, wellFormed, type Field, type Msg } from './values.ts';

/** AnyValue nesting beyond this is a 400: it only ever comes from a broken or hostile client. */
const MAX_DEPTH = 32;

type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

const set = (v: unknown) => v !== null && v !== undefined;

/**
 * An AnyValue's scalar member (string, bool, int, double, bytes) as a cell value; `undefined` when it
 * holds an array or map. The first set member wins, as in a protobuf decoder. `at`/`field` locate the
 * AnyValue (or the KeyValue holding it) for error messages.
 */
function scalar(m: Msg, at: string, field: Field): string | number | boolean | null | undefined {
  const s = m.stringValue;
  if (typeof s === 'string') return wellFormed(s);
  if (set(s)) throw invalid(at, field, 'stringValue: expected a string');
  if (set(m.boolValue)) return bool(m.boolValue, at, field);
  // An int64 outside the exact range of a JS number is kept as its decimal text.
  if (set(m.intValue)) return i64Exact(m.intValue, at, field);
  if (set(m.doubleValue)) return dbl(m.doubleValue, at, field);
  if (set(m.arrayValue) || set(m.kvlistValue)) return undefined;
  if (set(m.bytesValue)) return hex(bytes(m.bytesValue, at, field)!);
  return null;
}

/** An AnyValue as a plain JSON value (nested arrays/maps stay nested; bytes are hex). */
export function anyValueToJson(v: unknown, at: string, field: Field, depth: number): Json {
  const m = msg(v, at, field);
  if (m === null) return null;
  const s = scalar(m, at, field);
  if (s !== undefined) return s;
  if (depth >= MAX_DEPTH) throw invalid(at, field, `AnyValue nesting is deeper than ${MAX_DEPTH} levels`);
  const here = path(at, field);
  if (set(m.arrayValue)) {
    const values = list(msg(m.arrayValue, here, 'arrayValue')!.values, `${here}.arrayValue`, 'values');
    return values.map((item, i) => anyValueToJson(item, `${here}.arrayValue.values`, i, depth + 1));
  }
  const values = list(msg(m.kvlistValue, here, 'kvlistValue')!.values, `${here}.kvlistValue`, 'values');
  return keyValuesToObject(values, `${here}.kvlistValue.values`, depth + 1);
}

/** A KeyValue list as a JSON object (later duplicates of a key win). */
function keyValuesToObject(kvs: unknown[], at: string, depth: number): { [key: string]: Json } {
  // No prototype, so a "__proto__" key is stored like any other instead of setting the prototype.
  const out: { [key: string]: Json } = Object.create(null);
  for (let i = 0; i < kvs.length; i++) {
    const kv = msg(kvs[i], at, i);
    if (kv === null) continue;
    const key = str(kv.key, at, i);
    if (key === null) continue;
    out[key] = anyValueToJson(kv.value, `${at}[${i}]`, 'value', depth);
  }
  return out;
}

/** The attributes of an event, link or exemplar (or a metric's metadata), as a JSON object. */
export function attributesObject(attrs: unknown, at: string, field: string): { [key: string]: Json } {
  return keyValuesToObject(list(attrs, at, field), `${at}.${field}`, 0);
}

/**
 * An AnyValue as one cell: scalars keep their type (int64 outside the safe range becomes text, bytes
 * become hex) and arrays/maps become JSON text, because their elements may mix types.
 */
export function anyValueToCell(v: unknown, at: string, field: Field): string | number | boolean | null {
  const m = msg(v, at, field);
  if (m === null) return null;
  const s = scalar(m, at, field);
  if (s !== undefined) return s;
  return JSON.stringify(anyValueToJson(m, at, field, 0));
}

/** A log body: a string as is, bytes as hex, any other kind as JSON text. */
export function bodyCell(v: unknown, at: string, field: Field): string | null {
  const cell = anyValueToCell(v, at, field);
  if (cell === null || typeof cell === 'string') return cell;
  return JSON.stringify(cell);
}

/**
 * Writes attributes into a row as columns named by their key verbatim, overwriting what is there (the
 * caller writes resource, then scope, then record attributes, so the most specific wins). Unset values
 * do not override. A key named like a column the service adds (`p_timestamp`, …) goes to the row's
 * overflow (`p_overflow`), and so does an empty key: neither can name a column, and neither is dropped.
 */
export function putAttributes(row: FlatRow, attrs: unknown, at: string, field: string): void {
  if (attrs === null || attrs === undefined) return;
  const kvs = list(attrs, at, field);
  if (kvs.length === 0) return;
  checkFieldCount(kvs.length);
  const listAt = `${at}.${field}`;
  for (let i = 0; i < kvs.length; i++) {
    const kv = msg(kvs[i], listAt, i);
    if (kv === null) continue;
    const key = kv.key;
    if (typeof key !== 'string') {
      if (set(key)) throw invalid(`${listAt}[${i}]`, 'key', 'expected a string');
      continue;
    }
    // A bad value is reported at its KeyValue (attributes[i]), which saves a path string per attribute.
    const value = anyValueToCell(kv.value, listAt, i);
    if (value === null) continue;
    if (key === '' || isServiceName(key)) addOverflow(row, key, value);
    else setField(row, key, value);
  }
}
