import * as fs from 'node:fs';
import * as path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIXED } from '../../src/query/catalog/settings.ts';
import { CatalogDb, type DatasetSchema } from '../../src/query/catalog/catalogDb.ts';
import { strptimeFormat } from '../../src/query/catalog/catalogRewrite.ts';
import { sessionCommand } from '../../src/doors/pg/sessionCommands.ts';

/**
 * Replays the catalog and session statements real clients send before any user query (psql's
 * meta-commands, pgjdbc's DatabaseMetaData, SQLAlchemy's inspector, captured from them against this
 * server; Grafana's and Metabase's from their sources) against the catalog database: every one must
 * be classified as a catalog or session statement and answer without an error.
 */

const statements = JSON.parse(fs.readFileSync(path.join(import.meta.dirname, '../fixtures/pg/catalog-statements.json'), 'utf8')) as { client: string; source: string; sql: string }[];

const datasets: DatasetSchema[] = [
  { name: 'logs', schema: { level: 'VARCHAR', n: 'BIGINT', msg: 'VARCHAR', p_timestamp: 'TIMESTAMP', ratio: 'DOUBLE', tags: 'VARCHAR[]' } },
  { name: 'spans', schema: { trace_id: 'VARCHAR', duration: 'DOUBLE', start: 'TIMESTAMP_NS' } },
];

let db: CatalogDb;

beforeAll(async () => {
  db = await CatalogDb.open(() => datasets, { timeoutMs: 30_000, maxRows: 100_000, maxDepth: 16 });
});
afterAll(() => db?.close());

/** All rows of a catalog statement, as text. */
async function rows(sql: string): Promise<string[][]> {
  const st = await db.classify(sql);
  expect(st.kind).toBe('catalog');
  const answer = await db.run(st.sql, []);
  const out: string[][] = [];
  for (;;) {
    const batch = await answer.next();
    if (!batch) break;
    let pos = 0;
    while (pos < batch.data.length) {
      const len = batch.data.readInt32BE(pos + 1);
      const n = batch.data.readInt16BE(pos + 5);
      let p = pos + 7;
      const row: string[] = [];
      for (let i = 0; i < n; i++) {
        const l = batch.data.readInt32BE(p);
        p += 4;
        row.push(l < 0 ? 'NULL' : batch.data.toString('utf8', p, p + l));
        if (l > 0) p += l;
      }
      out.push(row);
      pos += 1 + len;
    }
  }
  return out;
}

describe('catalog statements real clients send', () => {
  it('has statements from every client', () => {
    expect(new Set(statements.map((s) => s.client))).toEqual(new Set(['psql', 'pgjdbc', 'sqlalchemy', 'grafana', 'metabase']));
  });

  for (const [i, s] of statements.entries()) {
    it(`${s.client} #${i}: ${s.sql.replace(/\s+/g, ' ').slice(0, 70)}`, async () => {
      if (sessionCommand.recognises(s.sql)) {
        expect(() => sessionCommand(s.sql, new Map(), 'I')).not.toThrow();
        return;
      }
      await rows(s.sql);
    });
  }
});

