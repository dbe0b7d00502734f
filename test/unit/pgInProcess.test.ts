import * as net from 'node:net';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { startPgServer } from '../../src/doors/pg/server.ts';
import { SQLSTATE } from '../../src/doors/pg/sqlstate.ts';
import { ApiKeys } from '../../src/doors/shared/auth.ts';
import { ConnectionBudget } from '../../src/doors/shared/connections.ts';
import type { Services } from '../../src/doors/shared/context.ts';
import { DomainError, type ErrorKind } from '../../src/errors.ts';
import { PG } from '../../src/query/results/pgTypes.ts';
import type { PgQueries } from '../../src/query/sql/queries.ts';
import { RecordingPgQueries } from '../../src/query/sql/fake.ts';
import { tempDir } from '../helpers/server.ts';
import { frame, cstr, int32 } from '../helpers/pgFrames.ts';

/**
 * The PostgreSQL door in process (test/README.md "Where a test goes"): src/doors/pg's server and
 * sessions bound on port 0 in this process, RecordingPgQueries in place of the SQL executor and its
 * catalog, driven by node-postgres (startup, cleartext password, simple and extended query, portals)
 * and by raw protocol messages where no client lets one misbehave (CancelRequest, malformed input).
 * Expected SQLSTATEs come from the door's own kind → SQLSTATE map. What stays a system test
 * (test/pgwire.test.ts, pgGuards.test.ts, pgsession.test.ts, pgclients.test.ts): real answers from
 * DuckDB, psql's catalog, the query guards in workers, TLS, other clients (psycopg, JDBC, SQLAlchemy).
 */
const MAX_PREPARED = 6;

const startup = () => {
  const body = Buffer.concat([int32(196608), cstr('user'), cstr('u'), Buffer.from([0])]);
  return Buffer.concat([int32(body.length + 4), body]);
};

