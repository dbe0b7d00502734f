import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientColumnName, rowWriter, valueConverter } from '../../src/query/results/json.ts';

/** Result values → JSON, by DuckDB type: each SQL expression and what a client receives. */
describe('result values', () => {
  let conn: DuckDBConnection;
  beforeAll(async () => {
    conn = await (await DuckDBInstance.create(':memory:')).connect();
  });
  afterAll(() => conn.closeSync());

  async function convert(expr: string, format: 'iso' | 'naive' = 'iso'): Promise<unknown> {
    const result = await conn.stream(`SELECT ${expr} AS v`);
    for await (const rows of result.yieldConvertedRows(valueConverter(format))) return rows[0][0];
    throw new Error('no row');
  }

  it.each([
    ['NULL::BIGINT', null],
    ['NULL::TIMESTAMP', null],
    ['NULL::VARCHAR', null],
    ['42::BIGINT', 42],
    ['9007199254740991::BIGINT', 9007199254740991],
    ['9007199254740993::BIGINT', '9007199254740993'],
    ['-9007199254740993::BIGINT', '-9007199254740993'],
    ['170141183460469231731687303715884105727::HUGEINT', '170141183460469231731687303715884105727'],
    ['3::INTEGER', 3],
    ['1.25::DECIMAL(10,2)', 1.25],
    ['2.5::DOUBLE', 2.5],
    ["'NaN'::DOUBLE", 'NaN'],
    ["'-Infinity'::DOUBLE", '-Infinity'],
    ['true', true],
    ["'text'", 'text'],
    ["TIMESTAMP '2026-11-23 02:09:37.979'", '2026-11-23T02:09:37.979Z'],
    ["TIMESTAMP '2026-11-23 02:09:37'", '2026-11-23T02:09:37.000Z'],
    ["TIMESTAMP '2026-11-23 02:09:37.123456'", '2026-11-23T02:09:37.123456Z'],
    ["TIMESTAMP_NS '2026-11-23 02:09:37.123456789'", '2026-11-23T02:09:37.123456789Z'],
    ["TIMESTAMP_NS '2026-11-23 02:09:37.120000000'", '2026-11-23T02:09:37.120Z'],
    ["TIMESTAMP '1969-12-31 23:59:59.999'", '1969-12-31T23:59:59.999Z'],
    ["TIMESTAMPTZ '2026-11-23 02:09:37.5+00'", '2026-11-23T02:09:37.500Z'],
    ["[TIMESTAMP '2026-01-01 00:00:00', NULL]", ['2026-01-01T00:00:00.000Z', null]],
    ["[1::BIGINT, 9007199254740993::BIGINT]", [1, '9007199254740993']],
    ["{'a': 1::BIGINT, 'b': 'x'}", { a: 1, b: 'x' }],
  ])('%s', async (expr, expected) => {
    expect(await convert(expr)).toEqual(expected);
  });

  it("writes Parseable's zone-less layout when asked", async () => {
    expect(await convert("TIMESTAMP '2026-11-23 02:09:37.979'", 'naive')).toBe('2026-11-23T02:09:37.979');
    expect(await convert("TIMESTAMP_NS '2026-11-23 02:09:37.000000001'", 'naive')).toBe('2026-11-23T02:09:37.000000001');
  });
});

describe('rows as JSON text', () => {
  it.each([
    [false, [1, null, 'x'], '{"a":1,"c":"x"}'],
    [true, [1, null, 'x'], '{"a":1,"b":null,"c":"x"}'],
    [false, [null, null, null], '{}'],
  ] as const)('sendNull=%s %j → %s', (sendNull, row, text) => {
    expect(rowWriter(['a', 'b', 'c'], sendNull)([...row])).toBe(text);
  });
  it('names an unaliased count(*) as DataFusion does', () => {
    expect(clientColumnName('count_star()')).toBe('count(*)');
    expect(clientColumnName('sum(x)')).toBe('sum(x)');
  });
});
