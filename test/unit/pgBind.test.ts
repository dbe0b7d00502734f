import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { boundParam } from '../../src/doors/pg/params.ts';
import { bindParams, type BoundParam } from '../../src/query/sql/boundParams.ts';
import { parseTree } from '../../src/query/sql/parseTree.ts';
import { timeRangeOf, WHOLE_RANGE } from '../../src/query/sql/timeRange.ts';

/**
 * A PostgreSQL Bind's values bound by DuckDB to the statement's placeholders (issue 35: the checked
 * template runs, the values never become SQL text). Each case binds one value (text or binary format,
 * a declared type or none) into a statement that gives the placeholder a type (or none), runs it in a
 * real DuckDB, and compares the answer with the value computed here independently (JavaScript's own
 * reading of the same value), never with what the code under test returns elsewhere.
 */

let db: DuckDBInstance;
let conn: DuckDBConnection;
beforeAll(async () => {
  db = await DuckDBInstance.create(':memory:');
  conn = await db.connect();
  await conn.run("SET TimeZone = 'UTC'");
});
afterAll(() => {
  conn?.closeSync();
  db?.closeSync();
});

/** Runs `sql` with `params` bound (as the query worker does) and returns the first row's `v` as JSON. */
async function run(sql: string, params: BoundParam[]): Promise<unknown> {
  const prepared = await conn.prepare(sql);
  try {
    bindParams(prepared, params);
    return (await prepared.runAndReadAll()).getRowObjectsJson()[0].v;
  } finally {
    prepared.destroySync();
  }
}

const OID = { bool: 16, bytea: 17, int8: 20, int2: 21, int4: 23, text: 25, float4: 700, float8: 701, timestamp: 1114, timestamptz: 1184, date: 1082, numeric: 1700, unknown: 0 };
const text = (s: string) => Buffer.from(s, 'utf8');
const be = (bytes: number, write: (b: Buffer) => void) => {
  const b = Buffer.alloc(bytes);
  write(b);
  return b;
};
/** Microseconds since 2000-01-01 UTC (PostgreSQL's binary timestamp) of an ISO time. */
const pgMicros = (iso: string) => BigInt(Date.parse(iso) - Date.UTC(2000, 0, 1)) * 1000n;
const QUOTED = "it's a 'quote', a \\ backslash, \\x41, $1 and -- a comment; DROP TABLE t";

