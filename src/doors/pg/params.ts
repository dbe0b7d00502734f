import { quotedString } from '@duckdb/node-api';
import { invalidInput } from '../../errors.ts';
import { PgError } from './sqlstate.ts';
import { PG } from '../../query/results/pgTypes.ts';
import type { BoundParam } from '../../query/sql/boundParams.ts';
import { replacePlaceholders } from '../../query/catalog/sqlText.ts';

/**
 * Bind parameters as SQL literals. A user statement reaches the sandbox and the query worker as text
 * (exactly as over HTTP), so each `$n` becomes a literal of its type: numbers are checked to be numbers
 * and written bare, everything else is a quoted string (cast when its type is known), so no value can
 * change the statement's shape.
 */

const PG_EPOCH_MS = 946_684_800_000;

const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i;

/** DuckDB type names of the PostgreSQL types a parameter may be declared as. */
const CAST_TO: Record<number, string> = {
  [PG.bool.oid]: 'BOOLEAN',
  [PG.date.oid]: 'DATE',
  [PG.time.oid]: 'TIME',
  [PG.timestamp.oid]: 'TIMESTAMP',
  [PG.timestamptz.oid]: 'TIMESTAMPTZ',
  [PG.interval.oid]: 'INTERVAL',
  [PG.uuid.oid]: 'UUID',
  [PG.json.oid]: 'JSON',
  [PG.bytea.oid]: 'BLOB',
};
const NUMERIC_OIDS = new Set([PG.int2.oid, PG.int4.oid, PG.int8.oid, PG.oid.oid, PG.float4.oid, PG.float8.oid, PG.numeric.oid]);

function micros(b: Buffer): bigint {
  return b.readBigInt64BE(0);
}

/** PostgreSQL's infinite timestamps (DT_NOBEGIN, DT_NOEND) and dates (DATEVAL_NOBEGIN, DATEVAL_NOEND). */
const TIMESTAMP_INFINITY = 0x7fffffffffffffffn;
const DATE_INFINITY = 0x7fffffff;

/** 22008 datetime_field_overflow, as PostgreSQL answers a value outside its range. */
const outOfRange = (what: string) => new PgError('invalid', `${what} out of range`, '22008');
/** 22P03 invalid_binary_representation, as PostgreSQL's receive functions answer malformed bytes. */
const malformed = (what: string) => new PgError('invalid', `invalid binary representation of ${what}`, '22P03');

/** The largest |ms| a JavaScript Date holds. */
const MAX_DATE_MS = 8.64e15;

function isoFromPgMicros(us: bigint): string {
  if (us === TIMESTAMP_INFINITY) return 'infinity';
  if (us === -TIMESTAMP_INFINITY - 1n) return '-infinity';
  const ms = Number(us / 1000n) + PG_EPOCH_MS;
  if (Math.abs(ms) > MAX_DATE_MS) throw outOfRange('timestamp');
  const rest = Number(((us % 1000n) + 1000n) % 1000n);
  return new Date(ms).toISOString().replace('T', ' ').replace('Z', '') + (rest ? String(rest).padStart(3, '0') : '');
}

/**
 * Days since 2000-01-01 → `YYYY-MM-DD` (`… (BC)` before year 1), over PostgreSQL's whole date range
 * (4713 BC to 5874897 AD), which a JavaScript Date does not reach (civil-from-days, proleptic Gregorian).
 */
function dateText(days: number): string {
  if (days === DATE_INFINITY) return 'infinity';
  if (days === -DATE_INFINITY - 1) return '-infinity';
  // PostgreSQL's own bounds: Julian day 0 and 5874898-01-01 (exclusive), relative to 2000-01-01.
  if (days < -2_451_545 || days >= 2_147_483_494 - 2_451_545) throw outOfRange('date');
  const z = days + 10_957 + 719_468;
  const era = Math.floor(z / 146_097);
  const doe = z - era * 146_097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36_524) - Math.floor(doe / 146_096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const d = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const m = mp < 10 ? mp + 3 : mp - 9;
  const y = yoe + era * 400 + (m <= 2 ? 1 : 0);
  const pad = (v: number, w: number) => String(v).padStart(w, '0');
  return y > 0 ? `${pad(y, 4)}-${pad(m, 2)}-${pad(d, 2)}` : `${pad(1 - y, 4)}-${pad(m, 2)}-${pad(d, 2)} (BC)`;
}

/** numeric's sign words: positive, negative, NaN, +infinity, -infinity (PostgreSQL 14+). */
const NUMERIC_SIGNS = new Map([
  [0x0000, ''],
  [0x4000, '-'],
  [0xc000, 'NaN'],
  [0xd000, 'Infinity'],
  [0xf000, '-Infinity'],
]);

