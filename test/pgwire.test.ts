import * as net from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { psql, startPgServer, type PgTestServer } from './helpers/pg.ts';
import { query } from './helpers/server.ts';

/**
 * The PostgreSQL front door through real clients: psql (simple protocol, catalog meta-commands) and
 * node-postgres (extended protocol: parameters, binary results, portal row limits), against the real
 * service; answers compared with the HTTP query API's for the same statement.
 */

let server: PgTestServer;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function ingest(name: string, events: unknown[]): Promise<void> {
  const res = await server.request('/api/v1/ingest', { method: 'POST', json: events, headers: { 'X-P-Stream': name } });
  expect(res.status, await res.clone().text()).toBe(200);
}

function client(password = server.apiKey): pg.Client {
  return new pg.Client({ host: '127.0.0.1', port: server.pgPort, user: 'grafana', password, database: 'whatever' });
}

let between = '';

beforeAll(async () => {
  server = await startPgServer({ P_API_KEYS: 'test-admin-key-0123456789:admin,reader-logs:reader:pglogs,writer-key:writer' });
  await ingest('pglogs', [
    { level: 'info', n: 1, msg: 'first' },
    { level: 'error', n: 2, msg: "it's, {quoted}" },
  ]);
  // A second batch a little later, so a time condition can separate them.
  await sleep(1100);
  between = new Date(Date.now() - 500).toISOString();
  await sleep(600);
  await ingest('pglogs', [{ level: 'warn', n: 3, msg: 'third', ratio: 0.25 }]);
  await ingest('other', [{ secret: 'not for readers of pglogs' }]);
}, 120_000);

afterAll(async () => {
  await server?.stop();
});

describe('psql', () => {
  it('runs a user query as the HTTP API does', async () => {
    const out = await psql(server, 'SELECT n, level, msg FROM pglogs ORDER BY n', { extra: ['-A', '-t', '-F', '|'] });
    expect(out.trim().split('\n')).toEqual(['1|info|first', "2|error|it's, {quoted}", '3|warn|third']);
    const http = await query(server, 'SELECT n, level, msg FROM pglogs ORDER BY n');
    expect(http.map((r) => `${r.n}|${r.level}|${r.msg}`)).toEqual(out.trim().split('\n'));
  });

  it('answers \\dt, \\d name, \\l and \\dn from the catalog, with only the datasets the key may read', async () => {
    const dt = await psql(server, '\\dt');
    expect(dt).toMatch(/public \| other\s+\| table/);
    expect(dt).toMatch(/public \| pglogs \| table/);
    const d = await psql(server, '\\d pglogs');
    expect(d).toMatch(/level\s+\| text/);
    expect(d).toMatch(/n\s+\| bigint/);
    expect(d).toMatch(/p_timestamp\s+\| timestamp without time zone/);
    expect(await psql(server, '\\l')).toMatch(/lakehouse/);
    expect(await psql(server, '\\dn')).toMatch(/public/);
    // A reader of pglogs only: the other dataset is not in its catalog, and not readable.
    const scoped = await psql(server, '\\dt', { password: 'reader-logs' });
    expect(scoped).toMatch(/pglogs/);
    expect(scoped).not.toMatch(/other/);
    await expect(psql(server, 'SELECT * FROM other', { password: 'reader-logs' })).rejects.toThrow(/may not read dataset "other"/);
  });

  it('answers SET, SHOW and transaction statements as a read-only server', async () => {
    const out = await psql(server, 'BEGIN; SET application_name = \'x\'; SHOW application_name; SHOW transaction_read_only; SAVEPOINT a; ROLLBACK TO SAVEPOINT a; COMMIT', { extra: ['-A', '-t', '-q'] });
    expect(out.trim().split('\n')).toEqual(['x', 'on']);
    await expect(psql(server, "INSERT INTO pglogs (n) VALUES (9)")).rejects.toThrow(/read-only/);
  });

  it('refuses a wrong password and a writer key', async () => {
    await expect(psql(server, 'SELECT 1', { password: 'wrong' })).rejects.toThrow(/password authentication failed/);
    await expect(psql(server, 'SELECT 1', { password: 'writer-key' })).rejects.toThrow(/writer key may not read/);
  });
});

