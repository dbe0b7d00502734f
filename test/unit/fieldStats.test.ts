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

describe('stripTrailingLimit is linear (A2: a backtracking expression froze the event loop on 300 KB of spaces)', () => {
  // An independent reference: the same rule over words split by a linear split.
  const reference = (sql: string) => {
    const s = sql.trim().replace(/;$/, '').trimEnd();
    const words = s.split(/[ \t\n\r\f\v]+/);
    const n = words.length;
    const num = (w: string | undefined) => w !== undefined && /^\d+$/.test(w);
    let drop = 0;
    if (n >= 5 && words[n - 4].toLowerCase() === 'limit' && num(words[n - 3]) && words[n - 2].toLowerCase() === 'offset' && num(words[n - 1])) drop = 4;
    else if (n >= 3 && words[n - 2].toLowerCase() === 'limit' && num(words[n - 1])) drop = 2;
    return words.slice(0, n - drop).join(' ');
  };
  const normalise = (s: string) => s.split(/[ \t\n\r\f\v]+/).join(' ');
  test.each([
    'SELECT * FROM app LIMIT 10',
    'SELECT * FROM app\n\tlimit 10 offset 20 ;',
    'SELECT * FROM app LIMIT x',
    'SELECT * FROM app OFFSET 5',
    'LIMIT 5',
    'SELECT 1 LIMIT 5 OFFSET',
    'SELECT * FROM app ORDER BY t LIMIT 10 OFFSET 5',
  ])('%j as the reference does', (sql) => {
    expect(normalise(stripTrailingLimit(sql))).toBe(reference(sql));
  });

  test.each([
    ['300 KB of spaces before a word (the reproducer)', `SELECT * FROM app${' '.repeat(300_000)}x`],
    ['320 KB of "limit 1 " pairs', `SELECT * FROM app ${'limit 1 '.repeat(40_000)}x`],
    ['300 KB of spaces and a semicolon', `SELECT 1${' '.repeat(300_000)};`],
  ])('%s: answered (the old expression took minutes)', (_label, sql) => {
    expect(normalise(stripTrailingLimit(sql))).toBe(reference(sql));
  });
});