/** Binary `numeric` → decimal text; malformed bytes are refused as PostgreSQL's numeric_recv refuses them. */
function numericText(b: Buffer): string {
  if (b.length < 8) throw malformed('numeric');
  const n = b.readInt16BE(0);
  const weight = b.readInt16BE(2);
  const sign = b.readUInt16BE(4);
  const dscale = b.readInt16BE(6);
  const signText = NUMERIC_SIGNS.get(sign);
  // A digit count that disagrees with the length, an unknown sign, a negative or flagged scale.
  if (n < 0 || b.length !== 8 + 2 * n || signText === undefined || dscale < 0 || dscale > 0x3fff) throw malformed('numeric');
  for (let i = 0; i < n; i++) {
    const digit = b.readInt16BE(8 + 2 * i);
    if (digit < 0 || digit > 9999) throw malformed('numeric');
  }
  if (sign >= 0xc000) {
    if (n !== 0) throw malformed('numeric');
    return signText;
  }
  let int = '';
  let frac = '';
  for (let i = 0; i < n; i++) {
    const d = String(b.readInt16BE(8 + 2 * i)).padStart(4, '0');
    if (i <= weight) int += d;
    else frac += d;
  }
  if (weight >= n) int += '0000'.repeat(weight - n + 1);
  if (weight < -1) frac = '0000'.repeat(-weight - 1) + frac;
  int = int.replace(/^0+/, '') || '0';
  frac = frac.padEnd(dscale, '0').slice(0, dscale);
  return `${signText}${int}${frac ? `.${frac}` : ''}`;
}

/** A binary-format parameter as text, by its declared type. */
function binaryToText(oid: number, b: Buffer): string {
  const size = (n: number) => {
    if (b.length !== n) throw invalidInput(`a binary parameter of type ${oid} must be ${n} bytes, not ${b.length}`);
  };
  switch (oid) {
    case PG.bool.oid: size(1); return b[0] ? 'true' : 'false';
    case PG.int2.oid: size(2); return String(b.readInt16BE(0));
    case PG.int4.oid:
    case PG.oid.oid: size(4); return String(oid === PG.oid.oid ? b.readUInt32BE(0) : b.readInt32BE(0));
    case PG.int8.oid: size(8); return String(b.readBigInt64BE(0));
    case PG.float4.oid: size(4); return String(b.readFloatBE(0));
    case PG.float8.oid: size(8); return String(b.readDoubleBE(0));
    case PG.numeric.oid: return numericText(b);
    case PG.timestamp.oid: size(8); return isoFromPgMicros(micros(b));
    case PG.timestamptz.oid: size(8); return `${isoFromPgMicros(micros(b))}+00`;
    case PG.date.oid: size(4); return dateText(b.readInt32BE(0));
    case PG.text.oid:
    case PG.varchar.oid:
    case PG.json.oid:
    case 0: return b.toString('utf8');
    case PG.bytea.oid: return `\\x${b.toString('hex')}`;
    default: throw invalidInput(`binary parameters of type ${oid} are not supported; send them as text`);
  }
}

/**
 * The SQL literal of one parameter. `oid` is the type the client declared (0: unspecified, then
 * `inferred`, the DuckDB type the statement gives the placeholder, decides whether a number is bare).
 */
export function parameterLiteral(value: Buffer | null, format: number, oid: number, inferred?: string): string {
  if (value === null) return 'NULL';
  const text = format === 1 ? binaryToText(oid, value) : value.toString('utf8');
  if (text.includes('\0')) throw invalidInput('parameters may not contain NUL characters');
  const numeric = NUMERIC_OIDS.has(oid) || (oid === 0 && inferred !== undefined && /^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|U\w*INT|FLOAT|DOUBLE|DECIMAL)/.test(inferred));
  if (numeric) {
    const t = text.trim();
    if (NUMBER.test(t)) return t;
    if (/^[+-]?(nan|infinity|inf)$/i.test(t) && (oid === PG.float4.oid || oid === PG.float8.oid || oid === PG.numeric.oid || oid === 0)) return `CAST(${quotedString(t)} AS DOUBLE)`;
    if (oid !== 0) throw invalidInput(`parameter value ${JSON.stringify(text.slice(0, 40))} is not a number`);
  }
  const cast = CAST_TO[oid];
  return cast ? `CAST(${quotedString(text)} AS ${cast})` : quotedString(text);
}

