import { execFile } from 'node:child_process';
import * as net from 'node:net';
import * as path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PG_CLIENTS, psql, requireTool, startPgServer, type PgTestServer } from './helpers/pg.ts';
import { ADMIN_KEY } from './helpers/server.ts';
import { frame, cstr, int16, int32 } from './helpers/pgFrames.ts';

/**
 * The PostgreSQL door behind the same guards as HTTP (issue 30: A1, A4, A7, L2), with the attacker's
 * reproducers, through node-postgres, psql and raw protocol messages (for what no client library
 * lets one do on purpose: leave a portal suspended). One server; two reader keys, few query slots and
 * a short time limit, so that the limits are reached with small statements.
 */

const run = promisify(execFile);
const READER_A = 'reader-a-key-0123456789';
const READER_B = 'reader-b-key-0123456789';
let server: PgTestServer;
/** A7's own server (the same settings), so that its wait for the time limit runs beside A1's. */
let portalServer: PgTestServer;

/** Two keys, few query slots and a time limit: the guards under test. */
const GUARDED = {
  P_API_KEYS: `${ADMIN_KEY}:admin,${READER_A}:reader:app,${READER_B}:reader`,
  // A catalog statement on a freshly started worker (after the memory test killed one) opens the
  // catalog and classifies first: 6 s was too short at load ~28, 10 s at load ~30 (two suites at once).
  P_QUERY_TIMEOUT: '20s',
  P_QUERY_CONCURRENCY: '2',
  P_QUERY_CONCURRENCY_PER_KEY: '1',
  P_QUERY_WORKER_MAX_MEMORY: '256MiB',
  // Rows stay in the WAL for the whole file (issue 36 #1 is about the WAL part of the scan).
  P_FLUSH_INTERVAL: '10m',
};

beforeAll(async () => {
  [server, portalServer] = await Promise.all([startPgServer(GUARDED), startPgServer(GUARDED)]);
  // A7's server answers one statement first, so that its portal does not wait for a cold worker to open
  // the catalog (the main server's worker is warmed by the tests before A1 and A7).
  const warming = (async () => {
    const c = new pg.Client({ host: '127.0.0.1', port: portalServer.pgPort, user: 'warm', password: READER_B, database: 'd' });
    await c.connect();
    await c.query('SELECT 1 AS one');
    await c.end();
  })();
  const res = await server.request('/api/v1/ingest', { method: 'POST', json: [{ level: 'info', n: 1 }], headers: { 'X-P-Stream': 'app' } });
  expect(res.status).toBe(200);
  const nowNanos = `${BigInt(Date.now()) * 1_000_000n}`;
  const otlp = await server.request('/v1/logs', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'X-P-Stream': 'otel', 'X-P-Log-Source': 'otel-logs' },
    body: JSON.stringify({ resourceLogs: [{ scopeLogs: [{ logRecords: [{ timeUnixNano: nowNanos, body: { stringValue: 'unflushed' } }, { timeUnixNano: nowNanos, body: { stringValue: 'also' } }] }] }] }),
  });
  expect(otlp.status, await otlp.clone().text()).toBe(200);
  await warming;
}, 120_000);

afterAll(async () => {
  await Promise.all([server?.stop(), portalServer?.stop()]);
});

const client = (password: string) => new pg.Client({ host: '127.0.0.1', port: server.pgPort, user: 'attacker', password, database: 'd' });

/** Runs one statement on a fresh connection; resolves with its rows or its error's SQLSTATE and message. */
async function attempt(password: string, sql: string): Promise<{ rows?: Record<string, unknown>[]; code?: string; message?: string }> {
  const c = client(password);
  await c.connect();
  try {
    return { rows: (await c.query(sql)).rows };
  } catch (err) {
    return { code: (err as { code?: string }).code, message: (err as Error).message };
  } finally {
    await c.end().catch(() => undefined);
  }
}

/** HTTP ingestion and an admin query still answer. */
async function serviceAnswers(): Promise<void> {
  const ingest = await server.request('/api/v1/ingest', { method: 'POST', json: [{ level: 'probe', n: 2 }], headers: { 'X-P-Stream': 'probe' } });
  expect(ingest.status).toBe(200);
  const q = await server.request('/api/v1/query', { method: 'POST', json: { query: 'SELECT 1 AS one', startTime: '1970-01-01T00:00:00Z', endTime: '2100-01-01T00:00:00Z' } });
  expect(q.status, await q.clone().text()).toBe(200);
}

