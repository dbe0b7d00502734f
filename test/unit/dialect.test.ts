import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECT_FUNCTIONS, DIALECT_SQL, SHADOWED_BUILTINS } from '../../src/query/sql/dialect.ts';

/**
 * Each DataFusion function the dialect maps, checked against DataFusion's documented results
 * (https://datafusion.apache.org/user-guide/sql/scalar_functions.html and aggregate_functions.html).
 * Expected values are DuckDB's JSON form of the result: timestamps as 'YYYY-MM-DD HH:MM:SS[.fff]',
 * 64-bit integers as strings.
 */
const CASES: { fn: string; sql: string; expected: unknown; type?: string }[] = [
  // date_bin: bins aligned on the epoch by default, on the origin when given; stride as text or INTERVAL.
  { fn: 'date_bin', sql: `date_bin(INTERVAL '15 minutes', TIMESTAMP '2023-01-01 10:22:33')`, expected: '2023-01-01 10:15:00', type: 'TIMESTAMP' },
  { fn: 'date_bin', sql: `date_bin('1 minute', TIMESTAMP '2023-01-01 10:22:33.5')`, expected: '2023-01-01 10:22:00' },
  { fn: 'date_bin', sql: `date_bin('5m', TIMESTAMP_NS '2023-01-01 10:22:33.123456789')`, expected: '2023-01-01 10:20:00' },
  { fn: 'date_bin', sql: `date_bin('1 hour', TIMESTAMP '2023-01-01 10:22:33', '2023-01-01T00:30:00Z')`, expected: '2023-01-01 09:30:00' },
  // An origin with an offset is an instant: 02:30+02:00 is 00:30 UTC.
  { fn: 'date_bin', sql: `date_bin('1 hour', TIMESTAMP '2023-01-01 10:22:33', '2023-01-01T02:30:00+02:00')`, expected: '2023-01-01 09:30:00' },
  // Origin after the source (Parseable's dashboards use NOW()): bins still end on the origin's phase.
  { fn: 'date_bin', sql: `date_bin('1 hour', TIMESTAMP '2023-01-01 10:22:33', TIMESTAMPTZ '2023-01-02 00:40:00+00')`, expected: '2023-01-01 09:40:00' },
  { fn: 'date_bin', sql: `date_bin('1 day', NULL::TIMESTAMP)`, expected: null },

  // to_timestamp: numbers are seconds since the epoch; text is RFC 3339 / ISO 8601, the zone honoured, none = UTC.
  { fn: 'to_timestamp', sql: `to_timestamp('2023-01-31T09:26:56.123456789-05:00')`, expected: '2023-01-31 14:26:56.123456', type: 'TIMESTAMP' },
  { fn: 'to_timestamp', sql: `to_timestamp('2023-01-31T09:26:56Z')`, expected: '2023-01-31 09:26:56' },
  { fn: 'to_timestamp', sql: `to_timestamp('2023-01-31t09:26:56z')`, expected: '2023-01-31 09:26:56' },
  { fn: 'to_timestamp', sql: `to_timestamp('2023-01-31 09:26:56+0530')`, expected: '2023-01-31 03:56:56' },
  { fn: 'to_timestamp', sql: `to_timestamp('2023-01-31T09:26:56')`, expected: '2023-01-31 09:26:56' },
  { fn: 'to_timestamp', sql: `to_timestamp('2023-01-31')`, expected: '2023-01-31 00:00:00' },
  { fn: 'to_timestamp', sql: `to_timestamp(1675157216)`, expected: '2023-01-31 09:26:56' },
  { fn: 'to_timestamp', sql: `to_timestamp(1.5)`, expected: '1970-01-01 00:00:01.5' },
  { fn: 'to_timestamp', sql: `to_timestamp(TIMESTAMPTZ '2023-01-31 11:26:56+02')`, expected: '2023-01-31 09:26:56' },
  { fn: 'to_timestamp', sql: `to_timestamp(NULL::VARCHAR)`, expected: null },
  { fn: 'to_timestamp_seconds', sql: `to_timestamp_seconds(1675157216.9)`, expected: '2023-01-31 09:26:56' },
  { fn: 'to_timestamp_seconds', sql: `to_timestamp_seconds('2023-01-31T09:26:56.9Z')`, expected: '2023-01-31 09:26:56' },
  { fn: 'to_timestamp_millis', sql: `to_timestamp_millis(1675157216123)`, expected: '2023-01-31 09:26:56.123' },
  { fn: 'to_timestamp_millis', sql: `to_timestamp_millis('2023-01-31T09:26:56.123456Z')`, expected: '2023-01-31 09:26:56.123' },
  { fn: 'to_timestamp_micros', sql: `to_timestamp_micros(1675157216123456)`, expected: '2023-01-31 09:26:56.123456' },
  { fn: 'to_timestamp_nanos', sql: `to_timestamp_nanos(1675157216123456789)`, expected: '2023-01-31 09:26:56.123456789', type: 'TIMESTAMP_NS' },
  { fn: 'from_unixtime', sql: `from_unixtime(1599572549)`, expected: '2020-09-08 13:42:29' },
  { fn: 'to_unixtime', sql: `to_unixtime('2020-09-08T12:00:00+00:00')`, expected: '1599566400' },
  { fn: 'to_unixtime', sql: `to_unixtime(TIMESTAMP '2020-09-08 12:00:00.9')`, expected: '1599566400' },
  { fn: 'to_unixtime', sql: `to_unixtime(1599566400)`, expected: '1599566400' },
  { fn: 'to_date', sql: `to_date('2023-01-31')`, expected: '2023-01-31', type: 'DATE' },
  { fn: 'to_date', sql: `to_date('2023-01-31T23:30:00-02:00')`, expected: '2023-02-01' },
  { fn: 'to_date', sql: `to_date(19388)`, expected: '2023-01-31' },
  { fn: 'to_date', sql: `to_date('31/01/2023', '%d/%m/%Y')`, expected: '2023-01-31' },
  { fn: 'to_char', sql: `to_char(TIMESTAMP '2023-03-01 14:05:06', '%d-%m-%Y %H:%M')`, expected: '01-03-2023 14:05' },
  { fn: 'date_format', sql: `date_format(DATE '2023-03-01', '%Y/%m/%d')`, expected: '2023/03/01' },

  // Approximate aggregates (over 0..99: exact median 49.5; the t-digest answer is close).
  // HyperLogLog: close to the 10 distinct values, not necessarily exact (in either engine).
  { fn: 'approx_distinct', sql: `(SELECT approx_distinct(x % 10) BETWEEN 9 AND 11 FROM range(1000) t(x))`, expected: true },
  { fn: 'approx_distinct', sql: `(SELECT typeof(approx_distinct(x)) FROM range(3) t(x))`, expected: 'BIGINT' },
  { fn: 'approx_percentile_cont', sql: `(SELECT abs(approx_percentile_cont(x::DOUBLE, 0.95) - 94.05) < 1 FROM range(100) t(x))`, expected: true },
  { fn: 'approx_percentile_cont', sql: `(SELECT abs(approx_percentile_cont(x::DOUBLE, 0.5, 100) - 49.5) < 1 FROM range(100) t(x))`, expected: true },
  { fn: 'approx_median', sql: `(SELECT abs(approx_median(x::DOUBLE) - 49.5) < 1 FROM range(100) t(x))`, expected: true },

  // Regular expressions.
  { fn: 'regexp_like', sql: `regexp_like('Köln', '[a-zA-Z]ö[a-zA-Z]{2}')`, expected: true },
  { fn: 'regexp_like', sql: `regexp_like('aBc', '(b|d)')`, expected: false },
  { fn: 'regexp_like', sql: `regexp_like('aBc', '(b|d)', 'i')`, expected: true },
  { fn: 'regexp_count', sql: `regexp_count('abcAbAbc', 'abc')`, expected: '1' },
  { fn: 'regexp_count', sql: `regexp_count('abcabc', 'abc', 2)`, expected: '1' },
  { fn: 'regexp_count', sql: `regexp_count('abcAbAbc', 'abc', 2, 'i')`, expected: '1' },
  { fn: 'regexp_count', sql: `regexp_count('abcAbAbc', 'abc', 1, 'i')`, expected: '2' },
  { fn: 'regexp_count', sql: `regexp_count('abcAbAbc', 'abc', 1, 'c')`, expected: '1' },

  // Types, nulls, strings, lists, numbers.
  { fn: 'arrow_typeof', sql: `arrow_typeof('foo')`, expected: 'Utf8' },
  { fn: 'arrow_typeof', sql: `arrow_typeof(1::BIGINT)`, expected: 'Int64' },
  { fn: 'arrow_typeof', sql: `arrow_typeof(1)`, expected: 'Int32' },
  { fn: 'arrow_typeof', sql: `arrow_typeof(1.5::DOUBLE)`, expected: 'Float64' },
  { fn: 'arrow_typeof', sql: `arrow_typeof(true)`, expected: 'Boolean' },
  { fn: 'arrow_typeof', sql: `arrow_typeof(1.5)`, expected: 'Decimal128(2, 1)' },
  { fn: 'arrow_typeof', sql: `arrow_typeof(TIMESTAMP_NS '2023-01-01')`, expected: 'Timestamp(Nanosecond, None)' },
  { fn: 'arrow_typeof', sql: `arrow_typeof(['a'])`, expected: 'List(Field { name: "item", data_type: Utf8, nullable: true, dict_id: 0, dict_is_ordered: false, metadata: {} })' },
  { fn: 'arrow_typeof', sql: `arrow_typeof(NULL)`, expected: 'Null' },
  { fn: 'nvl', sql: `nvl(NULL, 'b')`, expected: 'b' },
  { fn: 'nvl', sql: `nvl('a', 'b')`, expected: 'a' },
  { fn: 'nvl2', sql: `nvl2(NULL, 'a', 'b')`, expected: 'b' },
  { fn: 'nvl2', sql: `nvl2(1, 'a', 'b')`, expected: 'a' },
  { fn: 'btrim', sql: `btrim('  datafusion  ')`, expected: 'datafusion' },
  { fn: 'btrim', sql: `btrim('__datafusion____', '_')`, expected: 'datafusion' },
  { fn: 'find_in_set', sql: `find_in_set('b', 'a,b,c,d')`, expected: 2 },
  { fn: 'find_in_set', sql: `find_in_set('x', 'a,b,c,d')`, expected: 0 },
  { fn: 'find_in_set', sql: `find_in_set(NULL, 'a,b')`, expected: null },
  { fn: 'array_element', sql: `array_element([1, 2, 3, 4], 3)`, expected: 3 },
  { fn: 'signum', sql: `signum(-2.5::DOUBLE)`, expected: -1 },
  { fn: 'signum', sql: `signum(0)`, expected: 0 },
  { fn: 'nanvl', sql: `nanvl('NaN'::DOUBLE, 1.5::DOUBLE)`, expected: 1.5 },
  { fn: 'nanvl', sql: `nanvl(2.5::DOUBLE, 1.5::DOUBLE)`, expected: 2.5 },
  { fn: 'iszero', sql: `iszero(0.0::DOUBLE)`, expected: true },
  { fn: 'iszero', sql: `iszero(2)`, expected: false },
];