/** DuckDB's types of the declared PostgreSQL integer types, and their ranges. */
const INTEGER_TYPES: Record<number, { type: 'SMALLINT' | 'INTEGER' | 'BIGINT' | 'UINTEGER'; name: string; min: bigint; max: bigint }> = {
  [PG.int2.oid]: { type: 'SMALLINT', name: 'smallint', min: -(2n ** 15n), max: 2n ** 15n - 1n },
  [PG.int4.oid]: { type: 'INTEGER', name: 'integer', min: -(2n ** 31n), max: 2n ** 31n - 1n },
  [PG.int8.oid]: { type: 'BIGINT', name: 'bigint', min: -(2n ** 63n), max: 2n ** 63n - 1n },
  [PG.oid.oid]: { type: 'UINTEGER', name: 'oid', min: 0n, max: 2n ** 32n - 1n },
};

/** boolin's words (PostgreSQL accepts these, case-insensitively, around spaces). */
const BOOL_WORDS: Record<string, boolean> = { t: true, true: true, y: true, yes: true, on: true, 1: true, f: false, false: false, n: false, no: false, off: false, 0: false };

/** 22P02 invalid_text_representation, as PostgreSQL's input functions answer text they cannot read. */
const badText = (type: string, text: string) => new PgError('invalid', `invalid input syntax for type ${type}: ${JSON.stringify(text.slice(0, 40))}`, '22P02');

/** A float's text: a number, or NaN and the infinities in the spellings PostgreSQL's float input reads. */
function floatText(text: string, type: string): string {
  const t = text.trim();
  if (NUMBER.test(t)) return t;
  const special = /^([+-]?)(nan|inf|infinity)$/i.exec(t);
  if (!special) throw badText(type, text);
  if (special[2].toLowerCase() === 'nan') return 'NaN';
  return `${special[1] === '-' ? '-' : ''}Infinity`;
}

/** A `bytea` in PostgreSQL's hex text form (`\x…`) as bytes; undefined for the escape form. */
function hexBytes(text: string): Buffer | undefined {
  if (!text.startsWith('\\x')) return undefined;
  const hex = text.slice(2).replace(/\s+/g, '');
  if (hex.length % 2 || !/^[0-9a-f]*$/i.test(hex)) throw badText('bytea', text);
  return Buffer.from(hex, 'hex');
}

/** PostgreSQL's ±infinity timestamps as DuckDB's (whose -infinity is -(2^63 - 1), not -2^63). */
function duckMicros(pgUs: bigint): bigint {
  if (pgUs === TIMESTAMP_INFINITY) return TIMESTAMP_INFINITY;
  if (pgUs === -TIMESTAMP_INFINITY - 1n) return -TIMESTAMP_INFINITY;
  return pgUs + BigInt(PG_EPOCH_MS) * 1000n;
}

/** `2026-01-02 03:04:05.678901+02[:30]` (also with `T`, `Z`, no seconds or no offset: UTC, the sessions' zone). */
const TIMESTAMPTZ_TEXT = /^(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d)(?::(\d\d)(?:\.(\d{1,6}))?)?\s*(?:(Z)|([+-])(\d\d)(?::?(\d\d))?(?::?(\d\d))?)?$/i;

/**
 * A timestamptz's text as microseconds since 1970 (its offset applied), or undefined for any other
 * form (`infinity`, `epoch`, BC dates, zone names: left to DuckDB's cast) and for a day or time that does
 * not exist (refused by that cast too).
 */
function timestamptzMicros(text: string): bigint | undefined {
  const m = TIMESTAMPTZ_TEXT.exec(text.trim());
  if (!m) return undefined;
  const [y, mo, d, h, mi, sec] = [1, 2, 3, 4, 5, 6].map((i) => Number(m[i] ?? 0));
  const ms = Date.UTC(y, mo - 1, d, h, mi, sec);
  const back = new Date(ms);
  if (y < 100 || back.getUTCDate() !== d || back.getUTCMonth() !== mo - 1 || h > 23 || mi > 59 || sec > 59) return undefined;
  const offset = m[9] ? (m[9] === '-' ? -1 : 1) * (Number(m[10]) * 3600 + Number(m[11] ?? 0) * 60 + Number(m[12] ?? 0)) : 0;
  return BigInt(ms) * 1000n + BigInt((m[7] ?? '').padEnd(6, '0')) - BigInt(offset) * 1_000_000n;
}

