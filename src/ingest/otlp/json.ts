import type { Msg } from './values.ts';
import { invalidInput } from '../../errors.ts';

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
// Not right after a digit (within a run) or a quote (a run that opens a string: the usual 64-bit int
// sent as a string, two per log record, which the loop below would only skip).
const LONG_INT = /(?<![\d"])-?\d{16,}/g;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** Whether the character before an integer literal makes it part of something else (a string is handled apart). */
const continuesToken = (c: number) =>
  (c >= 0x30 && c <= 0x39) || c === 0x2e /* . */ || c === 0x2b /* + */ || c === 0x2d /* - */ || c === 0x65 /* e */ || c === 0x45; /* E */

/**
 * OTLP/JSON allows 64-bit integers as bare numbers, which JSON.parse would round to a double (a
 * nanosecond timestamp is ~1.8e18). Such literals are quoted before parsing; every integer reader
 * accepts decimal text, and so does every double reader.
 *
 * Only digit runs of 16+ characters are candidates. Whether one is inside a string is tracked by
 * jumping from quote to quote (a quote preceded by an odd number of backslashes is escaped), so the
 * text is scanned once with indexOf rather than a regex that could backtrack through long strings.
 */
function quoteUnsafeIntegers(text: string): string {
  LONG_INT.lastIndex = 0;
  let out = '';
  let copied = 0;
  let scanned = 0;
  let inString = false;
  for (let m = LONG_INT.exec(text); m !== null; m = LONG_INT.exec(text)) {
    // Digits right after a quote open a string (after a closing quote they would be invalid JSON):
    // the usual case, 64-bit ints sent as strings, skips the quote scan entirely.
    if (m.index > 0 && text.charCodeAt(m.index - 1) === QUOTE) continue;
    for (let q = text.indexOf('"', scanned); q !== -1 && q < m.index; q = text.indexOf('"', q + 1)) {
      if (inString) {
        let backslashes = 0;
        while (text.charCodeAt(q - 1 - backslashes) === BACKSLASH) backslashes++;
        if (backslashes % 2 === 1) continue;
      }
      inString = !inString;
      scanned = q + 1;
    }
    scanned = Math.max(scanned, m.index);
    if (inString) continue;
    const end = m.index + m[0].length;
    if (m.index > 0 && continuesToken(text.charCodeAt(m.index - 1))) continue;
    const next = text.charCodeAt(end);
    if (next === 0x2e || next === 0x65 || next === 0x45) continue; // a double's integer part
    const n = BigInt(m[0]);
    if (n <= MAX_SAFE && n >= -MAX_SAFE) continue;
    out += `${text.slice(copied, m.index)}"${m[0]}"`;
    copied = end;
  }
  return copied === 0 ? text : out + text.slice(copied);
}

/** snake_case → lowerCamelCase, as the protobuf JSON mapping derives field names. */
const camel = (key: string) => key.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());

/**
 * OTLP/JSON keys are lowerCamelCase; some clients send the proto field names. Every object key in an
 * OTLP payload is a field name (attribute keys are values), so renaming all of them is safe.
 */
function camelKeys(value: unknown): unknown {
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = camelKeys(value[i]);
    return value;
  }
  if (value === null || typeof value !== 'object') return value;
  const obj = value as Msg;
  for (const key of Object.keys(obj)) {
    // Assigning "__proto__" would set the prototype; no OTLP field has that name, so leave it alone.
    if (key === '__proto__') continue;
    const v = camelKeys(obj[key]);
    if (key.includes('_')) {
      const name = camel(key);
      delete obj[key];
      // The camelCase spelling wins if a client sent both.
      if (!Object.hasOwn(obj, name)) obj[name] = v;
    } else obj[key] = v;
  }
  return obj;
}

/** Parses an OTLP/JSON request body into a plain object. */
export function parseOtlpJson(body: Buffer): Msg {
  let text = body.toString('utf8');
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  let parsed: unknown;
  try {
    parsed = JSON.parse(quoteUnsafeIntegers(text));
  } catch (err) {
    throw invalidInput(`request body is not valid JSON: ${(err as Error).message}`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw invalidInput('OTLP/JSON request body must be a JSON object');
  }
  // A client that writes proto field names writes them everywhere, starting with resource_logs etc.;
  // checking the top level spares camelCase requests (nearly all) a walk over the whole tree.
  const snake = Object.keys(parsed).some((key) => key.includes('_'));
  return (snake ? camelKeys(parsed) : parsed) as Msg;
}