describe('catalog answers', () => {
  it('lists exactly the readable datasets as tables of schema public', async () => {
    const tables = await rows(`SELECT n.nspname, c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r' ORDER BY 2`);
    expect(tables).toEqual([
      ['public', 'logs'],
      ['public', 'spans'],
    ]);
  });

  it('types columns with PostgreSQL oids and names', async () => {
    const cols = await rows(
      `SELECT a.attname, a.atttypid, pg_catalog.format_type(a.atttypid, a.atttypmod), t.typname FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid = a.atttypid WHERE a.attrelid = 'logs'::regclass ORDER BY a.attnum`,
    );
    expect(cols).toEqual([
      ['level', '25', 'text', 'text'],
      ['n', '20', 'bigint', 'int8'],
      ['msg', '25', 'text', 'text'],
      ['p_timestamp', '1114', 'timestamp without time zone', 'timestamp'],
      ['ratio', '701', 'double precision', 'float8'],
      ['tags', '1009', 'text[]', '_text'],
    ]);
  });

  it('answers version() and session functions as PostgreSQL 15', async () => {
    const [[version]] = await rows('SELECT version()');
    expect(version).toMatch(/^PostgreSQL 15\.0 /);
  });

  it('discloses neither the engine nor its settings: version() and pg_settings (L2)', async () => {
    const probe = await DuckDBInstance.create(':memory:');
    const conn = await probe.connect();
    const duckdbVersion = String((await conn.runAndReadAll('SELECT library_version AS v FROM pragma_version()')).getRowObjects()[0].v);
    const duckdbSettings = new Set((await conn.runAndReadAll('SELECT name FROM duckdb_settings()')).getRowObjects().map((r) => String(r.name)));
    conn.closeSync();
    probe.closeSync();
    const [[version]] = await rows('SELECT version()');
    expect(version).not.toContain(duckdbVersion);
    expect(version).not.toMatch(/duckdb/i);
    const settings = await rows('SELECT name, setting, vartype FROM pg_catalog.pg_settings ORDER BY name');
    // Exactly the PostgreSQL settings the server presents (SHOW answers the same), none of DuckDB's.
    expect(settings.map(([name]) => name)).toEqual(Object.keys(FIXED).sort());
    for (const [name, setting] of settings) expect(setting, name).toBe(FIXED[name]);
    expect([...duckdbSettings].filter((name) => !(name in FIXED)).length).toBeGreaterThan(0);
    expect(await rows(`SELECT setting FROM pg_settings WHERE name = 'max_index_keys'`)).toEqual([['32']]);
  });

  it('answers information_schema.columns with PostgreSQL type names and udt_name (issue 36 #3)', async () => {
    // What PostgreSQL 15 answers for columns of these types (text, bigint, timestamp, double precision, text[]).
    expect(
      await rows(`SELECT column_name, data_type, udt_name, numeric_precision, datetime_precision, is_nullable FROM information_schema.columns WHERE table_schema = 'public' AND table_name = 'logs' ORDER BY ordinal_position`),
    ).toEqual([
      ['level', 'text', 'text', 'NULL', 'NULL', 'YES'],
      ['n', 'bigint', 'int8', '64', 'NULL', 'YES'],
      ['msg', 'text', 'text', 'NULL', 'NULL', 'YES'],
      ['p_timestamp', 'timestamp without time zone', 'timestamp', 'NULL', '6', 'YES'],
      ['ratio', 'double precision', 'float8', '53', 'NULL', 'YES'],
      ['tags', 'ARRAY', '_text', 'NULL', 'NULL', 'YES'],
    ]);
    // Grafana's query builder's statement (its PostgreSQL data source).
    expect(await rows(`SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'spans' ORDER BY column_name`)).toEqual([
      ['duration', 'double precision'],
      ['start', 'timestamp without time zone'],
      ['trace_id', 'text'],
    ]);
  });

  it('names one identity everywhere: the database and role of pg_database and pg_roles (issue 36 #5)', async () => {
    const [[datname]] = await rows('SELECT datname FROM pg_catalog.pg_database');
    const [[rolname]] = await rows('SELECT rolname FROM pg_catalog.pg_roles');
    expect(await rows('SELECT current_database(), current_catalog, current_user, session_user, user')).toEqual([[datname, datname, rolname, rolname, rolname]]);
    // Column names as PostgreSQL gives them.
    const st = await db.classify('SELECT current_database(), current_user, version()');
    expect((await db.run(st.sql, [])).fields.map((f) => f.name)).toEqual(['current_database', 'current_user', 'version']);
    // Each schema once.
    expect(await rows('SELECT schema_name FROM information_schema.schemata ORDER BY 1')).toEqual([['information_schema'], ['pg_catalog'], ['public']]);
    expect(await rows('SELECT pg_terminate_backend(1), pg_catalog.pg_cancel_backend(1), pg_catalog.pg_get_functiondef(1) IS NULL')).toEqual([['f', 'f', 't']]);
  });

  it('has pg_collation as PostgreSQL 15 (SQLAlchemy 2.1 reflection)', async () => {
    expect(await rows('SELECT oid, collname, collprovider FROM pg_catalog.pg_collation ORDER BY oid')).toEqual([
      ['100', 'default', 'd'],
      ['950', 'C', 'c'],
      ['951', 'POSIX', 'c'],
    ]);
  });

  it('holds no data and reads no files', async () => {
    expect(await rows('SELECT count(*) FROM pg_catalog.pg_class c, logs WHERE c.relname = \'logs\'')).toEqual([['0']]);
    await expect(db.classify("SELECT * FROM read_csv('/etc/passwd'), pg_catalog.pg_class")).rejects.toThrow(/not allowed/);
    await expect(db.classify('SELECT * FROM duckdb_settings(), pg_catalog.pg_class')).rejects.toThrow(/not allowed/);
    // A file function DuckDB would resolve by name, without the denied prefixes, still cannot open files.
    const st = await db.classify("SELECT * FROM 'x.csv', pg_catalog.pg_class");
    await expect(db.run(st.sql, [])).rejects.toThrow(/disabled|not allowed|Permission|does not exist/i);
  });

  it("turns PostgreSQL's to_timestamp formats into strptime's", () => {
    expect(strptimeFormat('YYYY-MM-DD HH24:MI:SS.US')).toBe('%Y-%m-%d %H:%M:%S.%f');
    expect(strptimeFormat('DD/MM/YYYY HH12:MI AM 100%')).toBe('%d/%m/%Y %I:%M %p 100%%');
  });

  it('classifies dataset statements as data, public-qualified names unqualified', async () => {
    expect(await db.classify('SELECT count(*) FROM logs')).toEqual({ kind: 'data', sql: 'SELECT count(*) FROM logs' });
    const st = await db.classify('SELECT "public"."logs"."n" FROM "public"."logs"');
    expect(st.kind).toBe('data');
    expect(st.sql).not.toMatch(/public/);
  });
});