describe('node-postgres', () => {
  it('binds parameters (numbers, strings, timestamps) and the time condition chooses the rows', async () => {
    const c = client();
    await c.connect();
    try {
      const all = await c.query('SELECT n FROM pglogs WHERE n >= $1 AND msg <> $2 ORDER BY n', [1, "it's, {quoted}"]);
      expect(all.rows.map((r) => Number(r.n))).toEqual([1, 3]);
      const later = await c.query('SELECT n FROM pglogs WHERE p_timestamp >= $1 ORDER BY n', [new Date(between)]);
      expect(later.rows.map((r) => Number(r.n))).toEqual([3]);
      const earlier = await c.query(`SELECT count(*) AS c FROM pglogs WHERE p_timestamp < '${between}'`);
      expect(Number(earlier.rows[0].c)).toBe(2);
      const grafana = await c.query(`SELECT n FROM pglogs WHERE p_timestamp BETWEEN '${between}' AND '2100-01-01T00:00:00Z' ORDER BY n`);
      expect(grafana.rows.map((r) => Number(r.n))).toEqual([3]);
      // A value that tries to change the statement stays a value.
      const injected = await c.query('SELECT count(*) AS c FROM pglogs WHERE level = $1', ["x' OR '1'='1"]);
      expect(Number(injected.rows[0].c)).toBe(0);
    } finally {
      await c.end();
    }
  });

  it('parses a statement once in the service, and a repeated one not at all (issue 35)', async () => {
    /** Parses by site (lakehouse_sql_parses_total; the query workers' reported back), setup's left out. */
    const parses = async () => {
      const text = await (await server.request('/metrics')).text();
      return [...text.matchAll(/^lakehouse_sql_parses_total\{site="(\w+)"\} (\d+)/gm)].filter((m) => m[1] !== 'setup').map((m) => `${m[1]} ${m[2]}`);
    };
    const delta = (before: string[], after: string[]) => {
      const was = new Map(before.map((l) => [l.split(' ')[0], Number(l.split(' ')[1])]));
      return Object.fromEntries(after.map((l) => [l.split(' ')[0], Number(l.split(' ')[1]) - (was.get(l.split(' ')[0]) ?? 0)]).filter(([, d]) => d !== 0));
    };
    const sql = `SELECT n FROM pglogs WHERE p_timestamp >= '${between}' AND n > 0 ORDER BY n`;
    const c = client();
    await c.connect();
    try {
      const before = await parses();
      const first = await c.query(sql);
      const once = await parses();
      const again = await c.query(sql);
      // One parse in the service (the worker classifies from its tree, the sandbox plans from it), and
      // the worker's DuckDB parsing the text it runs; repeated, only the latter.
      expect(delta(before, once)).toEqual({ pg: 1, execute: 1 });
      expect(delta(once, await parses())).toEqual({ execute: 1 });
      // The range taken from the kept tree chose the same rows the HTTP API returns for the statement.
      const http = await query(server, sql);
      expect(first.rows.map((r) => Number(r.n))).toEqual(http.map((r) => Number(r.n)));
      expect(again.rows).toEqual(first.rows);
    } finally {
      await c.end();
    }
  });

  it("runs the data queries Grafana, Metabase and Superset write", async () => {
    const c = client();
    await c.connect();
    try {
      // Grafana: $__timeGroupAlias(p_timestamp, 1m) and $__timeFilter(p_timestamp), expanded.
      const grafana = await c.query(
        `SELECT floor(extract(epoch from p_timestamp)/60)*60 AS "time", count(*) AS requests FROM pglogs WHERE p_timestamp BETWEEN '1970-01-01T00:00:00Z' AND '2100-01-01T00:00:00Z' GROUP BY 1 ORDER BY 1`,
      );
      expect(grafana.rows.reduce((s, r) => s + Number(r.requests), 0)).toBe(3);
      // Metabase: names qualified with the schema, a timestamptz literal.
      const metabase = await c.query(
        `SELECT "public"."pglogs"."level" AS "level", count(*) AS "count" FROM "public"."pglogs" WHERE "public"."pglogs"."p_timestamp" >= timestamp with time zone '${between.replace('T', ' ').replace('Z', '+00')}' GROUP BY "public"."pglogs"."level" ORDER BY "public"."pglogs"."level" ASC`,
      );
      expect(metabase.rows).toEqual([{ level: 'warn', count: '1' }]);
      // Superset: to_timestamp with a PostgreSQL format.
      const superset = await c.query(
        `SELECT n FROM pglogs WHERE p_timestamp >= TO_TIMESTAMP('${between.replace('T', ' ').replace('Z', '')}000', 'YYYY-MM-DD HH24:MI:SS.US') ORDER BY n`,
      );
      expect(superset.rows.map((r) => Number(r.n))).toEqual([3]);
    } finally {
      await c.end();
    }
  });

  it('returns binary results with the right types', async () => {
    const c = client();
    await c.connect();
    try {
      const r = await c.query({
        text: "SELECT n, ratio, level, p_timestamp, true AS b, [1, 2] AS l, DATE '2024-02-29' AS d, 12.34::DECIMAL(10,2) AS num, 7::INTEGER AS i FROM pglogs WHERE n = 3",
        binary: true,
      } as pg.QueryConfig);
      expect(r.fields.map((f) => f.dataTypeID)).toEqual([20, 701, 25, 1114, 16, 1007, 1082, 1700, 23]);
      const row = r.rows[0];
      expect(row.n).toBe('3');
      expect(row.ratio).toBe(0.25);
      expect(row.level).toBe('warn');
      expect(row.p_timestamp).toBeInstanceOf(Date);
      expect(row.b).toBe(true);
      expect(row.l.map(Number)).toEqual([1, 2]);
      expect(row.num).toBe('12.34');
      expect(row.i).toBe(7);
    } finally {
      await c.end();
    }
  });

  it('suspends a portal at its row limit and continues it (nothing cut)', async () => {
    const c = client();
    await c.connect();
    try {
      // node-postgres executes with a row limit and re-executes on PortalSuspended until complete.
      const r = await c.query({ text: 'SELECT range AS i FROM range(5000)', rows: 7 } as pg.QueryConfig);
      expect(r.rows.length).toBe(5000);
      expect(r.rows.at(-1).i).toBe('4999');
    } finally {
      await c.end();
    }
  });

  it('reports errors with SQLSTATEs and keeps the connection usable', async () => {
    const c = client();
    await c.connect();
    try {
      await expect(c.query('SELECT * FROM nope')).rejects.toMatchObject({ code: '42P01' });
      await expect(c.query('DELETE FROM pglogs')).rejects.toMatchObject({ code: '25006' });
      await expect(c.query("SELECT read_csv('/etc/passwd')")).rejects.toMatchObject({ code: '42601' });
      expect((await c.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
      // In a transaction block, a failed statement aborts the block until ROLLBACK, as in PostgreSQL.
      await c.query('BEGIN');
      await expect(c.query('SELECT * FROM nope')).rejects.toMatchObject({ code: '42P01' });
      await expect(c.query('SELECT 1')).rejects.toMatchObject({ code: '25P02' });
      await c.query('ROLLBACK');
      expect((await c.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    } finally {
      await c.end();
    }
  });
});

// Malformed, oversized and unknown messages (and random bytes after a login) are the door's own parsing:
// test/unit/pgInProcess.test.ts.