describe('PostgreSQL door in process', async () => {
  const dir = await tempDir('pg-door-');
  const keys = await ApiKeys.load('r:reader,w:writer,only:reader:app', dir);
  const config = loadConfig({ P_DATA_DIR: dir, P_PG_ADDR: '127.0.0.1:0', P_PG_MAX_PREPARED: String(MAX_PREPARED) });
  const fake = new RecordingPgQueries();
  const queries: PgQueries = fake;
  const storage = { list: () => [{ name: 'app' }, { name: 'other' }], schemaOf: () => ({ schema: {} }) };
  const connections = new ConnectionBudget({ maxConnections: 64, headersTimeoutMs: 10_000 });
  const services = { config, keys, queries, storage, connections } as unknown as Services;
  const server = await startPgServer(services, config.pg!);
  const port = (server.address() as net.AddressInfo).port;
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const client = (password = 'r') => new pg.Client({ host: '127.0.0.1', port, user: 'grafana', password, database: 'any' });
  /** Runs `fn` on a fresh connection and closes it. */
  async function session<T>(fn: (c: pg.Client) => Promise<T>, password = 'r'): Promise<T> {
    const c = client(password);
    await c.connect();
    try {
      return await fn(c);
    } finally {
      await c.end().catch(() => undefined);
    }
  }
  /** Sends raw bytes on a fresh connection; resolves with all the server wrote before it closed. */
  const raw = (bytes: Buffer) =>
    new Promise<string>((resolve, reject) => {
      const chunks: Buffer[] = [];
      const s = net.connect(port, '127.0.0.1', () => s.write(bytes));
      s.on('data', (d) => chunks.push(d));
      s.on('close', () => resolve(Buffer.concat(chunks).toString('latin1')));
      s.on('error', reject);
    });

  it.each([
    { name: 'a reader key', password: 'r', code: undefined },
    { name: 'a dataset-scoped reader key', password: 'only', code: undefined },
    { name: 'a wrong password', password: 'nope', code: '28P01' },
    { name: 'a writer key', password: 'w', code: '28000' },
  ])('startup with $name (cleartext password) → $code', async ({ password, code }) => {
    const c = client(password);
    const connected = c.connect().then(() => undefined, (err: { code?: string }) => err.code);
    expect(await connected).toBe(code);
    // Logged in: the BackendKeyData a CancelRequest names.
    if (!code) expect((c as unknown as { processID: number }).processID).toBeGreaterThan(0);
    await c.end().catch(() => undefined);
  });

  it('simple query: the executor gets the statement and the caller; rows and column names are its answer', async () => {
    fake.script = { fields: ['level', 'msg'], rows: [['info', 'first'], ['error', null]] };
    const before = fake.calls.length;
    const r = await session((c) => c.query('SELECT level, msg FROM app'), 'only');
    expect(r.fields.map((f) => [f.name, f.dataTypeID])).toEqual([['level', PG.text.oid], ['msg', PG.text.oid]]);
    expect(r.rows).toEqual([{ level: 'info', msg: 'first' }, { level: 'error', msg: null }]);
    expect(r.command).toBe('SELECT');
    expect(r.rowCount).toBe(2);
    const run = fake.calls.slice(before).find((c) => c.op === 'executePg')!;
    expect(run.sql).toBe('SELECT level, msg FROM app');
    expect([run.canRead!('app'), run.canRead!('other')]).toEqual([true, false]);
  });

  it('session commands (SET, SHOW, BEGIN/COMMIT) are answered by the door; the executor is not called', async () => {
    const before = fake.of('executePg').length;
    const shown = await session(async (c) => {
      await c.query("SET application_name = 'door-test'");
      await c.query('BEGIN');
      const r = await c.query('SHOW application_name');
      await c.query('COMMIT');
      return r.rows;
    });
    expect(shown).toEqual([{ application_name: 'door-test' }]);
    expect(fake.of('executePg').length).toBe(before);
  });

  it.each([
    { name: 'a number', value: 5, bound: { type: 'VARCHAR', text: '5' } },
    { name: 'a string with a quote', value: "it's", bound: { type: 'VARCHAR', text: "it's" } },
    { name: 'NULL', value: null, bound: null },
  ])('extended query: $name bound to $1 reaches the executor as a value beside the unchanged statement', async ({ value, bound }) => {
    fake.script = { fields: ['x'], rows: [['1']] };
    const r = await session((c) => c.query('SELECT x FROM app WHERE v = $1', [value]));
    expect(r.rows).toEqual([{ x: '1' }]);
    const run = fake.of('executePg').at(-1)!;
    // The statement the sandbox checked, never a text with the value in it (issue 35).
    expect(run.sql).toBe('SELECT x FROM app WHERE v = $1');
    expect(run.params).toEqual([bound]);
    expect(fake.of('timeRange').at(-1)!.params).toEqual([bound]);
  });

  it('extended query: a skipped placeholder without a declared type is refused at Parse, as PostgreSQL does (42P18)', async () => {
    const before = fake.calls.length;
    // node-postgres declares no parameter types: PostgreSQL 15 answers this Parse with 42P18 too.
    const err = await session((c) => c.query('SELECT x FROM app WHERE v = $2', [1, "it's"]).then(() => undefined, (e: { code?: string; message: string }) => e));
    expect(err).toMatchObject({ code: '42P18', message: 'could not determine data type of parameter $1' });
    expect(fake.calls.slice(before).filter((c) => c.op === 'executePg' || c.op === 'classify')).toEqual([]);
  });

  it('extended query: a named statement is parsed once and bound again; result formats reach the executor', async () => {
    fake.script = { fields: ['n'], types: [PG.text], rows: [['7']] };
    const calls = await session(async (c) => {
      const before = fake.calls.length;
      for (let i = 0; i < 3; i++) expect((await c.query({ name: 'q', text: 'SELECT n FROM app', binary: true } as pg.QueryConfig)).rows).toEqual([{ n: '7' }]);
      return fake.calls.slice(before);
    });
    // Classified once (Parse is kept), executed three times, each with the binary result format.
    expect(calls.filter((c) => c.op === 'classify')).toHaveLength(1);
    expect(calls.filter((c) => c.op === 'executePg').map((c) => c.formats)).toEqual([[1], [1], [1]]);
  });

  it('a portal with a row limit is suspended and continued to the last row (nothing cut)', async () => {
    const rows = Array.from({ length: 23 }, (_, i) => [String(i)]);
    fake.script = { fields: ['i'], rows };
    const r = await session((c) => c.query({ text: 'SELECT i FROM app', rows: 4 } as pg.QueryConfig));
    expect(r.rows.map((x: { i: string }) => x.i)).toEqual(rows.map(([i]) => i));
  });

  it('a catalog statement runs on the catalog, not the data path', async () => {
    fake.script = { kind: 'catalog', fields: ['relname'], rows: [['app']] };
    const before = fake.of('executePg').length;
    expect((await session((c) => c.query('SELECT relname FROM pg_class'))).rows).toEqual([{ relname: 'app' }]);
    expect(fake.of('run').at(-1)?.sql).toBe('SELECT relname FROM pg_class');
    expect(fake.of('executePg').length).toBe(before);
    fake.script = {};
  });

  it.each(Object.keys(SQLSTATE) as ErrorKind[])('a %s from the executor is its SQLSTATE; the session stays usable', async (kind) => {
    await session(async (c) => {
      fake.script = { fields: ['x'], throws: new DomainError(kind, `the ${kind} message`) };
      await expect(c.query('SELECT x FROM app')).rejects.toMatchObject({ code: SQLSTATE[kind], message: `the ${kind} message` });
      fake.script = { fields: ['x'], rows: [['1']] };
      expect((await c.query('SELECT x FROM app')).rows).toEqual([{ x: '1' }]);
    });
  });

  it('an error after some rows ends the statement with its SQLSTATE; in a transaction block, until ROLLBACK', async () => {
    await session(async (c) => {
      await c.query('BEGIN');
      fake.script = { fields: ['x'], rows: [['1'], ['2'], ['3']], throws: new DomainError('timeout', 'cut off'), failAfter: 2 };
      await expect(c.query('SELECT x FROM app')).rejects.toMatchObject({ code: SQLSTATE.timeout, message: 'cut off' });
      fake.script = { fields: ['x'], rows: [['1']] };
      await expect(c.query('SELECT x FROM app')).rejects.toMatchObject({ code: '25P02' });
      await c.query('ROLLBACK');
      expect((await c.query('SELECT x FROM app')).rows).toEqual([{ x: '1' }]);
    });
  });

  it('a CancelRequest with the session key stops the running statement (57014), aborts it and leaves the session usable', async () => {
    await session(async (c) => {
      fake.script = { fields: ['x'], hang: true };
      const running = c.query('SELECT x FROM app').then(() => undefined, (err: { code?: string }) => err.code);
      await expect.poll(() => fake.of('executePg').at(-1)?.signal !== undefined && fake.of('executePg').at(-1)?.sql === 'SELECT x FROM app').toBe(true);
      const { processID, secretKey } = c as unknown as { processID: number; secretKey: number };
      // A wrong secret is ignored; the right one cancels.
      await raw(Buffer.concat([int32(16), int32(80877102), int32(processID), int32(secretKey + 1)]));
      expect(fake.of('executePg').at(-1)?.signal?.aborted).toBe(false);
      await raw(Buffer.concat([int32(16), int32(80877102), int32(processID), int32(secretKey)]));
      expect(await running).toBe('57014');
      expect(fake.of('executePg').at(-1)?.signal?.aborted).toBe(true);
      fake.script = { fields: ['x'], rows: [['1']] };
      expect((await c.query('SELECT x FROM app')).rows).toEqual([{ x: '1' }]);
    });
  });

  it(`prepared statements and portals are bounded per session (P_PG_MAX_PREPARED=${MAX_PREPARED}), and a Parse by P_QUERY_MAX_SQL_BYTES`, async () => {
    fake.script = { fields: ['x'], rows: [['1']] };
    await session(async (c) => {
      // Each query binds an unnamed portal beside the named statements: MAX_PREPARED - 1 statements and a portal fit.
      for (let i = 1; i < MAX_PREPARED; i++) await c.query({ name: `s${i}`, text: `SELECT x FROM app -- ${i}` });
      await expect(c.query({ name: 'one-more', text: 'SELECT x FROM app' })).rejects.toMatchObject({ code: '54000', message: expect.stringMatching(/P_PG_MAX_PREPARED/) });
      const big = `SELECT x FROM app -- ${'x'.repeat(config.queryLimits.maxSqlBytes + 1)}`;
      await expect(c.query({ name: 'big', text: big })).rejects.toMatchObject({ code: '54000', message: expect.stringMatching(/P_QUERY_MAX_SQL_BYTES/) });
      // A simple query keeps nothing: still answered.
      expect((await c.query('SELECT x FROM app')).rows).toEqual([{ x: '1' }]);
    });
  });

  it('statement bytes are counted per session (P_PG_MAX_SESSION_STATE) and per key (P_PG_MAX_KEY_STATE), and given back when a connection closes', async () => {
    // A server of its own with small state bounds: ~80 KB of state per statement (40,000 characters, two
    // bytes each), as much for the portal a query binds beside it: a session (256 KiB) keeps two and binds
    // a third's portal no more; the key (400 KiB) holds five such shares across its connections.
    const small = loadConfig({ P_DATA_DIR: dir, P_PG_ADDR: '127.0.0.1:0', P_PG_MAX_SESSION_STATE: '256KiB', P_PG_MAX_KEY_STATE: '400KiB' });
    const bounded = await startPgServer({ ...services, config: small } as Services, small.pg!);
    const at = (password: string) => new pg.Client({ host: '127.0.0.1', port: (bounded.address() as net.AddressInfo).port, user: 'u', password, database: 'd' });
    const statement = (i: number) => `SELECT x FROM app -- ${i} ${'y'.repeat(40_000)}`;
    fake.script = { fields: ['x'], rows: [['1']] };
    const [first, second, other] = [at('r'), at('r'), at('only')];
    try {
      for (const c of [first, second, other]) await c.connect();
      await first.query({ name: 'a1', text: statement(1) });
      await first.query({ name: 'a2', text: statement(2) });
      await expect(first.query({ name: 'a3', text: statement(3) })).rejects.toMatchObject({ code: '54000', message: expect.stringMatching(/P_PG_MAX_SESSION_STATE/) });
      await second.query({ name: 'b1', text: statement(4) });
      await expect(second.query({ name: 'b2', text: statement(5) })).rejects.toMatchObject({ code: '54000', message: expect.stringMatching(/P_PG_MAX_KEY_STATE/) });
      // Another key is not affected.
      await other.query({ name: 'o1', text: statement(6) });
      // A new connection of the key gets no room while the first holds its share, and gets it once that closed.
      const prepareAnew = async () => {
        const c = at('r');
        await c.connect();
        try {
          return await c.query({ name: 'c1', text: statement(7) }).then(() => 'ok', (err: Error) => err.message);
        } finally {
          await c.end();
        }
      };
      expect(await prepareAnew()).toMatch(/P_PG_MAX_KEY_STATE/);
      await first.end();
      await expect.poll(prepareAnew, { timeout: 10_000 }).toBe('ok');
    } finally {
      for (const c of [first, second, other]) await c.end().catch(() => undefined);
      await new Promise<void>((resolve) => bounded.close(() => resolve()));
    }
  });

  /** A server of its own with other settings, closed after `fn`. */
  async function withServer(env: Record<string, string>, fn: (connect: () => Promise<pg.Client>) => Promise<void>): Promise<void> {
    const own = loadConfig({ P_DATA_DIR: dir, P_PG_ADDR: '127.0.0.1:0', ...env });
    const listener = await startPgServer({ ...services, config: own } as Services, own.pg!);
    const opened: pg.Client[] = [];
    const connect = async () => {
      const c = new pg.Client({ host: '127.0.0.1', port: (listener.address() as net.AddressInfo).port, user: 'u', password: 'r', database: 'd' });
      c.on('error', () => undefined);
      opened.push(c);
      await c.connect();
      return c;
    };
    try {
      await fn(connect);
    } finally {
      for (const c of opened) await c.end().catch(() => undefined);
      await new Promise<void>((resolve) => listener.close(() => resolve()));
    }
  }

  it('refuses connections past P_PG_MAX_CONNECTIONS (53300 at startup), and has room again once one closed', async () => {
    fake.script = { fields: ['x'], rows: [['1']] };
    await withServer({ P_PG_MAX_CONNECTIONS: '3' }, async (connect) => {
      const held = [await connect(), await connect(), await connect()];
      await expect(connect()).rejects.toMatchObject({ code: '53300' });
      await held[0].end();
      // The server counts a connection until its socket closes.
      await expect.poll(() => connect().then(() => 'in', (err: { code?: string }) => err.code), { timeout: 10_000 }).toBe('in');
    });
  });

  it('closes a connection idle past P_PG_IDLE_TIMEOUT with a FATAL 57P05', async () => {
    // Long enough that a login on a loaded machine is not cut by it; the connection then does nothing.
    await withServer({ P_PG_IDLE_TIMEOUT: '1s' }, async (connect) => {
      const c = await connect();
      const closed = new Promise<string | undefined>((resolve) => c.once('error', (err: { code?: string }) => resolve(err.code)));
      expect(await closed).toBe('57P05');
    });
  });

  it.each([
    { name: 'a startup length below its own size', bytes: () => Buffer.from([0, 0, 0, 2, 0, 0]) },
    { name: 'protocol 9.0', bytes: () => Buffer.from([0, 0, 0, 8, 0, 9, 0, 0]) },
    { name: 'a Query of 2 GB', bytes: () => Buffer.concat([startup(), frame('p', cstr('r')), Buffer.from([0x51, 0x7f, 0xff, 0xff, 0xff])]) },
    { name: "an unknown message type '!'", bytes: () => Buffer.concat([startup(), frame('p', cstr('r')), Buffer.from([0x21, 0, 0, 0, 4])]) },
    { name: 'a Query without its NUL', bytes: () => Buffer.concat([startup(), frame('p', cstr('r')), Buffer.from([0x51, 0, 0, 0, 8, 0x61, 0x62, 0x63, 0x64])]) },
    { name: 'a Bind cut short', bytes: () => Buffer.concat([startup(), frame('p', cstr('r')), Buffer.from([0x42, 0, 0, 0, 6, 0, 0])]) },
  ])('$name: an ErrorResponse, and the connection is closed', async ({ bytes }) => {
    const out = await raw(bytes());
    expect(out).toMatch(/E[\s\S]*C(08P01|0A000|54000)\0/);
  });

  it('random bytes after a valid login never take the server down', async () => {
    for (let i = 0; i < 30; i++) {
      const junk = Buffer.from(Array.from({ length: 5 + Math.floor(Math.random() * 60) }, () => Math.floor(Math.random() * 256)));
      await raw(Buffer.concat([startup(), frame('p', cstr('r')), junk]));
    }
    fake.script = { fields: ['x'], rows: [['2']] };
    expect((await session((c) => c.query('SELECT x FROM app'))).rows).toEqual([{ x: '2' }]);
  });
});