/** [name, value, format, declared oid, statement (placeholder $1, answer as v), expected v as JSON]. */
const cases: [string, Buffer | null, 0 | 1, number, string, unknown][] = [
  ['NULL, untyped', null, 0, OID.unknown, 'SELECT $1 IS NULL AS v', true],
  ['NULL, declared int4', null, 0, OID.int4, 'SELECT CAST($1 AS INTEGER) IS NULL AS v', true],
  ['int4 text', text(' 42 '), 0, OID.int4, 'SELECT $1 AS v', 42],
  ['int4 binary', be(4, (b) => b.writeInt32BE(-42)), 1, OID.int4, 'SELECT $1 AS v', -42],
  ['int2 binary', be(2, (b) => b.writeInt16BE(-32768)), 1, OID.int2, 'SELECT $1 AS v', -32768],
  ['int8 text beyond a double', text('9007199254740993'), 0, OID.int8, 'SELECT $1::VARCHAR AS v', (2n ** 53n + 1n).toString()],
  ['int8 binary', be(8, (b) => b.writeBigInt64BE(-(2n ** 63n))), 1, OID.int8, 'SELECT $1::VARCHAR AS v', (-(2n ** 63n)).toString()],
  ['untyped number compared with a BIGINT', text('17'), 0, OID.unknown, 'SELECT $1 = 17::BIGINT AS v', true],
  ['untyped number in LIMIT', text('2'), 0, OID.unknown, 'SELECT count(*)::INTEGER AS v FROM (SELECT * FROM range(10) LIMIT $1)', 2],
  ['float8 text', text('1.5e-3'), 0, OID.float8, 'SELECT $1 AS v', 1.5e-3],
  ['float8 binary π', be(8, (b) => b.writeDoubleBE(Math.PI)), 1, OID.float8, 'SELECT $1 AS v', Math.PI],
  ['float4 binary', be(4, (b) => b.writeFloatBE(0.1)), 1, OID.float4, 'SELECT $1::DOUBLE AS v', Math.fround(0.1)],
  ['float8 NaN', text('NaN'), 0, OID.float8, 'SELECT isnan($1) AS v', true],
  ['float8 -inf', text('-inf'), 0, OID.float8, "SELECT $1 = '-infinity'::DOUBLE AS v", true],
  ['numeric text into a DECIMAL', text('12345.678'), 0, OID.numeric, 'SELECT (CAST(NULL AS DECIMAL(10,3)) IS NULL OR true) AND $1 = 12345.678::DECIMAL(10,3) AS v', true],
  ['numeric binary', be(14, (b) => [3, 1, 0, 3, 1, 2345, 6780].forEach((w, i) => b.writeUInt16BE(w, 2 * i))), 1, OID.numeric, 'SELECT $1 = 12345.678::DECIMAL(10,3) AS v', true],
  ['text with quotes and backslashes, untyped', text(QUOTED), 0, OID.unknown, 'SELECT $1 AS v', QUOTED],
  ['text with quotes and backslashes, text', text(QUOTED), 0, OID.text, 'SELECT length($1)::INTEGER AS v', [...QUOTED].length],
  ['text binary (its UTF-8)', text('ünïcødé ✓'), 1, OID.text, 'SELECT $1 AS v', 'ünïcødé ✓'],
  ['a would-be injection matches nothing', text("x' OR '1'='1"), 0, OID.unknown, "SELECT count(*)::INTEGER AS v FROM (VALUES ('a'), ('x')) t(s) WHERE s = $1", 0],
  ['bool text', text('t'), 0, OID.bool, 'SELECT $1 AS v', true],
  ['bool text, a word', text(' OFF '), 0, OID.bool, 'SELECT $1 AS v', false],
  ['bool binary', Buffer.from([1]), 1, OID.bool, 'SELECT $1 AS v', true],
  ['bool untyped in a boolean context', text('false'), 0, OID.unknown, 'SELECT NOT $1 AS v', true],
  ['timestamp text', text('2026-01-02 03:04:05.678901'), 0, OID.timestamp, 'SELECT epoch_us($1::TIMESTAMP)::VARCHAR AS v', `${Date.parse('2026-01-02T03:04:05.678Z')}901`],
  // PostgreSQL's timestamp (without time zone) input ignores an offset, as DuckDB's TIMESTAMP cast does.
  ['timestamp text with an offset', text('2026-01-02 03:04:05+02'), 0, OID.timestamp, "SELECT $1 = TIMESTAMP '2026-01-02 03:04:05' AS v", true],
  ['timestamp binary', be(8, (b) => b.writeBigInt64BE(pgMicros('2026-01-02T03:04:05.678Z') + 9n)), 1, OID.timestamp, 'SELECT epoch_us($1::TIMESTAMP)::VARCHAR AS v', `${Date.parse('2026-01-02T03:04:05.678Z')}009`],
  ['timestamp binary infinity', be(8, (b) => b.writeBigInt64BE(2n ** 63n - 1n)), 1, OID.timestamp, "SELECT $1 = 'infinity'::TIMESTAMP AS v", true],
  ['timestamptz text with an offset, compared with TIMESTAMP', text('2026-01-02 05:00:00+02'), 0, OID.timestamptz, "SELECT $1 = TIMESTAMP '2026-01-02 03:00:00' AS v", true],
  ['timestamptz text, ISO with minutes of offset', text('2026-01-02T08:30:00.25-05:30'), 0, OID.timestamptz, "SELECT $1 = TIMESTAMPTZ '2026-01-02 14:00:00.25+00' AS v", true],
  ['timestamptz text compared with TIMESTAMP_NS', text('2026-01-02 05:00:00+02'), 0, OID.timestamptz, "SELECT $1 = TIMESTAMP_NS '2026-01-02 03:00:00' AS v", true],
  ['timestamptz text infinity (DuckDB reads it)', text('infinity'), 0, OID.timestamptz, "SELECT $1 = 'infinity'::TIMESTAMPTZ AS v", true],
  ['timestamptz binary', be(8, (b) => b.writeBigInt64BE(pgMicros('2026-01-02T03:00:00Z'))), 1, OID.timestamptz, 'SELECT epoch_us($1::TIMESTAMPTZ)::VARCHAR AS v', String(Date.parse('2026-01-02T03:00:00Z') * 1000)],
  // Untyped (node-postgres sends a Date so): a string DuckDB casts to the column's type, as the
  // string literal the door wrote before was (a TIMESTAMP drops the offset; the tests run in UTC).
  ['untyped ISO time', text('2026-01-02T03:00:00.000+00:00'), 0, OID.unknown, "SELECT $1 = TIMESTAMP '2026-01-02 03:00:00' AS v", true],
  ['date binary', be(4, (b) => b.writeInt32BE(60)), 1, OID.date, "SELECT $1 = DATE '2000-03-01' AS v", true],
  ['bytea binary (bytes as they are)', Buffer.from([0, 1, 0x27, 0x5c, 0xff]), 1, OID.bytea, 'SELECT hex($1) AS v', '0001275CFF'],
  ['bytea text, hex form', text('\\x0001275cff'), 0, OID.bytea, 'SELECT hex($1) AS v', '0001275CFF'],
];