let instance: DuckDBInstance;
let conn: DuckDBConnection;
let builtinsBefore: Set<string>;

async function value(sql: string): Promise<{ v: unknown; type: string }> {
  const reader = await conn.runAndReadAll(`SELECT ${sql} AS v`);
  return { v: reader.getRowObjectsJson()[0].v, type: reader.columnTypes()[0].toString() };
}

describe('DataFusion dialect macros', () => {
  beforeAll(async () => {
    instance = await DuckDBInstance.create(':memory:');
    conn = await instance.connect();
    const names = await conn.runAndReadAll('SELECT DISTINCT function_name FROM duckdb_functions()');
    builtinsBefore = new Set(names.getRowObjectsJson().map((r) => String(r.function_name)));
    for (const sql of DIALECT_SQL) await conn.run(sql);
  });
  afterAll(() => {
    conn?.closeSync();
  });

  it.each(CASES)('$fn: $sql', async ({ sql, expected, type }) => {
    const got = await value(sql);
    expect(got.v).toEqual(expected);
    if (type) expect(got.type).toBe(type);
  });

  it('tests every mapped function', () => {
    const tested = new Set(CASES.map((c) => c.fn));
    expect(DIALECT_FUNCTIONS.filter((f) => !tested.has(f))).toEqual([]);
  });

  it('shadows no DuckDB builtin but to_timestamp, which keeps the builtin meaning for numbers', async () => {
    expect(DIALECT_FUNCTIONS.filter((f) => builtinsBefore.has(f))).toEqual(SHADOWED_BUILTINS);
    // The builtin (still reachable by its qualified name) and the macro agree on the instant.
    for (const n of ['0', '1.25', '1675157216', '-86400']) {
      const builtin = await value(`timezone('UTC', system.main.to_timestamp(${n}))`);
      const macro = await value(`to_timestamp(${n})`);
      expect(macro.v, n).toEqual(builtin.v);
    }
  });

  it('works on columns, row by row, in a GROUP BY like a dashboard panel', async () => {
    const reader = await conn.runAndReadAll(
      `SELECT date_bin('1 minute', t) AS minute, count(*) AS n, approx_distinct(k) AS keys
       FROM (VALUES (to_timestamp('2023-01-01T10:00:05Z'), 'a'), (to_timestamp('2023-01-01T12:00:50+02:00'), 'b'),
                    (to_timestamp(1672567265), 'a')) v(t, k)
       GROUP BY minute ORDER BY minute`,
    );
    expect(reader.getRowObjectsJson()).toEqual([
      { minute: '2023-01-01 10:00:00', n: '2', keys: '2' },
      { minute: '2023-01-01 10:01:00', n: '1', keys: '1' },
    ]);
  });

  it('can be installed twice (CREATE OR REPLACE), as every start does', async () => {
    for (const sql of DIALECT_SQL) await conn.run(sql);
    expect((await value(`regexp_like('abc', 'b')`)).v).toBe(true);
  });
});
