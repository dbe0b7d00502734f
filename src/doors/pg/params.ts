import { quotedString } from '@duckdb/node-api';
import { invalidInput } from '../../errors.ts';
import { PG } from '../../query/results/pg.ts';

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

function isoFromPgMicros(us: bigint): string {
  const ms = Number(us / 1000n) + PG_EPOCH_MS;
  const rest = Number(((us % 1000n) + 1000n) % 1000n);
  return new Date(ms).toISOString().replace('T', ' ').replace('Z', '') + (rest ? String(rest).padStart(3, '0') : '');
}

/** Binary `numeric` → decimal text. */
function numericText(b: Buffer): string {
  const n = b.readInt16BE(0);
  const weight = b.readInt16BE(2);
  const sign = b.readUInt16BE(4);
  const dscale = b.readInt16BE(6);
  if (sign === 0xc000) return 'NaN';
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
  return `${sign === 0x4000 ? '-' : ''}${int}${frac ? `.${frac}` : ''}`;
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
    case PG.numeric.oid: if (b.length < 8) throw invalidInput('a binary numeric parameter is too short'); return numericText(b);
    case PG.timestamp.oid: size(8); return isoFromPgMicros(micros(b));
    case PG.timestamptz.oid: size(8); return `${isoFromPgMicros(micros(b))}+00`;
    case PG.date.oid: size(4); return new Date((b.readInt32BE(0) + 10_957) * 86_400_000).toISOString().slice(0, 10);
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
    if (/^[+-]?(nan|infinity|inf)$/i.test(t) && (oid === PG.float4.oid || oid === PG.float8.oid || oid === 0)) return `CAST(${quotedString(t)} AS DOUBLE)`;
    if (oid !== 0) throw invalidInput(`parameter value ${JSON.stringify(text.slice(0, 40))} is not a number`);
  }
  const cast = CAST_TO[oid];
  return cast ? `CAST(${quotedString(text)} AS ${cast})` : quotedString(text);
}
