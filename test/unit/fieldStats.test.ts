import { DuckDBInstance } from '@duckdb/node-api';
import { describe, expect, test } from 'vitest';
import { FIELD_STATS_MAX_CELLS, fieldStatsSql, shapeFieldStats, stripTrailingLimit } from '../../src/query/sql/fieldStats.ts';

describe('field statistics', () => {
  test.each([
    ['SELECT * FROM app LIMIT 10', 'SELECT * FROM app'],
    ['SELECT * FROM app ORDER BY t DESC LIMIT 10 OFFSET 5;', 'SELECT * FROM app ORDER BY t DESC'],
    ['SELECT * FROM (SELECT * FROM app LIMIT 5) q', 'SELECT * FROM (SELECT * FROM app LIMIT 5) q'],
  ])('counts every row of %s', (sql, inner) => {
    expect(stripTrailingLimit(sql)).toBe(inner);
    expect(fieldStatsSql(sql, 5)).toContain(`WITH p_fs_q AS NOT MATERIALIZED (${inner}\n)`);
    expect(fieldStatsSql(sql, 5)).toContain('<= 5');
  });

  test('rows become one entry per column, top values by count, columns in the order asked', () => {
    const rows = [
      { name: 'level', present: 50, distinct_values: 2, value: 'error', count: 10, total: 60 },
      { name: 'level', present: 50, distinct_values: 2, value: 'info', count: 40, total: 60 },
      { name: 'msg', present: 60, distinct_values: 60, value: 'a', count: 1, total: 60 },
      { name: null, present: 0, distinct_values: 0, value: null, count: 0, total: 60 },
    ];
    expect(shapeFieldStats(rows.map((r) => ({ ...r, sampled: 60 })), ['msg', 'level'])).toEqual({
      total: 60,
      sampled: 60,
      fields: [
        { name: 'msg', present: 60, distinct: 60, top: [{ value: 'a', count: 1 }] },
        { name: 'level', present: 50, distinct: 2, top: [{ value: 'info', count: 40 }, { value: 'error', count: 10 }] },
      ],
    });
    // No rows at all: the one summary row says 0.
    expect(shapeFieldStats([{ name: null, total: 0, sampled: 0 }], [])).toEqual({ total: 0, sampled: 0, fields: [] });
  });

  // Issue 30 A15: a wide answer is looked at in its first FIELD_STATS_MAX_CELLS / width rows. Run in
  // DuckDB (one thread: rows come in insertion order) and compared with counts computed here.
  test.each([
    [4, 1000],
    [50, 10_000],
  ])('%d columns × %d rows: the first cells-bounded rows are counted, the total is every row', async (width, rows) => {
    const db = await DuckDBInstance.create(':memory:', { threads: '1' });
    const conn = await db.connect();
    const cell = (r: number, c: number) => (r % 3 === 0 && c === 1 ? null : `v${(r * (c + 3)) % 7}`);
    const cols = Array.from({ length: width }, (_, c) => `CASE WHEN range % 3 = 0 AND ${c} = 1 THEN NULL ELSE 'v' || ((range * ${c + 3}) % 7) END AS c${c}`);
    await conn.run(`CREATE TABLE t AS SELECT ${cols.join(', ')} FROM range(${rows}) ORDER BY range`);
    const result = await conn.runAndReadAll(fieldStatsSql('SELECT * FROM t', 3));
    const stats = shapeFieldStats(result.getRowObjectsJson(), []);
    const sampled = Math.min(rows, Math.floor(FIELD_STATS_MAX_CELLS / width));
    expect(stats.total).toBe(rows);
    expect(stats.sampled).toBe(sampled);
    for (const c of [0, 1, width - 1]) {
      const counts = new Map<string, number>();
      for (let r = 0; r < sampled; r++) {
        const v = cell(r, c);
        if (v !== null) counts.set(v, (counts.get(v) ?? 0) + 1);
      }
      const top = [...counts].map(([value, count]) => ({ value, count })).sort((a, b) => b.count - a.count || a.value.localeCompare(b.value)).slice(0, 3);
      const field = stats.fields.find((f) => f.name === `c${c}`)!;
      expect(field).toEqual({ name: `c${c}`, present: [...counts.values()].reduce((a, b) => a + b, 0), distinct: counts.size, top });
    }
    conn.closeSync();
  });
});