describe('A1: catalog statements run under the query guards, in a query worker', () => {
  it('refuses a deeply nested catalog statement (it hung the whole service before)', async () => {
    const deep = `SELECT version(), ${'(SELECT '.repeat(40)}1${')'.repeat(40)}`;
    const r = await attempt(READER_A, deep);
    expect(r.code).toBe('42601');
    expect(r.message).toMatch(/nested deeper than 16 levels/);
    await serviceAnswers();
  });

  it("stops a catalog statement at the worker's memory cap, not the service's memory", async () => {
    const r = await attempt(READER_A, "SELECT version(), len(string_split(repeat('ab,', 30000000), ','))");
    // The worker is killed over its cap (54000), or DuckDB's own limit stops it first: never the service.
    expect(r.rows).toBeUndefined();
    expect(r.code).toMatch(/^(54000|53200|42601)$/);
    expect(r.message).toMatch(/memory/i);
    await serviceAnswers();
  }, 60_000);

  it('still answers client introspection and data statements (psql)', async () => {
    const dt = await psql(server, '\\dt', { password: READER_A });
    expect(dt).toMatch(/public \| app\s+\| table/);
    expect(dt).not.toMatch(/probe/);
    const out = await psql(server, 'SELECT n FROM public.app', { password: READER_A, extra: ['-A', '-t'] });
    expect(out.trim()).toBe('1');
  });
});

describe('A5: the public.<dataset> rewrite keeps constants a double cannot hold', () => {
  // Each statement as Metabase, Superset and DBeaver write it (schema-qualified), against its
  // un-rewritten twin (the bare dataset name, which reaches DuckDB as written).
  const constants = ['9007199254740993', '18446744073709551615', '1e20', '123456789012345678901234.5', '-9223372036854775808'];
  it.each(constants)('%s', async (k) => {
    const c = client(READER_A);
    await c.connect();
    try {
      const qualified = await c.query(`SELECT n + ${k} AS v, ${k} AS k, count(*) FILTER (WHERE n + ${k} > ${k}) AS above FROM "public"."app" GROUP BY n`);
      const twin = await c.query(`SELECT n + ${k} AS v, ${k} AS k, count(*) FILTER (WHERE n + ${k} > ${k}) AS above FROM app GROUP BY n`);
      expect(qualified.rows).toEqual(twin.rows);
      // n = 1: above the constant, except where a double (1e20) cannot tell 1e20 + 1 from 1e20.
      expect(qualified.rows[0].above).toBe(k.includes('e') ? '0' : '1');
    } finally {
      await c.end();
    }
  });
});

describe('issue 36 #1: nanosecond time columns with unflushed rows, over any range', () => {
  it('answers SELECT * and count(*) over an OTLP dataset whose rows are still in the WAL (psql, node-postgres, HTTP)', async () => {
    expect((await psql(server, 'SELECT count(*) FROM otel', { extra: ['-A', '-t'] })).trim()).toBe('2');
    const c = client(server.apiKey);
    await c.connect();
    try {
      const rows = (await c.query('SELECT * FROM otel')).rows;
      expect(rows.map((r) => r.body).sort()).toEqual(['also', 'unflushed']);
    } finally {
      await c.end();
    }
    // Over HTTP with a range beyond what TIMESTAMP_NS holds (1677–2262).
    const res = await server.request('/api/v1/query', { method: 'POST', json: { query: 'SELECT count(*) AS n FROM otel', startTime: '1600-01-01T00:00:00Z', endTime: '2500-01-01T00:00:00Z' } });
    expect(res.status, await res.clone().text()).toBe(200);
    expect(await res.json()).toEqual([{ n: 2 }]);
  });
});