describe('boundParam + bindParams: one value per kind and format', () => {
  it.each(cases.map(([name, value, format, oid, sql, want]) => ({ name, value, format, oid, sql, want })))('$name', async ({ value, format, oid, sql, want }) => {
    expect(await run(sql, [boundParam(value, format, oid)])).toEqual(want);
  });

  /** Values PostgreSQL's input functions refuse, refused with its SQLSTATE (before anything runs). */
  const refused: [string, Buffer, 0 | 1, number, string][] = [
    ['int4 with a fraction', text('1.5'), 0, OID.int4, '22P02'],
    ['int4 that is SQL', text('1 OR 1=1'), 0, OID.int4, '22P02'],
    ['int2 out of range', text('40000'), 0, OID.int2, '22003'],
    ['int8 out of range', text('9223372036854775808'), 0, OID.int8, '22003'],
    ['float8 that is not a number', text('abc'), 0, OID.float8, '22P02'],
    ['bool that is not one', text('maybe'), 0, OID.bool, '22P02'],
    ['bytea with a bad hex digit', text('\\x0g'), 0, OID.bytea, '22P02'],
    ['binary timestamptz of 4 bytes', Buffer.from([0, 0, 0, 1]), 1, OID.timestamptz, 'invalid'],
    ['binary int4 of 2 bytes', Buffer.from([0, 1]), 1, OID.int4, 'invalid'],
  ];
  it.each(refused.map(([name, value, format, oid, code]) => ({ name, value, format, oid, code })))('refuses $name ($code)', ({ value, format, oid, code }) => {
    expect(() => boundParam(value, format, oid)).toThrow(code === 'invalid' ? expect.objectContaining({ kind: 'invalid' }) : expect.objectContaining({ sqlstate: code }));
  });

  it('a timestamptz compared with a nanosecond column is bound as its UTC wall-clock time (catalogRewrite.ts)', async () => {
    const p = boundParam(text('2026-01-02 05:00:00+02'), 0, OID.timestamptz, true);
    expect(p?.type).toBe('TIMESTAMP');
    expect(await run("SELECT $1 = TIMESTAMP_NS '2026-01-02 03:00:00' AS v", [p])).toBe(true);
  });

  it('values past the statement\'s placeholders (declared, unused) are not bound', async () => {
    expect(await run('SELECT $1 AS v', [boundParam(text('a'), 0, OID.text), boundParam(text('b'), 0, OID.text)])).toBe('a');
  });

  it('refuses NUL characters in text', () => expect(() => boundParam(text('a\0b'), 0, OID.text)).toThrow(/NUL/));
});

describe('timeRangeOf with bound values: the range follows the values (file pruning)', () => {
  const columns = new Map([['logs', 'p_timestamp']]);
  const A = '2026-01-02T03:04:05.678Z';
  const B = '2026-01-03T00:00:00Z';
  const statement = async (sql: string) => {
    const r = await conn.runAndReadAll('SELECT json_serialize_sql($1::VARCHAR) AS ast', [sql]);
    return parseTree<{ statements: Record<string, unknown>[] }>(String(r.getRowObjects()[0].ast)).statements[0];
  };
  const v = (s: string) => boundParam(text(s), 0, OID.unknown);
  const cases: [string, string, BoundParam[], { startMs: number; endMs: number }][] = [
    ['>= $1 AND < $2', 'SELECT * FROM logs WHERE p_timestamp >= $1 AND p_timestamp < $2', [v(A), v(B)], { startMs: Date.parse(A), endMs: Date.parse(B) + 1 }],
    ['the values in the other order ($2 first)', 'SELECT * FROM logs WHERE p_timestamp < $2 AND p_timestamp >= $1', [v(A), v(B)], { startMs: Date.parse(A), endMs: Date.parse(B) + 1 }],
    ['BETWEEN with a cast and an interval', "SELECT * FROM logs WHERE p_timestamp BETWEEN CAST($1 AS TIMESTAMP) - INTERVAL '1 hour' AND $2", [v(A), v(B)], { startMs: Date.parse(A) - 3_600_000, endMs: Date.parse(B) + 1 }],
    ['a timestamptz with an offset', 'SELECT * FROM logs WHERE p_timestamp >= $1', [boundParam(text('2026-01-02 05:04:05.678+02'), 0, OID.timestamptz)], { startMs: Date.parse(A), endMs: WHOLE_RANGE.endMs }],
    ['a NULL leaves its side open', 'SELECT * FROM logs WHERE p_timestamp >= $1 AND p_timestamp < $2', [null, v(B)], { startMs: WHOLE_RANGE.startMs, endMs: Date.parse(B) + 1 }],
    ['a value that is no time leaves its side open', 'SELECT * FROM logs WHERE p_timestamp >= $1', [v("x' OR '1'='1")], WHOLE_RANGE],
    ['a placeholder on another column gives no range', 'SELECT * FROM logs WHERE level = $1', [v(A)], WHOLE_RANGE],
  ];
  it.each(cases.map(([name, sql, params, want]) => ({ name, sql, params, want })))('$name', async ({ sql, params, want }) => {
    expect(await timeRangeOf(conn, await statement(sql), columns, params)).toEqual(want);
  });

  it('without values a placeholder bounds nothing (the template alone)', async () => {
    expect(await timeRangeOf(conn, await statement('SELECT * FROM logs WHERE p_timestamp >= $1'), columns)).toEqual(WHOLE_RANGE);
  });
});
