import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECT_SQL } from '../../src/query/sql/dialect.ts';
import { preAggregationPays } from '../../src/query/sql/preAggregate.ts';
import { planStatement } from '../../src/query/sql/sandbox.ts';

const LIMITS = { maxSqlBytes: 64 * 1024, maxDepth: 16 };

/**
 * Receive times chosen to break a careless rewrite: NULL, ±infinity, before 1970, a leap day, both
 * DST changes of Europe/Berlin (the session's zone below) and of New York, microseconds and
 * sub-minute values on both sides of a minute, hour and day boundary, each on several rows (with
 * levels, some NULL, for WHERE clauses), and unique times too.
 */
const TIMES = [
  null,
  'infinity',
  '-infinity',
  '1969-12-31 23:59:59.999999',
  '1900-02-28 12:00:30',
  '2024-02-29 23:59:59.5',
  '2026-03-29 00:59:59.999',
  '2026-03-29 01:00:00',
  '2026-03-29 01:30:00.000001',
  '2026-03-08 06:59:59',
  '2026-03-08 07:00:00',
  '2026-10-25 00:30:00',
  '2026-10-25 01:30:00',
  '2026-11-01 05:30:00',
  '2026-11-01 06:30:00',
  '2026-11-26 03:54:00',
  '2026-11-26 03:54:59.999999',
  '2026-11-26 03:55:00.000001',
  '2026-11-26 23:59:59.999',
  '2026-11-27 00:00:00',
];

