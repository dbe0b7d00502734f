import {
  DuckDBTypeId,
  type DuckDBBlobValue,
  type DuckDBDateValue,
  type DuckDBDecimalValue,
  type DuckDBIntervalValue,
  type DuckDBListValue,
  type DuckDBTimestampNanosecondsValue,
  type DuckDBTimestampValue,
  type DuckDBType,
  type DuckDBValue,
} from '@duckdb/node-api';
import { PG, pgTypeOf, T, type PgType } from './pgTypes.ts';

/**
 * Query results in PostgreSQL's wire format: each DuckDB column type's PostgreSQL type (pgTypes.ts),
 * and DataRow messages in text or binary format per column. Used by the query worker, which encodes
 * the rows itself so the service only copies bytes to the socket.
 *
 * Types without a PostgreSQL counterpart (STRUCT, MAP, UNION, nested lists, …) travel as `text` in
 * DuckDB's own notation. Unsigned 64-bit and wider integers are `numeric` (no PostgreSQL integer holds
 * them); TINYINT is `int2` (PostgreSQL has no 1-byte integer).
 */

/** Types a catalog answer's column may be announced as beyond its DuckDB type's (query/catalog/pgColumnTypes.ts). */
const CATALOG_TYPES: Readonly<Record<string, PgType>> = { name: T(19, 64, 'name'), char: T(18, 1, 'char'), oid: PG.oid, int2: PG.int2, text: PG.text, varchar: PG.varchar };
const INTEGER_TYPES = new Set([
  DuckDBTypeId.TINYINT, DuckDBTypeId.SMALLINT, DuckDBTypeId.INTEGER, DuckDBTypeId.BIGINT, DuckDBTypeId.UTINYINT, DuckDBTypeId.USMALLINT, DuckDBTypeId.UINTEGER, DuckDBTypeId.UBIGINT,
]);

/**
 * A catalog column's PostgreSQL type: `as` (PostgreSQL 15's type of the catalog column it selects:
 * name, "char", oid, int2, varchar; text for an untyped NULL) when its values fit that type, else its own.
 */
export function announcedAs(type: DuckDBType, as: string | undefined): PgType {
  const want = as ? CATALOG_TYPES[as] : undefined;
  if (!want) return pgTypeOf(type);
  if (want === PG.text) return want;
  const fits = want === PG.oid || want === PG.int2 ? INTEGER_TYPES.has(type.typeId) : type.typeId === DuckDBTypeId.VARCHAR;
  return fits ? want : pgTypeOf(type);
}

/** The binary encoder of a column announced as a catalog type rather than its DuckDB type's (announcedAs). */
function announcedBinary(type: DuckDBType, as: PgType): BinaryEncoder | undefined {
  if (as === pgTypeOf(type)) return undefined;
  if (as === PG.oid) return (w, v) => { w.int32(4); w.int32(Number(v) | 0); };
  if (as === PG.int2) return (w, v) => { w.int32(2); w.int16(Number(v)); };
  const text = textEncoder(type);
  return (w, v) => w.lenString(text(v));
}

/** Growable output buffer for DataRow messages. */
export class RowWriter {
  buf: Buffer;
  pos = 0;
  constructor(size = 64 * 1024) {
    this.buf = Buffer.allocUnsafe(size);
  }
  ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + n));
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }
  byte(v: number): void {
    this.ensure(1);
    this.buf[this.pos++] = v;
  }
  int16(v: number): void {
    this.ensure(2);
    this.buf.writeInt16BE(v, this.pos);
    this.pos += 2;
  }
  int32(v: number): void {
    this.ensure(4);
    this.buf.writeInt32BE(v, this.pos);
    this.pos += 4;
  }
  int64(v: bigint): void {
    this.ensure(8);
    this.buf.writeBigInt64BE(v, this.pos);
    this.pos += 8;
  }
  float32(v: number): void {
    this.ensure(4);
    this.buf.writeFloatBE(v, this.pos);
    this.pos += 4;
  }
  float64(v: number): void {
    this.ensure(8);
    this.buf.writeDoubleBE(v, this.pos);
    this.pos += 8;
  }
  /** A length-prefixed UTF-8 string. */
  lenString(s: string): void {
    const max = s.length * 3;
    this.ensure(4 + max);
    const n = this.buf.write(s, this.pos + 4, 'utf8');
    this.buf.writeInt32BE(n, this.pos);
    this.pos += 4 + n;
  }
  bytes(b: Uint8Array): void {
    this.ensure(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }
  /** Reserves an int32 to fill in later; returns its position. */
  hole(): number {
    this.ensure(4);
    this.pos += 4;
    return this.pos - 4;
  }
  fill(at: number, value: number): void {
    this.buf.writeInt32BE(value, at);
  }
  take(): Buffer {
    const out = Buffer.from(this.buf.subarray(0, this.pos));
    this.pos = 0;
    return out;
  }
}

// ---- text format ----

const PG_EPOCH_MICROS = 946_684_800_000_000n;
const PG_EPOCH_DAYS = 10_957;

const pad = (n: number, w = 2) => String(n).padStart(w, '0');

