import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DomainError } from '../../src/errors.ts';
import { checkSqlText, PlanCache, planStatement } from '../../src/query/sql/sandbox.ts';
import { asciiLower, expandedSize, macroCosts, MAX_EXPANDED_EXPRESSIONS } from '../../src/query/sql/macroCost.ts';
import { parseTimeBound } from '../../src/query/sql/time.ts';

const LIMITS = { maxSqlBytes: 64 * 1024, maxDepth: 16 };

describe('planStatement: scopes, names and functions', () => {
  let conn: DuckDBConnection;
  beforeAll(async () => {
    conn = await (await DuckDBInstance.create(':memory:')).connect();
  });
  afterAll(() => conn.closeSync());

  // [sql, the dataset names it must resolve] — every table reference not a CTE in scope is a dataset.
  const cases: [string, string[]][] = [
    ['SELECT * FROM a', ['a']],
    ['WITH x AS (SELECT 1) SELECT * FROM x', []],
    ['WITH x AS (SELECT * FROM a) SELECT * FROM x, b', ['a', 'b']],
    // A CTE defined inside a subquery is not in scope outside it.
    ['SELECT * FROM (WITH x AS (SELECT 1) SELECT * FROM x) s, x', ['x']],
    ['SELECT * FROM (WITH "/p/f.parquet" AS (SELECT 1) SELECT 1) s, \'/p/f.parquet\'', ['/p/f.parquet']],
    // A CTE sees earlier CTEs, not later ones, nor itself unless recursive.
    ['WITH a AS (SELECT * FROM b), b AS (SELECT 1) SELECT * FROM a', ['b']],
    ['WITH a AS (SELECT 1), b AS (SELECT * FROM a) SELECT * FROM b', []],
    ['WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 3) SELECT * FROM t', []],
    // CTE names compare case-insensitively, as DuckDB binds them.
    ['WITH "X" AS (SELECT 1) SELECT * FROM x', []],
    ['SELECT (SELECT max(v) FROM s) FROM t WHERE id IN (SELECT id FROM u)', ['s', 't', 'u']],
    ['SELECT * FROM a UNION ALL SELECT * FROM b', ['a', 'b']],
    ['SELECT * FROM a JOIN b ON a.id = b.id LEFT JOIN c USING (id)', ['a', 'b', 'c']],
    ['SELECT * FROM range(3), unnest([1, 2])', []],
    ['SELECT count(*) FROM a WHERE EXISTS (WITH y AS (SELECT 1) SELECT * FROM y)', ['a']],
  ];
  it.each(cases)('%s → %j', async (sql, tables) => {
    expect((await planStatement(conn, sql, LIMITS)).tables.sort()).toEqual([...tables].sort());
  });

  const refused: string[] = [
    'SELECT * FROM main.a',
    'SELECT * FROM memory.main.a',
    'SELECT * FROM pg_catalog.pg_class',
    "SELECT * FROM read_parquet('x.parquet')",
    "SELECT * FROM read_csv('/etc/passwd')",
    'SELECT * FROM duckdb_settings()',
    "SELECT * FROM query('SELECT 1')",
    "SELECT current_setting('threads')",
    "SELECT getenv('HOME')",
    "SELECT pg_catalog.current_setting('threads')",
    'SELECT pg_get_viewdef(1)',
    'DESCRIBE a',
    'SUMMARIZE a',
    'SHOW TABLES',
    'INSERT INTO a VALUES (1)',
    'COPY a TO \'/tmp/x.csv\'',
    "ATTACH '/tmp/x.db'",
    'SET threads = 1',
    'SELECT 1; SELECT 2',
    'PRAGMA version',
    // Names compared as DuckDB compares them: a CTE named with K (KELVIN SIGN) is not duckdb_views.
    'WITH "duc\u212Adb_views" AS (SELECT 1) SELECT * FROM duckdb_views',
    'WITH "\u212A" AS (SELECT 1) SELECT * FROM k',
    'SELECT * FROM "ﬁle"',
    // Functions that bind SQL text given as a value.
    "SELECT json_serialize_plan('SELECT current_setting(''temp_directory'')', optimize := true)",
    "SELECT json_serialize_sql('SELECT 1')",
    "SELECT json_deserialize_sql(json_serialize_sql('SELECT 1'))",
    "SELECT * FROM json_execute_serialized_sql(json_serialize_sql('SELECT 1'))",
    "SELECT * FROM query_table('a')",
    "SELECT * FROM sql_auto_complete('SEL')",
    "SELECT which_secret('s3://b/x', 's3')",
    // Macros copy their arguments: eight nested to_timestamp bind 1.7 million expressions.
    `SELECT ${'to_timestamp('.repeat(8)}1${')'.repeat(8)}`,
  ];
  it.each(refused)('refuses %s', async (sql) => {
    await expect(planStatement(conn, sql, LIMITS)).rejects.toBeInstanceOf(DomainError);
  });

  it('accepts macros nested a few levels and large statements without macros', async () => {
    await expect(planStatement(conn, `SELECT ${'to_timestamp('.repeat(3)}1${')'.repeat(3)}`, LIMITS)).resolves.toBeDefined();
    await expect(planStatement(conn, `SELECT ${'nvl('.repeat(12)}1${', 2)'.repeat(12)}`, LIMITS)).resolves.toBeDefined();
    const inList = `SELECT count(*) FROM a WHERE x IN (${Array.from({ length: 10_000 }, (_, i) => i).join(',')})`;
    await expect(planStatement(conn, inList, LIMITS)).resolves.toMatchObject({ tables: ['a'] });
  });

  it('bounds nesting of queries', async () => {
    const nested = (d: number) => `SELECT ${'(SELECT '.repeat(d)}1${')'.repeat(d)}`;
    await expect(planStatement(conn, nested(14), LIMITS)).resolves.toBeDefined();
    await expect(planStatement(conn, nested(20), LIMITS)).rejects.toThrow(/nested deeper/);
  });
});