describe('issue 36 #2: nanosecond time columns compared with timestamptz', () => {
  it("psycopg's time-zone-aware parameters (text and binary) and now() - interval select the rows", async () => {
    const python = requireTool(path.join(PG_CLIENTS, 'venv/bin/python'), 'the Python venv with psycopg');
    const script = path.join(import.meta.dirname, 'fixtures/pg/tzparams.py');
    const { stdout } = await run(python, [script, String(server.pgPort), server.apiKey, 'otel'], { timeout: 120_000 });
    // Both records were sent a moment ago: after a day ago, before tomorrow.
    expect(JSON.parse(stdout)).toEqual({ param_day_ago: 2, param_tomorrow: 0, binary_param: 2, now_interval: 2 });
  });
});

describe('issue 36 #4: SQLAlchemy reflection, the newest of each line users install', () => {
  it.each(['1.4', '2.0', '2.1'])('SQLAlchemy %s reflects a dataset (inspector, Table(autoload_with=…)) and counts its rows', async (line) => {
    const python = requireTool(path.join(PG_CLIENTS, `venv-sqlalchemy-${line}/bin/python`), `the Python venv with SQLAlchemy ${line}`);
    const script = path.join(import.meta.dirname, 'fixtures/pg/sqlalchemy_reflect.py');
    const { stdout } = await run(python, [script, String(server.pgPort), READER_A, 'app'], { timeout: 120_000 });
    const out = JSON.parse(stdout) as { version: string; columns: string[][]; autoload: string[]; count: number };
    expect(out.version.startsWith(`${line}.`)).toBe(true);
    // The dataset's columns as its schema lists them (the service adds p_ columns of its own).
    const schema = (await (await server.request('/api/v1/logstream/app/schema')).json()) as { fields: { name: string }[] };
    const names = schema.fields.map((f) => f.name).sort();
    expect(out.columns.map(([name]) => name)).toEqual(names);
    expect(out.columns).toEqual(expect.arrayContaining([['level', 'TEXT'], ['n', 'BIGINT'], ['p_timestamp', 'TIMESTAMP']]));
    expect(out.autoload).toEqual(names);
    expect(out.count).toBe(1);
  });
});

describe('issue 36 #5: type errors are not syntax errors', () => {
  it('answers the SQLSTATEs PostgreSQL gives (node-postgres)', async () => {
    expect((await attempt(READER_A, "SELECT 'abc'::INTEGER AS n")).code).toBe('22P02');
    expect((await attempt(READER_A, 'SELECT nope FROM app')).code).toBe('42703');
    expect((await attempt(READER_A, 'SELEC 1')).code).toBe('42601');
  });
});

describe('issue 36 #5: COPY (SELECT …) TO STDOUT is a read (psql \\copy)', () => {
  it('sends the rows as COPY data, in text and CSV format', async () => {
    // COPY's text format: tab-separated, backslash escapes, \N for NULL; CSV quotes what it must.
    const query = "SELECT n, level, 'a' || chr(9) || 'b' AS t, NULL AS z, 'x,\"y' AS q FROM app";
    const text = await psql(server, `\\copy (${query}) to stdout`, { password: READER_A });
    expect(text).toBe('1\tinfo\ta\\tb\t\\N\tx,"y\n');
    const csv = await psql(server, `COPY (${query}) TO STDOUT WITH (FORMAT csv, HEADER)`, { password: READER_A });
    expect(csv).toBe('n,level,t,z,q\n1,info,a\tb,,"x,""y"\n');
    // A COPY into a dataset stays refused.
    await expect(psql(server, 'COPY app FROM STDIN', { password: READER_A })).rejects.toThrow(/ERROR/);
  });
});

