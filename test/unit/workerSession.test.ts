import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { boundedSql, RangeSession, rangeStatements, renamedColumns, runBounded, streamOne } from '../../src/query/worker/session.ts';
import { timestampLiteral } from '../../src/storage/scan.ts';

/**
 * The query worker's range variables set in the statement's own native call (session.ts): the same rows
 * as setting them in a call of their own, the same error messages, and the variables right afterwards.
 */

let db: DuckDBInstance;
let conn: DuckDBConnection;
const T0 = Date.parse('2026-11-28T12:00:00Z');
const range = (fromMin: number, toMin: number) => ({ start: timestampLiteral(T0 + fromMin * 60_000), end: timestampLiteral(T0 + toMin * 60_000) });

beforeAll(async () => {
  db = await DuckDBInstance.create(':memory:');
  conn = await db.connect();
  // One event a minute over an hour, and a view filtered by the range variables as the worker's views are.
  await conn.run(`CREATE TABLE ev AS SELECT TIMESTAMP '2026-11-28 12:00:00' + INTERVAL (i) MINUTE AS t, i FROM range(60) r(i)`);
  await conn.run(`SET VARIABLE p_range_start = TIMESTAMP '1970-01-01'; SET VARIABLE p_range_end = TIMESTAMP '1970-01-01'`);
  await conn.run(`CREATE TEMP VIEW ds AS SELECT * FROM ev WHERE t >= getvariable('p_range_start') AND t < getvariable('p_range_end')`);
});
afterAll(() => {
  conn?.closeSync();
  db?.closeSync();
});

/** The reference: the rows of [fromMin, toMin) counted by a WHERE with literals, not through the variables. */
async function reference(sql: string, fromMin: number, toMin: number) {
  const r = range(fromMin, toMin);
  const direct = sql.replace('FROM ds', `FROM (SELECT * FROM ev WHERE t >= ${r.start} AND t < ${r.end})`);
  return (await conn.runAndReadAll(direct)).getRowObjectsJson();
}

describe('rangeStatements', () => {
  const r = range(0, 15);
  it.each([
    ['no range', undefined, undefined, ''],
    ['range not yet set', r, undefined, `SET VARIABLE p_range_start = ${r.start}; SET VARIABLE p_range_end = ${r.end}; `],
    ['range already held', r, `${r.start} ${r.end}`, ''],
    ['another range held', r, 'x y', `SET VARIABLE p_range_start = ${r.start}; SET VARIABLE p_range_end = ${r.end}; `],
  ])('%s', (_name, given, current, expected) => {
    expect(rangeStatements(given, current)).toBe(expected);
  });
});

describe('RangeSession.runWhole', () => {
  const session = new RangeSession();
  // Ranges in a row as a worker gets them: fresh, repeated (nothing set), another, then back.
  it.each([
    ['count, 0–15', 'SELECT count(*) AS n FROM ds', 0, 15],
    ['count, same range again', 'SELECT count(*) AS n FROM ds', 0, 15],
    ['count, 45–60', 'SELECT count(*) AS n FROM ds', 45, 60],
    ['histogram, 10–40', `SELECT time_bucket(INTERVAL 5 MINUTE, t) AS b, count(*) AS n FROM ds GROUP BY b ORDER BY b`, 10, 40],
    ['rows, 58–70', 'SELECT i FROM ds ORDER BY i', 58, 70],
    ['empty range', 'SELECT count(*) AS n, min(i) AS lo FROM ds', 30, 30],
  ])('%s equals the literal range', async (_name, sql, from, to) => {
    const got = await session.runWhole(conn, sql, range(from, to));
    expect(await got.getRowObjectsJson()).toEqual(await reference(sql, from, to));
  });

  it.each([
    ['an unknown column', 'SELECT nosuch FROM ds'],
    ['an unknown table', 'SELECT count(*) FROM nosuch'],
    ['a runtime error', `SELECT error('boom') FROM ds`],
  ])('fails with %s as the statement alone does, and leaves the range right', async (_name, sql) => {
    const alone = await conn.run(sql).then(() => 'ok', (e: Error) => e.message);
    const combined = await session.runWhole(conn, sql, range(20, 25)).then(() => 'ok', (e: Error) => e.message);
    expect(combined).toBe(alone);
    // The next statement on the same range must see the range (set, or set again).
    const after = await session.runWhole(conn, 'SELECT count(*) AS n FROM ds', range(20, 25));
    expect(await after.getRowObjectsJson()).toEqual(await reference('SELECT count(*) AS n FROM ds', 20, 25));
  });

  it('a bind error keeps its line context', async () => {
    const message = await session.runWhole(conn, 'SELECT i\nFROM ds WHERE nosuch = 1', range(0, 5)).then(() => '', (e: Error) => e.message);
    expect(message).toMatch(/LINE 2: FROM ds WHERE nosuch = 1/);
  });
});