describe('planStatement: row bound (small results run whole in the worker)', () => {
  let conn: DuckDBConnection;
  beforeAll(async () => {
    conn = await (await DuckDBInstance.create(':memory:')).connect();
  });
  afterAll(() => conn.closeSync());

  // [sql, the bound the parse tree proves, or undefined]
  const cases: [string, number | undefined][] = [
    ['SELECT count(*) AS n FROM t', 1],
    ['SELECT count(*) * 2 AS n, max(x) - min(x) AS spread FROM t WHERE a > 1', 1],
    ['SELECT 1 AS x', 1],
    ['SELECT a FROM t ORDER BY a DESC LIMIT 100', 100],
    ['SELECT a FROM t LIMIT 10 OFFSET 1000', 10],
    ['SELECT a FROM t UNION ALL SELECT a FROM u LIMIT 5', 5],
    ['SELECT level, count(*) AS n FROM t GROUP BY level', undefined],
    ['SELECT level, count(*) AS n FROM t GROUP BY ALL', undefined],
    ['SELECT a FROM t', undefined],
    ['SELECT count(*) FROM t UNION ALL SELECT count(*) FROM u', undefined],
    ['SELECT unnest(list(a)) FROM t', undefined],
    ['SELECT count(*) OVER () FROM t', undefined],
    ['SELECT unnest(range(1000000000))', undefined],
    ['SELECT a FROM t LIMIT (SELECT 5)', undefined],
  ];
  it.each(cases)('%s → %j', async (sql, bound) => {
    expect((await planStatement(conn, sql, LIMITS)).rowBound).toBe(bound);
  });
});