/** A timestamp parameter: bound as its instant where exact; else its text, cast by DuckDB. */
function timestampParam(value: Buffer, format: number, oid: number, utc: boolean): BoundParam | undefined {
  if (oid !== PG.timestamptz.oid && !(oid === PG.timestamp.oid && format === 1)) return undefined;
  if (format === 1 && value.length !== 8) throw invalidInput(`a binary parameter of type ${oid} must be 8 bytes, not ${value.length}`);
  const us = format === 1 ? duckMicros(value.readBigInt64BE(0)) : timestamptzMicros(value.toString('utf8'));
  if (us === undefined) return undefined;
  // A timestamptz compared with a nanosecond time column: its UTC wall-clock time (catalogRewrite.ts).
  return { type: oid === PG.timestamp.oid || utc ? 'TIMESTAMP' : 'TIMESTAMPTZ', text: String(us) };
}

/**
 * One parameter of a Bind as the value DuckDB binds to the statement's placeholder (issue 35: the
 * statement is not parsed again with the value in it). `oid` is the type the client declared (0:
 * unspecified). A declared integer, float or boolean is checked and bound with that type; bytes as
 * bytes; a timestamptz as its instant (`utc`: as its UTC wall-clock time, see catalogRewrite.ts); everything else as its PostgreSQL text, which DuckDB casts to the type the statement gives the
 * placeholder (as it casts a string literal there). Malformed values are refused as PostgreSQL refuses them.
 */
export function boundParam(value: Buffer | null, format: number, oid: number, utc = false): BoundParam {
  if (value === null) return null;
  if (oid === PG.bytea.oid && format === 1) return { type: 'BLOB', text: value.toString('hex') };
  const time = timestampParam(value, format, oid, utc);
  if (time) return time;
  const text = format === 1 ? binaryToText(oid, value) : value.toString('utf8');
  if (text.includes('\0')) throw invalidInput('parameters may not contain NUL characters');
  const int = INTEGER_TYPES[oid];
  if (int) {
    const t = text.trim();
    if (!/^[+-]?\d+$/.test(t)) throw badText(int.name, text);
    const n = BigInt(t);
    if (n < int.min || n > int.max) throw new PgError('invalid', `value "${t}" is out of range for type ${int.name}`, '22003');
    return { type: int.type, text: String(n) };
  }
  if (oid === PG.float4.oid) return { type: 'FLOAT', text: floatText(text, 'real') };
  if (oid === PG.float8.oid) return { type: 'DOUBLE', text: floatText(text, 'double precision') };
  if (oid === PG.numeric.oid) return { type: 'VARCHAR', text: floatText(text, 'numeric') };
  if (oid === PG.bool.oid) {
    const b = BOOL_WORDS[text.trim().toLowerCase()];
    if (b === undefined) throw badText('boolean', text);
    return { type: 'BOOLEAN', text: String(b) };
  }
  const bytes = oid === PG.bytea.oid ? hexBytes(text) : undefined;
  return bytes ? { type: 'BLOB', text: bytes.toString('hex') } : { type: 'VARCHAR', text };
}

/** PostgreSQL's `unknown` type: a parameter declared so has no type either. */
const UNKNOWN_OID = 705;

/**
 * A statement whose placeholders skip a number (`$1` and `$3`, no `$2`), as DuckDB can bind it: DuckDB
 * numbers the placeholders it found 1…k and cannot bind `$3` of such a statement, so they are renumbered
 * once, on the template (`$1`, `$2`), and `positions` says which parameter of the Bind each one takes
 * (`[1, 3]`). As PostgreSQL's Parse does (exec_parse_message), a parameter the statement does not use
 * (skipped, or declared past its highest `$n`) whose type the client left unspecified is refused: 42P18
 * "could not determine data type of parameter $2" (checked with psycopg's libpq against PostgreSQL 15).
 * Without a gap the statement comes back as it is. `highest` is the highest `$n` of the template (0 when it
 * has none), which Parse also needs: one scan of the placeholders answers both.
 */
export function withoutGaps(sql: string, paramTypes: readonly number[]): { sql: string; highest: number; positions?: number[] } {
  const used = new Set<number>();
  replacePlaceholders(sql, (n) => {
    used.add(n);
    return '';
  });
  const positions = [...used].sort((a, b) => a - b);
  const highest = positions[positions.length - 1] ?? 0;
  // Also a declared parameter past the highest `$n` (PostgreSQL 15 via psycopg's libpq: the same error).
  for (let n = 1; n <= Math.max(highest, paramTypes.length); n++) {
    const declared = paramTypes[n - 1] ?? 0;
    if (!used.has(n) && (declared === 0 || declared === UNKNOWN_OID)) throw new PgError('invalid', `could not determine data type of parameter $${n}`, '42P18');
  }
  if (highest === positions.length) return { sql, highest };
  return { sql: replacePlaceholders(sql, (n) => `$${positions.indexOf(n) + 1}`), highest, positions };
}
