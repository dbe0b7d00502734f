import { describe, expect, test } from 'vitest';
import { fieldStatsSql, shapeFieldStats, stripTrailingLimit } from '../../src/query/sql/fieldStats.ts';

describe('field statistics', () => {
  test.each([
    ['SELECT * FROM app LIMIT 10', 'SELECT * FROM app'],
    ['SELECT * FROM app ORDER BY t DESC LIMIT 10 OFFSET 5;', 'SELECT * FROM app ORDER BY t DESC'],
    ['SELECT * FROM (SELECT * FROM app LIMIT 5) q', 'SELECT * FROM (SELECT * FROM app LIMIT 5) q'],
  ])('counts every row of %s', (sql, inner) => {
    expect(stripTrailingLimit(sql)).toBe(inner);
    expect(fieldStatsSql(sql, 5)).toContain(`WITH p_fs_q AS (${inner}\n)`);
    expect(fieldStatsSql(sql, 5)).toContain('<= 5');
  });

  test('rows become one entry per column, top values by count, columns in the order asked', () => {
    const rows = [
      { name: 'level', present: 50, distinct_values: 2, value: 'error', count: 10, total: 60 },
      { name: 'level', present: 50, distinct_values: 2, value: 'info', count: 40, total: 60 },
      { name: 'msg', present: 60, distinct_values: 60, value: 'a', count: 1, total: 60 },
      { name: null, present: 0, distinct_values: 0, value: null, count: 0, total: 60 },
    ];
    expect(shapeFieldStats(rows, ['msg', 'level'])).toEqual({
      total: 60,
      fields: [
        { name: 'msg', present: 60, distinct: 60, top: [{ value: 'a', count: 1 }] },
        { name: 'level', present: 50, distinct: 2, top: [{ value: 'info', count: 40 }, { value: 'error', count: 10 }] },
      ],
    });
    // No rows at all: the one summary row says 0.
    expect(shapeFieldStats([{ name: null, total: 0 }], [])).toEqual({ total: 0, fields: [] });
  });
});
