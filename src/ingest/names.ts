/**
 * What makes any client-chosen name or text storable (docs/ingestion.md "Names and values that cannot be stored
 * as sent"). Everything a client sends is acknowledged only if it can be written to the WAL, read by
 * DuckDB's read_json, flushed to Parquet and queried; these are the few things that break one of them:
 *
 * - a lone UTF-16 surrogate (`"\ud83d"` in JSON): DuckDB's JSON reader rejects the whole WAL segment.
 *   In names and values it becomes U+FFFD (what invalid UTF-8 bytes already become when decoded).
 * - a NUL in a column name ends the SQL text DuckDB parses. Control characters (U+0000–U+001F,
 *   U+007F) are removed from names (they are kept in values, where DuckDB and Parquet store them).
 * - `__proto__` as a name: plain assignment would set the object's prototype instead of a field.
 *
 * Checks run once per distinct name of a batch, or once over a batch's serialised text, never per
 * value: the common case (nothing to fix) costs a regex test per column and one substring search.
 */
import { OVERFLOW, type FlatRow, type FlatValue, type OverflowEntry } from '../model.ts';

// String.prototype.isWellFormed/toWellFormed exist in Node 20 (V8 11.3) but not in the ES2022 lib.
interface WellFormed {
  isWellFormed(): boolean;
  toWellFormed(): string;
}

/** Lone surrogates become U+FFFD; a well-formed string is returned as it is. */
export function wellFormed(s: string): string {
  const w = s as unknown as WellFormed;
  return w.isWellFormed() ? s : w.toWellFormed();
}

const NAME_NEEDS_CLEANING = /[\u0000-\u001f\u007f\ud800-\udfff]/;
const CONTROL = /[\u0000-\u001f\u007f]/g;

/** A name as it can be a column: well-formed, without control characters. */
export function cleanName(name: string): string {
  if (!NAME_NEEDS_CLEANING.test(name)) return name;
  return wellFormed(name).replace(CONTROL, '');
}

/** Sets a field, also one named `__proto__` (which `row[name] = v` would not create). */
export function setField(row: Record<string, unknown>, name: string, value: unknown): void {
  if (name === '__proto__') Object.defineProperty(row, name, { value, enumerable: true, writable: true, configurable: true });
  else row[name] = value;
}

/**
 * A copy of a row. Object.assign keeps V8's fast property layout (a spread copy measured ~20x slower
 * to extend), but it assigns, so an own `__proto__` field is copied by hand.
 */
export function copyRow(src: FlatRow): FlatRow {
  const row: FlatRow = Object.assign({}, src);
  if (Object.hasOwn(src, '__proto__')) setField(row, '__proto__', Object.getOwnPropertyDescriptor(src, '__proto__')!.value);
  if (src[OVERFLOW]) row[OVERFLOW] = [...src[OVERFLOW]];
  return row;
}

/** Puts a field into the row's overflow (see OVERFLOW), for the `p_overflow` column. */
export function addOverflow(row: FlatRow, name: string, value: unknown): void {
  (row[OVERFLOW] ??= []).push([name, value]);
}

/**
 * The `p_overflow` text of a row: a JSON object of the fields that have no column of their own, by
 * name. A name that occurs more than once keeps every value (`name`, `name#2`, …). Names and strings
 * are made well-formed first, so the text is valid for DuckDB's JSON functions.
 */
export function overflowText(entries: OverflowEntry[]): string {
  const out: Record<string, unknown> = {};
  for (const [rawName, value] of entries) {
    const name = wellFormed(rawName);
    let key = name;
    for (let n = 2; Object.hasOwn(out, key); n++) key = `${name}#${n}`;
    setField(out, key, deepWellFormed(value));
  }
  return JSON.stringify(out);
}

function deepWellFormed(value: unknown): unknown {
  if (typeof value === 'string') return wellFormed(value);
  if (Array.isArray(value)) return value.map(deepWellFormed);
  return value;
}

// JSON.stringify writes a lone surrogate as a `\udXXX` escape (lowercase hex) and a paired one as the
// character itself; the escape counts only when its backslash is not itself escaped.
const LONE_SURROGATE_ESCAPE = /(?<!\\)((?:\\\\)*)\\ud[89a-f][0-9a-f]{2}/g;

/**
 * Replaces, in serialised WAL lines, every lone-surrogate escape with U+FFFD. Names are cleaned before
 * serialising, so only values can carry one; doing it on the text costs one substring search per batch
 * instead of a check of every string value.
 */
export function fixLoneSurrogates(lines: string): string {
  if (!lines.includes('\\ud')) return lines;
  return lines.replace(LONE_SURROGATE_ESCAPE, '$1\ufffd');
}

/** Text for a value stored in a VARCHAR column (a number, a boolean, a list). */
export function asText(value: FlatValue): string {
  if (typeof value === 'string') return value;
  return Array.isArray(value) ? JSON.stringify(value) : String(value);
}

/** Columns the service itself fills; a client field of one of these names goes to the overflow column. */
export const SERVICE_COLUMNS = new Set(['p_timestamp', 'p_metadata', 'p_tags', 'p_src_ip', 'p_user_agent', 'p_overflow']);

/** Whether a name is (in any letter case, as SQL sees it) one of SERVICE_COLUMNS. */
export function isServiceName(name: string): boolean {
  // Two character checks first: nearly every name is settled by them.
  return name.length > 2 && (name.charCodeAt(0) | 0x20) === 0x70 && name.charCodeAt(1) === 0x5f && SERVICE_COLUMNS.has(name.toLowerCase());
}