describe('macro expansion', () => {
  let conn: DuckDBConnection;
  beforeAll(async () => {
    conn = await (await DuckDBInstance.create(':memory:')).connect();
  });
  afterAll(() => conn.closeSync());
  const parse = async (expr: string) => {
    const r = await conn.runAndReadAll('SELECT json_serialize_sql($1::VARCHAR) AS ast', [`SELECT ${expr}`]);
    return (JSON.parse(String(r.getRowObjects()[0].ast)) as { statements: Record<string, unknown>[] }).statements[0];
  };

  // [macro bodies, macro, copies of its argument the expansion makes]
  const cases: [Record<string, [string[], string]>, string, number][] = [
    [{ id: [['x'], 'x'] }, 'id', 1],
    [{ twice: [['x'], 'x + x'] }, 'twice', 2],
    [{ twice: [['x'], 'x + x'], quad: [['y'], 'twice(y) * twice(y)'] }, 'quad', 4],
    [{ twice: [['x'], 'x + x'], nested: [['y'], 'twice(twice(y))'] }, 'nested', 4],
    [{ pick: [['a', 'b'], 'CASE WHEN a THEN b ELSE a END'] }, 'pick', 2],
    [{ Mixed: [['X'], 'x * X'] }, 'mixed', 2],
  ];
  it.each(cases)('%j: %s copies its argument %i times', async (bodies, name, factor) => {
    const defs = new Map<string, { params: string[]; body: Record<string, unknown> }[]>();
    for (const [n, [params, body]] of Object.entries(bodies)) defs.set(asciiLower(n), [{ params, body: await parse(body) }]);
    expect(macroCosts(defs).get(name)?.factor).toBe(factor);
  });

  it('counts a statement\'s expressions with every macro call expanded', async () => {
    const defs = new Map([['twice', [{ params: ['x'], body: await parse('x + x') }]]]);
    const costs = macroCosts(defs);
    const plain = expandedSize(await parse('1 + 2'), costs, Infinity);
    const once = expandedSize(await parse('twice(1 + 2)'), costs, Infinity);
    const twice = expandedSize(await parse('twice(twice(1 + 2))'), costs, Infinity);
    expect(once).toBeGreaterThan(plain);
    expect(twice).toBeGreaterThan(2 * plain);
    // Deep nesting grows as 2^depth and stops counting past the limit.
    const deep = expandedSize(await parse(`${'twice('.repeat(30)}1${')'.repeat(30)}`), costs, MAX_EXPANDED_EXPRESSIONS);
    expect(deep).toBeGreaterThan(MAX_EXPANDED_EXPRESSIONS);
  });
});

describe('checkSqlText', () => {
  it.each([
    ['a statement over the size limit', `SELECT '${'x'.repeat(70_000)}'`, /bytes/],
    ['brackets nested beyond the bound', `SELECT ${'('.repeat(100)}1${')'.repeat(100)}`, /brackets/],
  ])('refuses %s', (_what, sql, message) => {
    expect(() => checkSqlText(sql, LIMITS)).toThrow(message);
  });
  it('ignores brackets inside literals, quoted names and comments', () => {
    const inside = '('.repeat(200);
    expect(() => checkSqlText(`SELECT '${inside}' AS "${inside}" -- ${inside}\n/* ${inside} */`, LIMITS)).not.toThrow();
  });
});

describe('PlanCache', () => {
  it('stays within its byte budget, evicting the least recently used', () => {
    const cache = new PlanCache(64 * 1024);
    for (let i = 0; i < 500; i++) cache.set(`SELECT ${i} ${'x'.repeat(1000)}`, { tables: ['t'] });
    expect(cache.size.bytes).toBeLessThanOrEqual(64 * 1024);
    expect(cache.size.entries).toBeGreaterThan(10);
    expect(cache.get(`SELECT 499 ${'x'.repeat(1000)}`)).toEqual({ tables: ['t'] });
    expect(cache.get(`SELECT 0 ${'x'.repeat(1000)}`)).toBeUndefined();
  });
  it('does not cache one statement larger than an eighth of the budget', () => {
    const cache = new PlanCache(64 * 1024);
    cache.set('x'.repeat(10_000), { tables: [] });
    expect(cache.size.entries).toBe(0);
  });
});

describe('parseTimeBound', () => {
  const now = Date.parse('2026-11-23T12:00:00Z');
  it.each([
    ['now', now],
    ['10m', now - 600_000],
    ['now-1h', now - 3_600_000],
    ['2w', now - 14 * 86_400_000],
    ['2026-11-22', Date.parse('2026-11-22T00:00:00Z')],
    ['2026-11-22T10:00:00', Date.parse('2026-11-22T10:00:00Z')],
    ['2026-11-22T10:00:00.123Z', Date.parse('2026-11-22T10:00:00.123Z')],
    ['2026-11-22T10:00:00+02:00', Date.parse('2026-11-22T08:00:00Z')],
    ['2026-11-22 10:00:00-0130', Date.parse('2026-11-22T11:30:00Z')],
    ['2024-02-29', Date.parse('2024-02-29T00:00:00Z')],
  ])('%s', (text, expected) => expect(parseTimeBound(text, 't', now)).toBe(expected));

  it.each(['99999999999w', '2026-02-30', '2025-02-29', '2026-13-01', '2026-01-01T24:00:00Z', '2026-01-01T10:60:00Z', '10000-01-01', 'yesterday', '', '1e3m', '2026-01-01T00:00:00+25:00'])(
    'refuses %j',
    (text) => expect(() => parseTimeBound(text, 't', now)).toThrow(DomainError),
  );
});
