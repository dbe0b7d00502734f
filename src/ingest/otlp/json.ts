import { badRequest } from '../../http/errors.ts';
import type { Msg } from './values.ts';

/**
 * A JSON string, or an integer literal of 16+ digits not preceded by a character that would make it
 * part of a larger number (the fraction or exponent of a double).
 */
const STRING_OR_LONG_INT = /"[^"\\]*(?:\\.[^"\\]*)*"|(?<![\w.+-])-?\d{16,}(?![.\deE])/g;
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * OTLP/JSON allows 64-bit integers as bare numbers, which JSON.parse would round to a double (a
 * nanosecond timestamp is ~1.8e18). Such literals are quoted before parsing; every integer reader
 * accepts decimal text, and double readers do too.
 */
function quoteUnsafeIntegers(text: string): string {
  if (!/\d{16}/.test(text)) return text;
  return text.replace(STRING_OR_LONG_INT, (token) => {
    if (token.charCodeAt(0) === 0x22 /* " */) return token;
    const n = BigInt(token);
    return n > MAX_SAFE || n < -MAX_SAFE ? `"${token}"` : token;
  });
}

const SNAKE_KEY = /"[A-Za-z0-9]+_[A-Za-z0-9_]*"\s*:/;

/** snake_case → lowerCamelCase, as the protobuf JSON mapping derives field names. */
const camel = (key: string) => key.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());

/**
 * OTLP/JSON keys are lowerCamelCase; some clients send the proto field names. Every object key in an
 * OTLP payload is a field name (attribute keys are values), so renaming all of them is safe. Only runs
 * when the text has a key with an underscore.
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
    throw badRequest(`request body is not valid JSON: ${(err as Error).message}`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw badRequest('OTLP/JSON request body must be a JSON object');
  }
  return (SNAKE_KEY.test(text) ? camelKeys(parsed) : parsed) as Msg;
}