/** [statement, whether it is rewritten] — the rewritten ones are also run both ways below. */
const SHAPES: [string, boolean][] = [
  ["SELECT date_trunc('minute', p_timestamp) AS minute, count(*) AS n FROM t GROUP BY 1 ORDER BY 1", true],
  ["SELECT date_trunc('minute', p_timestamp), count(*) FROM t GROUP BY 1 ORDER BY 1", true],
  ["SELECT date_trunc('minute', p_timestamp) AS m, count() AS n FROM t GROUP BY date_trunc('minute', p_timestamp) ORDER BY n DESC, m", true],
  ["SELECT date_trunc('hour', p_timestamp) AS h, COUNT(*) AS n, count(*) AS again FROM t WHERE level = 'error' GROUP BY 1 ORDER BY h LIMIT 5 OFFSET 1", true],
  ["SELECT date_trunc('day', p_timestamp) AS d, count(*) AS n FROM t WHERE level IS NULL GROUP BY 1 ORDER BY 1", true],
  ["SELECT x.p_timestamp AS ts, count(*) AS n FROM t AS x WHERE x.level <> 'debug' GROUP BY x.p_timestamp ORDER BY ts NULLS FIRST", true],
  ["SELECT P_TIMESTAMP, count(*) AS n FROM t GROUP BY P_TIMESTAMP ORDER BY 1", true],
  ["SELECT date_trunc('hour', p_timestamp::TIMESTAMPTZ) AS h, count(*) AS n FROM t GROUP BY 1 ORDER BY 1", true],
  ["SELECT date_trunc('day', timezone('America/New_York', p_timestamp)) AS d, count(*) AS n FROM t GROUP BY 1 ORDER BY 1", true],
  ["SELECT date_trunc('hour', p_timestamp AT TIME ZONE 'Europe/Berlin') AS h, count(*) AS n FROM t GROUP BY 1 ORDER BY 1", true],
  ["SELECT date_bin(INTERVAL 15 MINUTE, p_timestamp) AS b, count(*) AS n FROM t GROUP BY 1 ORDER BY 1", true],
  ["SELECT time_bucket(INTERVAL '1 second', p_timestamp) AS b, count(*) AS n FROM t GROUP BY 1 ORDER BY 1", true],
  ["SELECT strftime(p_timestamp, '%H:%M') AS hm, extract(hour FROM p_timestamp) AS hh, count(*) AS n FROM t GROUP BY 1, 2 ORDER BY 1, 2", true],
  ['SELECT epoch_ms(p_timestamp) // 60000 AS m, count(*) AS n FROM t GROUP BY 1 ORDER BY 1', true],
  // Unaliased items keep DuckDB's own names (here of syntax it expands: main.timezone, date_part).
  ["SELECT p_timestamp AT TIME ZONE 'UTC', extract(minute FROM p_timestamp), count(*) FROM t GROUP BY 1, 2 ORDER BY 1, 2", true],
  ["SELECT CASE WHEN p_timestamp < TIMESTAMP '2000-01-01' THEN 'old' ELSE 'new' END AS age, count(*) AS n FROM t GROUP BY 1 ORDER BY 1", true],
  ["SELECT date_trunc('minute', p_timestamp) AS minute, count(*) AS n FROM t WHERE false GROUP BY 1 ORDER BY 1", true],
  // Constants a JavaScript double cannot hold (2^53 + 1, a HUGEINT's 64-bit half, 1e20 written
  // as 100000000000000000000.0, a 25-digit DECIMAL): the rewrite keeps their exact text.
  ['SELECT epoch_ms(p_timestamp) + 9007199254740993 AS m, count(*) AS n FROM t GROUP BY 1 ORDER BY 1', true],
  ["SELECT date_trunc('minute', p_timestamp) AS m, count(*) AS n FROM t WHERE v + 9007199254740993 > 9007199254740995 GROUP BY 1 ORDER BY 1", true],
  ['SELECT epoch_ms(p_timestamp) % 18446744073709551615 AS m, count(*) AS n FROM t GROUP BY 1 ORDER BY 1', true],
  ['SELECT epoch_ms(p_timestamp) + 18446744073709551615 AS m, count(*) AS n FROM t WHERE v < 18446744073709551615 GROUP BY 1 ORDER BY 1', true],
  ["SELECT date_trunc('minute', p_timestamp) AS m, count(*) AS n FROM t WHERE v < 1e20 GROUP BY 1 ORDER BY 1", true],
  ["SELECT date_trunc('minute', p_timestamp) AS m, count(*) AS n FROM t WHERE v + 123456789012345678901230.5 > 123456789012345678901232 GROUP BY 1 ORDER BY 1", true],
  // Shapes left as written.
  ["SELECT date_trunc('minute', p_timestamp) AS m, count(*) AS n FROM t GROUP BY 1 HAVING count(*) > 1", false],
  ["SELECT date_trunc('minute', p_timestamp) AS m, sum(v) AS s FROM t GROUP BY 1", false],
  ["SELECT date_trunc('minute', p_timestamp) AS m, count(*) AS n, min(p_timestamp) AS first FROM t GROUP BY 1", false],
  ["SELECT date_trunc('minute', p_timestamp) AS m, count(level) AS n FROM t GROUP BY 1", false],
  ["SELECT date_trunc('minute', p_timestamp) AS m, count(*) FILTER (WHERE level = 'x') AS n FROM t GROUP BY 1", false],
  ["SELECT date_trunc('minute', p_timestamp) AS m, approx_median(p_timestamp) AS med, count(*) AS n FROM t GROUP BY 1", false],
  ['SELECT level, count(*) AS n FROM t GROUP BY level', false],
  ["SELECT date_trunc('minute', p_timestamp) AS m, level, count(*) AS n FROM t GROUP BY 1, 2", false],
  ["SELECT date_trunc('minute', time) AS m, count(*) AS n FROM t GROUP BY 1", false],
  ["SELECT date_trunc('minute', p_timestamp + random() * INTERVAL 1 MINUTE) AS m, count(*) AS n FROM t GROUP BY 1", false],
  // The console's hits over time: GROUP BY / ORDER BY an alias, held for datasets with no such column.
  ["SELECT time_bucket(INTERVAL '60 seconds', CAST(p_timestamp AS TIMESTAMP)) AS b, count(*) AS n FROM t GROUP BY b ORDER BY b", true],
  ["SELECT time_bucket(INTERVAL '60 seconds', CAST(p_timestamp AS TIMESTAMP), TIMESTAMP '1970-01-01') AS b, count(*) AS n FROM t GROUP BY b ORDER BY b", true],
  ["SELECT date_trunc('minute', p_timestamp) AS m, count(*) AS n FROM t GROUP BY m ORDER BY n DESC, m", true],
  // A bare name that is the table's binds to its row, and an alias of the count is no grouping key.
  ["SELECT date_trunc('minute', p_timestamp) AS t, count(*) AS n FROM t GROUP BY t", false],
  ["SELECT date_trunc('minute', p_timestamp) AS m, count(*) AS n FROM t GROUP BY n", false],
  ["SELECT date_trunc('minute', p_timestamp) AS m, count(*) AS n FROM t GROUP BY ALL", false],
  ["SELECT date_trunc('minute', p_timestamp) AS m, count(*) AS n FROM t GROUP BY ROLLUP (1)", false],
  ["SELECT DISTINCT date_trunc('minute', p_timestamp) AS m, count(*) AS n FROM t GROUP BY 1", false],
  ["SELECT date_trunc('minute', p_timestamp) AS m, count(*) AS n FROM t GROUP BY 1 ORDER BY count(*)", false],
  ["SELECT date_trunc('minute', p_timestamp) AS m, count(*) AS n FROM t GROUP BY 1 ORDER BY level", false],
  ["SELECT date_trunc('minute', p_timestamp) AS m, count(*) AS n, row_number() OVER () AS r FROM t GROUP BY 1", false],
  ["SELECT date_trunc('minute', p_timestamp) AS m, count(*) AS n FROM t GROUP BY 1 QUALIFY n > 1", false],
  ["WITH c AS (SELECT * FROM t) SELECT date_trunc('minute', p_timestamp) AS m, count(*) AS n FROM c GROUP BY 1", false],
  ["SELECT date_trunc('minute', a.p_timestamp) AS m, count(*) AS n FROM t a JOIN t b USING (level) GROUP BY 1", false],
  ["SELECT date_trunc('minute', p_timestamp) AS m, count(*) AS n FROM (SELECT * FROM t) GROUP BY 1", false],
  ["SELECT date_trunc('minute', p_timestamp) AS m FROM t GROUP BY 1", false],
  ["SELECT (SELECT 1) AS one, count(*) AS n FROM t GROUP BY p_timestamp", false],
  ["SELECT date_trunc('minute', p_timestamp) AS m, count(*) AS n FROM t GROUP BY 1 LIMIT (SELECT 2)", false],
];