describe('L2: nothing about the engine behind the door', () => {
  it('version() and pg_settings name PostgreSQL 15 and its settings only', async () => {
    const version = await psql(server, 'SELECT version()', { password: READER_A, extra: ['-A', '-t'] });
    expect(version.trim()).toMatch(/^PostgreSQL 15\.0\b/);
    expect(version).not.toMatch(/duckdb|v\d+\.\d+\.\d+/i);
    const settings = await psql(server, 'SELECT name, setting FROM pg_settings', { password: READER_A, extra: ['-A', '-t'] });
    // DuckDB's settings name the service's directories and limits.
    expect(settings).not.toMatch(/memory_limit|temp_directory|threads|extension_directory|\//);
    expect(settings).toMatch(/server_version\|15\.0/);
  });
});

// A4 (prepared statements and portals bounded per session and per key, a Parse by P_QUERY_MAX_SQL_BYTES) is
// the door's own bookkeeping: test/unit/pgInProcess.test.ts.

/** A connection that logs in, opens a transaction and leaves a portal suspended after one row. */
async function holdPortal(on: PgTestServer, password: string): Promise<{ socket: net.Socket; received: () => string }> {
  const socket = net.connect(on.pgPort, '127.0.0.1');
  let text = '';
  socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
  await new Promise<void>((r) => socket.once('connect', () => r()));
  const startup = Buffer.concat([int32(196608), cstr('user'), cstr('u'), Buffer.from([0])]);
  socket.write(Buffer.concat([int32(startup.length + 4), startup]));
  socket.write(frame('p', cstr(password)));
  socket.write(frame('Q', cstr('BEGIN')));
  const sql = 'SELECT x FROM range(100000000) AS t(x)';
  socket.write(frame('P', Buffer.concat([cstr(''), cstr(sql), int16(0)])));
  socket.write(frame('B', Buffer.concat([cstr('held'), cstr(''), int16(0), int16(0), int16(0)])));
  socket.write(frame('E', Buffer.concat([cstr('held'), int32(1)])));
  socket.write(frame('S', Buffer.alloc(0)));
  // PortalSuspended ('s') then ReadyForQuery in a transaction ('Z', status T).
  const suspended = /s\0\0\0\x04Z\0\0\0\x05T/;
  await expect.poll(() => suspended.test(text) || /Z\0\0\0\x05[IE]$/.test(text), { timeout: 60_000 }).toBe(true);
  expect(text).toMatch(suspended);
  return { socket, received: () => text };
}

/**
 * The two tests that wait for P_QUERY_TIMEOUT (20 s each), at once: each on its own server, as both fill
 * the slots of the query pool.
 */
describe('A1 and A7: the time limit ends what holds a slot', () => {
  it.concurrent('A1: holds expensive catalog statements to the key\'s query slots and the time limit', async ({ expect }) => {
    // Three at once from one key whose limit is one running (and one waiting): one is refused outright.
    const heavy = 'SELECT version(), count(*) FROM range(100000000000) AS t(x) WHERE x % 7 = 3';
    const results = await Promise.all([attempt(READER_A, heavy), attempt(READER_A, heavy), attempt(READER_A, heavy)]);
    const codes = results.map((r) => r.code).sort();
    // 53300: the key's limit (P_QUERY_CONCURRENCY_PER_KEY); 57014: the time limit (P_QUERY_TIMEOUT).
    expect(codes).toContain('53300');
    expect(codes.filter((c) => c === '57014').length).toBeGreaterThanOrEqual(1);
    expect(results.find((r) => r.code === '57014')?.message).toMatch(/time limit/);
    await serviceAnswers();
  }, 60_000);

  it.concurrent("A7: two keys' held portals take every slot only until P_QUERY_TIMEOUT; then others run and the portal reports the time limit", async ({ expect }) => {
    const a = await holdPortal(portalServer, READER_A);
    const b = await holdPortal(portalServer, READER_B);
    try {
      // Both slots are held by the portals; once the time limit ends them, the admin's query runs.
      await expect
        .poll(
          async () => {
            const res = await portalServer.request('/api/v1/query', { method: 'POST', json: { query: 'SELECT 42 AS answer', startTime: '1970-01-01T00:00:00Z', endTime: '2100-01-01T00:00:00Z' } });
            return res.status === 200 ? JSON.stringify(await res.json()) : res.status;
          },
          { timeout: 45_000, interval: 500 },
        )
        .toBe(JSON.stringify([{ answer: 42 }]));
      // The held portal, executed to its end, gives the rows it had fetched and then reports why it ended.
      a.socket.write(frame('E', Buffer.concat([cstr('held'), int32(0)])));
      a.socket.write(frame('S', Buffer.alloc(0)));
      await expect.poll(() => /C57014\0[^]*time limit/.test(a.received()), { timeout: 10_000 }).toBe(true);
    } finally {
      a.socket.destroy();
      b.socket.destroy();
    }
  }, 180_000);
});