/** `YYYY-MM-DD HH:MM:SS[.ffffff]` (fraction without trailing zeros), as PostgreSQL prints a timestamp. */
export function timestampText(micros: bigint): string | undefined {
  let secs = micros / 1_000_000n;
  let frac = micros % 1_000_000n;
  if (frac < 0n) {
    frac += 1_000_000n;
    secs -= 1n;
  }
  const ms = Number(secs) * 1000;
  if (!Number.isFinite(ms) || Math.abs(ms) > 8.64e15) return undefined;
  const d = new Date(ms);
  const year = d.getUTCFullYear();
  if (year < 1 || year > 9999) return undefined;
  let out = `${pad(year, 4)}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;
  if (frac !== 0n) out += `.${String(frac).padStart(6, '0').replace(/0+$/, '')}`;
  return out;
}

function dateText(days: number): string | undefined {
  const d = new Date(days * 86_400_000);
  const year = d.getUTCFullYear();
  if (!Number.isFinite(d.getTime()) || year < 1 || year > 9999) return undefined;
  return `${pad(year, 4)}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}`;
}

function floatText(n: number): string {
  if (Number.isNaN(n)) return 'NaN';
  if (n === Infinity) return 'Infinity';
  if (n === -Infinity) return '-Infinity';
  return String(n);
}

const INFINITE_TS = (v: { isFinite: boolean; micros?: bigint }) => (v.micros !== undefined && v.micros > 0n ? 'infinity' : '-infinity');

/** A value in PostgreSQL's text format for the column's PostgreSQL type (null handled by the caller). */
type TextEncoder = (v: DuckDBValue) => string;

function textEncoder(type: DuckDBType): TextEncoder {
  const pg = pgTypeOf(type);
  if (type.typeId === DuckDBTypeId.LIST && pg !== PG.text) {
    const item = textEncoder((type as DuckDBType & { valueType: DuckDBType }).valueType);
    return (v) => `{${(v as DuckDBListValue).items.map((x) => (x === null ? 'NULL' : arrayElement(item(x)))).join(',')}}`;
  }
  switch (pg) {
    case PG.bool: return (v) => (v ? 't' : 'f');
    case PG.float4:
    case PG.float8: return (v) => floatText(v as number);
    case PG.timestamp:
      if (type.typeId === DuckDBTypeId.TIMESTAMP_NS) {
        return (v) => {
          const t = v as DuckDBTimestampNanosecondsValue;
          return t.isFinite ? (timestampText(t.nanos / 1000n) ?? String(v)) : INFINITE_TS({ isFinite: false, micros: t.nanos });
        };
      }
      if (type.typeId !== DuckDBTypeId.TIMESTAMP) return (v) => String(v);
      return (v) => {
        const t = v as DuckDBTimestampValue;
        return t.isFinite ? (timestampText(t.micros) ?? String(v)) : INFINITE_TS(t);
      };
    case PG.timestamptz:
      return (v) => {
        const t = v as DuckDBTimestampValue;
        if (!t.isFinite) return INFINITE_TS(t);
        const s = timestampText(t.micros);
        return s === undefined ? String(v) : `${s}+00`;
      };
    case PG.date: return (v) => dateText((v as DuckDBDateValue).days) ?? String(v);
    case PG.bytea: return (v) => `\\x${Buffer.from((v as DuckDBBlobValue).bytes).toString('hex')}`;
    case PG.text:
    case PG.json: return type.typeId === DuckDBTypeId.VARCHAR ? (v) => v as string : (v) => String(v);
    default: return (v) => String(v);
  }
}

/** An array element in PostgreSQL's array literal syntax: quoted when it must be. */
function arrayElement(s: string): string {
  if (s === '' || /^null$/i.test(s) || /[{},"\\\s]/.test(s)) return `"${s.replace(/[\\"]/g, '\\$&')}"`;
  return s;
}

// ---- binary format ----

type BinaryEncoder = (w: RowWriter, v: DuckDBValue) => void;

/** `numeric` in PostgreSQL's binary layout from a decimal string (`-12.340`). */
export function writeNumeric(w: RowWriter, text: string): void {
  const m = /^(-)?(\d*)(?:\.(\d*))?$/.exec(text);
  if (!m) {
    // NaN (DuckDB has no numeric NaN; kept for completeness of the layout).
    w.int32(8);
    w.int16(0); w.int16(0); w.int16(0xc000 - 0x10000); w.int16(0);
    return;
  }
  const negative = m[1] === '-';
  const intPart = (m[2] ?? '').replace(/^0+/, '');
  const frac = m[3] ?? '';
  const dscale = frac.length;
  const intPadded = intPart.padStart(Math.ceil(intPart.length / 4) * 4, '0');
  const fracPadded = frac.padEnd(Math.ceil(frac.length / 4) * 4, '0');
  const groups: number[] = [];
  for (let i = 0; i < intPadded.length; i += 4) groups.push(Number(intPadded.slice(i, i + 4)));
  for (let i = 0; i < fracPadded.length; i += 4) groups.push(Number(fracPadded.slice(i, i + 4)));
  let weight = intPadded.length / 4 - 1;
  while (groups.length && groups[0] === 0) {
    groups.shift();
    weight--;
  }
  while (groups.length && groups[groups.length - 1] === 0) groups.pop();
  if (!groups.length) weight = 0;
  w.int32(8 + groups.length * 2);
  w.int16(groups.length);
  w.int16(weight);
  w.int16(negative && groups.length ? 0x4000 : 0);
  w.int16(dscale);
  for (const g of groups) w.int16(g);
}