describe('preAggregate: which statements are rewritten', () => {
  let conn: DuckDBConnection;
  beforeAll(async () => {
    conn = await (await DuckDBInstance.create(':memory:')).connect();
  });
  afterAll(() => conn.closeSync());

  it.each(SHAPES)('%s → %s', async (sql, rewritten) => {
    const plan = await planStatement(conn, sql, LIMITS);
    expect(plan.preAggregated !== undefined).toBe(rewritten);
    if (rewritten) expect(plan.preAggregated?.sql).toMatch(/__lh_rows/);
  });
});

describe('preAggregate: aliases named bare are reported, to be checked against the dataset columns', () => {
  let conn: DuckDBConnection;
  beforeAll(async () => {
    conn = await (await DuckDBInstance.create(':memory:')).connect();
  });
  afterAll(() => conn.closeSync());

  const cases: [string, string[]][] = [
    ["SELECT date_trunc('minute', p_timestamp) AS minute, count(*) AS n FROM t GROUP BY 1 ORDER BY 1", []],
    ["SELECT time_bucket(INTERVAL '60 seconds', p_timestamp) AS B, count(*) AS n FROM t GROUP BY b ORDER BY B", ['b']],
    ["SELECT date_trunc('minute', p_timestamp) AS m, count(*) AS n FROM t GROUP BY 1 ORDER BY n DESC", ['n']],
    ['SELECT p_timestamp, count(*) AS n FROM t GROUP BY p_timestamp ORDER BY p_timestamp', []],
  ];
  it.each(cases)('%s → %j', async (sql, names) => {
    expect((await planStatement(conn, sql, LIMITS)).preAggregated?.names.sort()).toEqual(names);
  });
});

describe('preAggregate: the rewritten statement answers exactly the same', () => {
  let conn: DuckDBConnection;
  beforeAll(async () => {
    conn = await (await DuckDBInstance.create(':memory:')).connect();
    for (const stmt of DIALECT_SQL) await conn.run(stmt);
    // Session zone with DST, so every TIMESTAMPTZ conversion goes through it.
    await conn.run("SET TimeZone = 'Europe/Berlin'");
    await conn.run('CREATE TABLE t (p_timestamp TIMESTAMP, time TIMESTAMP, level VARCHAR, v BIGINT)');
    // Each time on 1–5 rows, with different levels (some NULL): counts differ per bucket.
    const list = `[${TIMES.map((x) => (x === null ? 'NULL' : `'${x}'`)).join(', ')}]::VARCHAR[]`;
    await conn.run(
      `INSERT INTO t SELECT ts::TIMESTAMP, ts::TIMESTAMP, CASE i % 4 WHEN 0 THEN 'error' WHEN 1 THEN 'debug' WHEN 2 THEN NULL ELSE 'info' END, i
       FROM (SELECT unnest(${list}) AS ts, generate_subscripts(${list}, 1) AS k), range(1 + k % 5) AS r(i)`,
    );
  });
  afterAll(() => conn.closeSync());

  const run = async (sql: string) => {
    const reader = await conn.runAndReadAll(sql);
    return { names: reader.columnNames(), types: reader.columnTypes().map(String), rows: reader.getRowObjectsJson() };
  };

  it.each(SHAPES.filter(([, r]) => r).map(([sql]) => sql))('%s', async (sql) => {
    const plan = await planStatement(conn, sql, LIMITS);
    const original = await run(sql);
    const rewritten = await run(plan.preAggregated!.sql);
    expect(rewritten).toEqual(original);
    // The data is not trivial for this statement: an empty answer only where the WHERE says so.
    if (!/WHERE false/.test(sql)) expect(original.rows.length).toBeGreaterThan(0);
  });
});

describe('preAggregationPays: from what the catalog proves', () => {
  const cases: [string, { rows: number; minMs: number; maxMs: number }[], { rows: number }[], boolean][] = [
    ['1M rows received within 10 s', [{ rows: 1_000_000, minMs: 0, maxMs: 10_000 }], [], true],
    ['an hour of single events: up to one time per row', [{ rows: 1_000_000, minMs: 0, maxMs: 3_600_000 }], [], false],
    ['30 flushed files of one burst', Array.from({ length: 30 }, (_, i) => ({ rows: 33_000, minMs: i * 300, maxMs: i * 300 + 299 })), [], true],
    ['just under 16 rows per time', [{ rows: 15 * 1000, minMs: 0, maxMs: 999 }], [], false],
    ['16 rows per time', [{ rows: 16 * 1000, minMs: 0, maxMs: 999 }], [], true],
    ['unflushed rows count as all distinct', [{ rows: 100_000, minMs: 0, maxMs: 99 }], [{ rows: 100_000 }], false],
    ['nothing', [], [], false],
  ];
  it.each(cases)('%s', (_, files, segments, pays) => {
    expect(preAggregationPays(files, segments)).toBe(pays);
  });
});