describe('nanosecond time columns compared with timestamptz (issue 36 #2)', () => {
  // Rows on both sides of each bound; the expected rows follow from the bounds read in UTC.
  const ROWS = ['2020-01-01 00:00:00', '2024-12-31 21:30:00', '2024-12-31 22:30:00', '2099-01-01 00:00:00'];
  const cases: [string, string[]][] = [
    ["SELECT trace_id FROM spans WHERE start > now() - interval '1 day' ORDER BY 1", ['2099-01-01 00:00:00']],
    ["SELECT trace_id FROM spans WHERE start >= CAST('2025-01-01 00:00:00+02' AS TIMESTAMPTZ) ORDER BY 1", ['2024-12-31 22:30:00', '2099-01-01 00:00:00']],
    ["SELECT trace_id FROM spans WHERE '2025-01-01 00:00:00+02'::timestamptz > start ORDER BY 1", ['2020-01-01 00:00:00', '2024-12-31 21:30:00']],
    ["SELECT trace_id FROM spans WHERE start BETWEEN CAST('2024-12-31 23:00:00+01' AS TIMESTAMPTZ) AND now() ORDER BY 1", ['2024-12-31 22:30:00']],
    ["SELECT trace_id FROM spans WHERE start < date_trunc('day', now() + INTERVAL '-30 day') ORDER BY 1", ['2020-01-01 00:00:00', '2024-12-31 21:30:00', '2024-12-31 22:30:00']],
  ];
  it.each(cases)('%s', async (sql, want) => {
    const st = await db.classify(sql);
    expect(st.kind).toBe('data');
    const duck = await DuckDBInstance.create(':memory:');
    const conn = await duck.connect();
    try {
      // A session zone far from UTC: the comparison must not depend on it.
      await conn.run("SET TimeZone = 'America/Los_Angeles'");
      await conn.run(`CREATE TABLE spans AS SELECT CAST(t AS VARCHAR) AS trace_id, 1.0 AS duration, CAST(t AS TIMESTAMP_NS) AS start FROM (VALUES ${ROWS.map((r) => `(TIMESTAMP '${r}')`).join(', ')}) v(t)`);
      await expect(conn.run(sql), 'DuckDB refuses the statement as written').rejects.toThrow(/TIMESTAMP_NS/);
      const got = (await conn.runAndReadAll(st.sql)).getRowObjectsJson().map((r) => String(r.trace_id));
      expect(got).toEqual(want);
    } finally {
      conn.closeSync();
      duck.closeSync();
    }
  });
});