function binaryEncoder(type: DuckDBType): BinaryEncoder {
  const pg = pgTypeOf(type);
  if (type.typeId === DuckDBTypeId.LIST && pg !== PG.text) {
    const itemType = (type as DuckDBType & { valueType: DuckDBType }).valueType;
    const item = binaryEncoder(itemType);
    const elemOid = pgTypeOf(itemType).oid;
    return (w, v) => {
      const items = (v as DuckDBListValue).items;
      const at = w.hole();
      const start = w.pos;
      w.int32(1); // dimensions
      w.int32(items.some((x) => x === null) ? 1 : 0);
      w.int32(elemOid);
      w.int32(items.length);
      w.int32(1); // lower bound
      for (const x of items) {
        if (x === null) w.int32(-1);
        else item(w, x);
      }
      w.fill(at, w.pos - start);
    };
  }
  const text = textEncoder(type);
  switch (pg) {
    case PG.bool: return (w, v) => { w.int32(1); w.byte(v ? 1 : 0); };
    case PG.int2: return (w, v) => { w.int32(2); w.int16(v as number); };
    case PG.int4: return (w, v) => { w.int32(4); w.int32(v as number); };
    case PG.int8: return (w, v) => { w.int32(8); w.int64(BigInt(v as number | bigint)); };
    case PG.float4: return (w, v) => { w.int32(4); w.float32(v as number); };
    case PG.float8: return (w, v) => { w.int32(8); w.float64(v as number); };
    case PG.numeric: return (w, v) => writeNumeric(w, type.typeId === DuckDBTypeId.DECIMAL ? (v as DuckDBDecimalValue).toString() : String(v));
    case PG.timestamp:
    case PG.timestamptz: {
      const micros =
        type.typeId === DuckDBTypeId.TIMESTAMP_NS ? (v: DuckDBValue) => (v as DuckDBTimestampNanosecondsValue).nanos / 1000n
        : type.typeId === DuckDBTypeId.TIMESTAMP_MS ? (v: DuckDBValue) => (v as unknown as { millis: bigint }).millis * 1000n
        : type.typeId === DuckDBTypeId.TIMESTAMP_S ? (v: DuckDBValue) => (v as unknown as { seconds: bigint }).seconds * 1_000_000n
        : (v: DuckDBValue) => (v as DuckDBTimestampValue).micros;
      return (w, v) => {
        w.int32(8);
        const t = v as DuckDBTimestampValue;
        // PostgreSQL's infinities are the int64 extremes.
        if (!t.isFinite) w.int64(micros(v) > 0n ? 0x7fffffffffffffffn : -0x8000000000000000n);
        else w.int64(micros(v) - PG_EPOCH_MICROS);
      };
    }
    case PG.date: return (w, v) => { w.int32(4); w.int32((v as DuckDBDateValue).days - PG_EPOCH_DAYS); };
    case PG.time: return (w, v) => { w.int32(8); w.int64((v as unknown as { micros: bigint }).micros); };
    case PG.interval:
      return (w, v) => {
        const i = v as DuckDBIntervalValue;
        w.int32(16);
        w.int64(i.micros);
        w.int32(i.days);
        w.int32(i.months);
      };
    case PG.uuid: return (w, v) => { w.int32(16); w.bytes(Buffer.from(String(v).replaceAll('-', ''), 'hex')); };
    case PG.bytea: return (w, v) => { const b = (v as DuckDBBlobValue).bytes; w.int32(b.length); w.bytes(b); };
    default: return (w, v) => w.lenString(text(v));
  }
}

/**
 * Encodes rows as DataRow messages, each column in the format the client asked for (0 text,
 * 1 binary; one code for all columns, or one per column, or none for all text — as in Bind), and in
 * binary as the type it is announced as (`announced`, catalog answers) where that is not its own.
 */
export function dataRowEncoder(types: DuckDBType[], formats: number[], announced: PgType[] = []): (w: RowWriter, row: DuckDBValue[]) => void {
  const encoders = types.map((t, i) => {
    const f = formats.length === 0 ? 0 : formats.length === 1 ? formats[0] : formats[i];
    if (f === 1) return (announced[i] && announcedBinary(t, announced[i])) || binaryEncoder(t);
    const text = textEncoder(t);
    return (w: RowWriter, v: DuckDBValue) => w.lenString(text(v));
  });
  const n = types.length;
  return (w, row) => {
    w.byte(0x44); // 'D'
    const at = w.hole();
    const start = at;
    w.int16(n);
    for (let i = 0; i < n; i++) {
      const v = row[i];
      if (v === null || v === undefined) w.int32(-1);
      else encoders[i](w, v);
    }
    w.fill(at, w.pos - start);
  };
}