describe('streamOne', () => {
  it('streams the rows the statement gives run whole', async () => {
    const session = new RangeSession();
    await session.set(conn, range(5, 50));
    const sql = 'SELECT i, t FROM ds ORDER BY i';
    const streamed = await streamOne(conn, sql);
    const rows = [];
    for await (const batch of streamed.yieldRowsJson()) rows.push(...batch);
    expect(rows).toEqual((await conn.runAndReadAll(sql)).getRowsJson());
    expect(rows.length).toBe(45);
  });

  it('refuses more than one statement', async () => {
    await expect(streamOne(conn, 'SELECT 1; SELECT 2')).rejects.toThrow();
  });
});

describe('renamedColumns', () => {
  it.each([
    [['a', 'b'], false],
    [['a', 'a_1'], true],
    [['A', 'a_2'], true],
    [['a_1', 'b'], false],
    [['n', 'n_x'], false],
    [['x_1', 'x_1_1'], true],
  ])('%j → %s', (names, expected) => {
    expect(renamedColumns(names)).toBe(expected);
  });

  it('matches what DuckDB does to a subquery\'s duplicate names', async () => {
    const sql = 'SELECT 1 AS a, 2 AS a, 3 AS b';
    expect(renamedColumns((await conn.run(sql)).columnNames())).toBe(false);
    expect(renamedColumns((await conn.run(boundedSql(sql, 10))).columnNames())).toBe(true);
  });
});

describe('runBounded', () => {
  const session = new RangeSession();
  // The statement's own rows (through the literal range) when they are at most `limit`, else undefined.
  it.each([
    ['histogram, 10–40', `SELECT time_bucket(INTERVAL 5 MINUTE, t) AS b, count(*) AS n FROM ds GROUP BY b ORDER BY b`, 10, 40, 100],
    ['rows in descending order', 'SELECT i, t FROM ds ORDER BY i DESC', 0, 60, 60],
    ['exactly the limit', 'SELECT i FROM ds ORDER BY i', 0, 20, 20],
    ['one more than the limit', 'SELECT i FROM ds ORDER BY i', 0, 21, 20],
    ['a trailing line comment', 'SELECT count(*) AS n FROM ds -- the count', 5, 6, 1],
    ['a closing semicolon', 'SELECT count(*) AS n FROM ds ; \n', 5, 9, 1],
    ['a CTE and a UNION', 'WITH x AS (SELECT i FROM ds) SELECT i FROM x UNION ALL SELECT -1 ORDER BY 1 DESC', 0, 30, 31],
    ['no rows', 'SELECT i FROM ds WHERE i < 0', 0, 60, 5],
  ])('%s', async (_name, sql, from, to, limit) => {
    const want = await reference(sql, from, to);
    const got = await runBounded(session, conn, sql, range(from, to), limit);
    if (want.length > limit) expect(got).toBeUndefined();
    else expect(await got!.getRowObjectsJson()).toEqual(want);
  });

  it.each([
    ['duplicate column names', 'SELECT i, i FROM ds'],
    ['a bind error', 'SELECT nosuch FROM ds'],
    ['a runtime error', `SELECT error('boom') FROM ds`],
    ['two statements', 'SELECT 1; SELECT 2'],
  ])('leaves %s to the streamed path, with the range right afterwards', async (_name, sql) => {
    expect(await runBounded(session, conn, sql, range(30, 35), 100)).toBeUndefined();
    await session.set(conn, range(30, 35));
    expect((await conn.runAndReadAll('SELECT count(*) AS n FROM ds')).getRowObjectsJson()).toEqual(await reference('SELECT count(*) AS n FROM ds', 30, 35));
  });
});
