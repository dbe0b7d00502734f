import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, startServer, type TestServer } from './helpers/server.ts';

const KEYS = {
  admin: 'adminkey',
  writer: 'writerkey',
  reader: 'readerkey',
  limited: 'limitedkey',
  limitedWriter: 'limitedwriter',
};
const API_KEYS = `${KEYS.admin}:admin,${KEYS.writer}:writer,${KEYS.reader}:reader,${KEYS.limited}:reader:alpha|beta,${KEYS.limitedWriter}:writer:alpha`;
const RANGE = { startTime: '1970-01-01T00:00:00Z', endTime: '2100-01-01T00:00:00Z' };

type KeyForm = 'x-api-key' | 'bearer' | 'basic';
const FORMS: KeyForm[] = ['x-api-key', 'bearer', 'basic'];

function authHeaders(key: string | undefined, form: KeyForm = 'x-api-key'): Record<string, string> {
  if (key === undefined) return {};
  switch (form) {
    case 'x-api-key':
      return { 'X-API-Key': key };
    case 'bearer':
      return { Authorization: `Bearer ${key}` };
    case 'basic':
      return { Authorization: `Basic ${Buffer.from(`anyuser:${key}`).toString('base64')}` };
  }
}

interface Call {
  method: string;
  path: string;
  json?: unknown;
  headers?: Record<string, string>;
}

/** A plain fetch: no key unless `headers` carries one (the helper's `request` would add the admin key). */
async function call(server: TestServer, c: Call, headers: Record<string, string>): Promise<{ status: number; body: unknown }> {
  const h = new Headers({ ...c.headers, ...headers });
  let payload: string | undefined;
  if (c.json !== undefined) {
    payload = JSON.stringify(c.json);
    h.set('content-type', 'application/json');
  }
  const res = await fetch(`${server.url}${c.path}`, { method: c.method, headers: h, body: payload });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* not JSON: the assertions below catch it */
  }
  return { status: res.status, body: parsed };
}

function errorOf(body: unknown): unknown {
  return body !== null && typeof body === 'object' ? (body as { error?: unknown }).error : undefined;
}

async function asAdmin(server: TestServer, c: Call): Promise<void> {
  const r = await call(server, c, authHeaders(KEYS.admin));
  expect(r.status, `${c.method} ${c.path}: ${JSON.stringify(r.body)}`).toBeLessThan(300);
}

type Endpoint = 'list' | 'create' | 'delete' | 'schema' | 'stats' | 'ingestPath' | 'ingestHeader' | 'query';
const ENDPOINTS: Endpoint[] = ['list', 'create', 'delete', 'schema', 'stats', 'ingestPath', 'ingestHeader', 'query'];

let unique = 0;
/** Builds the request for an endpoint (creating what it needs first), and the status it gives when allowed. */
async function prepare(server: TestServer, e: Endpoint): Promise<{ c: Call; ok: number }> {
  switch (e) {
    case 'list':
      return { c: { method: 'GET', path: '/api/v1/logstream' }, ok: 200 };
    case 'create':
      return { c: { method: 'PUT', path: `/api/v1/logstream/made${++unique}` }, ok: 200 };
    case 'delete': {
      const name = `doomed${++unique}`;
      await asAdmin(server, { method: 'PUT', path: `/api/v1/logstream/${name}` });
      return { c: { method: 'DELETE', path: `/api/v1/logstream/${name}` }, ok: 200 };
    }
    case 'schema':
      return { c: { method: 'GET', path: '/api/v1/logstream/alpha/schema' }, ok: 200 };
    case 'stats':
      return { c: { method: 'GET', path: '/api/v1/logstream/alpha/stats' }, ok: 200 };
    case 'ingestPath':
      return { c: { method: 'POST', path: '/api/v1/logstream/alpha', json: { via: 'path' } }, ok: 200 };
    case 'ingestHeader':
      return { c: { method: 'POST', path: '/api/v1/ingest', json: { via: 'header' }, headers: { 'X-P-Stream': 'alpha' } }, ok: 200 };
    case 'query':
      return { c: { method: 'POST', path: '/api/v1/query', json: { query: 'SELECT count(*) AS n FROM alpha', ...RANGE } }, ok: 200 };
  }
}

const ALLOWED: Record<'admin' | 'writer' | 'reader', Set<Endpoint>> = {
  admin: new Set(ENDPOINTS),
  writer: new Set<Endpoint>(['create', 'ingestPath', 'ingestHeader']),
  reader: new Set<Endpoint>(['list', 'schema', 'stats', 'query']),
};

describe('authentication and authorization', () => {
  let server: TestServer;
  beforeAll(async () => {
    // Hundreds of wrong keys from one address, on purpose: the brute-force guard (test/users.test.ts) stays out of the way.
    server = await startServer({ env: { P_API_KEYS: API_KEYS, P_SIGNIN_MAX_ADDRESS_FAILURES: '100000' } });
    for (const name of ['alpha', 'beta', 'gamma']) {
      await asAdmin(server, { method: 'PUT', path: `/api/v1/logstream/${name}` });
      await asAdmin(server, { method: 'POST', path: `/api/v1/logstream/${name}`, json: { name } });
    }
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('liveness and readiness need no key; readiness with an admin key adds details, other keys get the probe\'s answer', async () => {
    const live = await call(server, { method: 'GET', path: '/api/v1/liveness' }, {});
    expect(live.status).toBe(200);
    const probe = await call(server, { method: 'GET', path: '/api/v1/readiness' }, {});
    expect(probe).toEqual({ status: 200, body: { ready: true } });
    const ready = await call(server, { method: 'GET', path: '/api/v1/readiness' }, authHeaders(KEYS.admin));
    expect(ready).toMatchObject({ status: 200, body: { ready: true, quarantined: [] } });
    expect(await call(server, { method: 'GET', path: '/api/v1/readiness' }, authHeaders(KEYS.reader))).toEqual({ status: 200, body: { ready: true } });
  });

  it('every other endpoint is 401 with a JSON error without a key or with an unknown one', async () => {
    const calls: Call[] = [{ method: 'GET', path: '/metrics' }, { method: 'GET', path: '/api/v1/no-such-route' }];
    for (const e of ENDPOINTS) calls.push((await prepare(server, e)).c);
    const bad: Record<string, string>[] = [
      {},
      authHeaders('nope'),
      authHeaders(ADMIN_KEY),
      authHeaders(`${KEYS.admin}x`),
      authHeaders('nope', 'bearer'),
      authHeaders('nope', 'basic'),
      { Authorization: `Basic ${Buffer.from(KEYS.admin).toString('base64')}` }, // no "user:" part
      { Authorization: `Token ${KEYS.admin}` },
      { 'X-API-Key': '' },
    ];
    for (const c of calls) {
      for (const headers of bad) {
        const r = await call(server, c, headers);
        expect(r.status, `${c.method} ${c.path} ${JSON.stringify(headers)}`).toBe(401);
        expect(typeof errorOf(r.body)).toBe('string');
      }
    }
    // Nothing was created, deleted or ingested by those calls.
    const list = await call(server, { method: 'GET', path: '/api/v1/logstream' }, authHeaders(KEYS.admin));
    expect((list.body as { name: string }[]).map((d) => d.name).filter((n) => n.startsWith('made'))).toEqual([]);
    const rows = await call(server, (await prepare(server, 'query')).c, authHeaders(KEYS.admin));
    expect(rows.body).toEqual([{ n: 1 }]);
  });

  for (const form of FORMS) {
    it(`role matrix with the key as ${form}`, async () => {
      for (const role of ['admin', 'writer', 'reader'] as const) {
        for (const e of ENDPOINTS) {
          const { c, ok } = await prepare(server, e);
          const r = await call(server, c, authHeaders(KEYS[role], form));
          const expected = ALLOWED[role].has(e) ? ok : 403;
          expect(r.status, `${role} ${e} (${form}): ${JSON.stringify(r.body)}`).toBe(expected);
          if (expected === 403) expect(typeof errorOf(r.body)).toBe('string');
        }
      }
    });
  }

  it('the matrix had its effects: deletes by admin only, ingests by admin and writer only', async () => {
    const list = await call(server, { method: 'GET', path: '/api/v1/logstream' }, authHeaders(KEYS.admin));
    const names = (list.body as { name: string }[]).map((d) => d.name);
    // 3 forms × (admin, writer) created one dataset each; the reader's attempts created nothing.
    expect(names.filter((n) => n.startsWith('made')).length).toBe(6);
    // 1 (401 test) + 3 forms × 3 roles datasets were prepared for deletion; only the 3 admin deletes went through.
    expect(names.filter((n) => n.startsWith('doomed')).length).toBe(7);
    // 1 seed row + 3 forms × (admin, writer) × (path, header).
    const q = await call(server, (await prepare(server, 'query')).c, authHeaders(KEYS.admin));
    expect(q.body).toEqual([{ n: 13 }]);
  });

  it('a wrong Bearer token is 401; the scheme name is case-insensitive', async () => {
    const r = await call(server, { method: 'GET', path: '/api/v1/logstream' }, { Authorization: 'Bearer wrong' });
    expect(r.status).toBe(401);
    expect(typeof errorOf(r.body)).toBe('string');
    const ok = await call(server, { method: 'GET', path: '/api/v1/logstream' }, { Authorization: `bearer ${KEYS.reader}` });
    expect(ok.status).toBe(200);
  });

  it('dataset-limited reader: reads alpha and beta only, lists only them', async () => {
    const h = authHeaders(KEYS.limited);
    const q = (sql: string) => call(server, { method: 'POST', path: '/api/v1/query', json: { query: sql, ...RANGE } }, h);
    expect(await q('SELECT name FROM alpha WHERE name IS NOT NULL')).toEqual({ status: 200, body: [{ name: 'alpha' }] });
    expect(await q('SELECT a.name AS a, b.name AS b FROM alpha a JOIN beta b ON a.name IS NOT NULL')).toEqual({ status: 200, body: [{ a: 'alpha', b: 'beta' }] });
    for (const sql of ['SELECT * FROM gamma', 'SELECT a.name FROM alpha a JOIN gamma g ON a.name = g.name', 'SELECT name FROM alpha UNION ALL SELECT name FROM gamma', 'SELECT * FROM alpha WHERE name IN (SELECT name FROM gamma)']) {
      const r = await q(sql);
      expect(r.status, sql).toBe(403);
      expect(String(errorOf(r.body))).toMatch(/gamma/);
    }
    const list = await call(server, { method: 'GET', path: '/api/v1/logstream' }, h);
    expect(list.status).toBe(200);
    expect((list.body as { name: string }[]).map((d) => d.name)).toEqual(['alpha', 'beta']);
    expect((await call(server, { method: 'GET', path: '/api/v1/logstream/alpha/schema' }, h)).status).toBe(200);
    expect((await call(server, { method: 'GET', path: '/api/v1/logstream/beta/stats' }, h)).status).toBe(200);
    expect((await call(server, { method: 'GET', path: '/api/v1/logstream/gamma/schema' }, h)).status).toBe(403);
    expect((await call(server, { method: 'GET', path: '/api/v1/logstream/gamma/stats' }, h)).status).toBe(403);
    expect((await call(server, { method: 'POST', path: '/api/v1/logstream/alpha', json: { x: 1 } }, h)).status).toBe(403);
  });

  it('dataset-limited writer: ingests into alpha only', async () => {
    const h = authHeaders(KEYS.limitedWriter);
    const before = await call(server, { method: 'GET', path: '/api/v1/logstream/gamma/stats' }, authHeaders(KEYS.admin));
    const path1 = await call(server, { method: 'POST', path: '/api/v1/logstream/alpha', json: { lw: 1 } }, h);
    expect(path1).toEqual({ status: 200, body: { message: 'ingested', count: 1 } });
    const header1 = await call(server, { method: 'POST', path: '/api/v1/ingest', json: { lw: 2 }, headers: { 'X-P-Stream': 'alpha' } }, h);
    expect(header1).toEqual({ status: 200, body: { message: 'ingested', count: 1 } });
    for (const c of [
      { method: 'POST', path: '/api/v1/logstream/gamma', json: { lw: 3 } },
      { method: 'POST', path: '/api/v1/ingest', json: { lw: 4 }, headers: { 'X-P-Stream': 'gamma' } },
      { method: 'POST', path: '/api/v1/ingest?stream=gamma', json: { lw: 5 } },
      { method: 'POST', path: '/api/v1/ingest', json: { lw: 6 }, headers: { 'X-P-Stream': 'newone' } },
      { method: 'PUT', path: '/api/v1/logstream/newtwo' },
    ]) {
      const r = await call(server, c, h);
      expect(r.status, `${c.method} ${c.path}`).toBe(403);
      expect(typeof errorOf(r.body)).toBe('string');
    }
    const after = await call(server, { method: 'GET', path: '/api/v1/logstream/gamma/stats' }, authHeaders(KEYS.admin));
    expect((after.body as { ingestion: { count: number } }).ingestion.count).toBe((before.body as { ingestion: { count: number } }).ingestion.count);
    const list = await call(server, { method: 'GET', path: '/api/v1/logstream' }, authHeaders(KEYS.admin));
    expect((list.body as { name: string }[]).map((d) => d.name)).not.toContain('newone');
    expect((list.body as { name: string }[]).map((d) => d.name)).not.toContain('newtwo');
    const rows = await call(server, { method: 'POST', path: '/api/v1/query', json: { query: 'SELECT lw FROM alpha WHERE lw IS NOT NULL ORDER BY lw', ...RANGE } }, authHeaders(KEYS.admin));
    expect(rows.body).toEqual([{ lw: 1 }, { lw: 2 }]);
  });

  it('no key ever appears in the log output', async () => {
    for (let i = 0; i < 20; i++) {
      for (const form of FORMS) {
        await call(server, { method: 'GET', path: '/api/v1/logstream' }, authHeaders(KEYS.reader, form));
        await call(server, { method: 'GET', path: '/api/v1/logstream' }, authHeaders(`${KEYS.reader}-wrong`, form));
      }
    }
    const logs = server.logs();
    // The log is there (one line per request), just without keys.
    expect(logs.split('\n').filter((l) => l.includes('"msg":"request"')).length).toBeGreaterThan(100);
    for (const key of Object.values(KEYS)) {
      expect(logs).not.toContain(key);
      expect(logs).not.toContain(Buffer.from(`anyuser:${key}`).toString('base64'));
    }
  });
});

describe('generated key when P_API_KEYS is empty', () => {
  let server: TestServer | undefined;
  afterAll(async () => {
    await server?.stop();
  });

  const list: Call = { method: 'GET', path: '/api/v1/logstream' };

  it('generates a key, prints it once, keeps it in <dataDir>/api-key, and reuses it after a restart', async () => {
    server = await startServer({ env: { P_API_KEYS: '' } });
    const keyLines = server
      .logs()
      .split('\n')
      .filter((l) => l.includes('apiKey'));
    expect(keyLines.length).toBe(1);
    const key = (JSON.parse(keyLines[0]) as { apiKey: string }).apiKey;
    expect(typeof key).toBe('string');
    expect(key.length).toBeGreaterThanOrEqual(16);

    expect((await call(server, list, {})).status).toBe(401);
    expect((await call(server, list, authHeaders(ADMIN_KEY))).status).toBe(401);
    expect((await call(server, list, authHeaders(`${key}x`))).status).toBe(401);
    for (const form of FORMS) expect((await call(server, list, authHeaders(key, form))).status, form).toBe(200);
    // It is an admin key.
    expect((await call(server, { method: 'PUT', path: '/api/v1/logstream/keyed' }, authHeaders(key))).status).toBe(200);

    expect((await fs.readFile(path.join(server.dataDir, 'api-key'), 'utf8')).trim()).toBe(key);
    // The start log says where the key is kept and where the console is (never the key itself).
    const listening = JSON.parse(server.logs().split('\n').find((l) => l.includes('"msg":"listening"'))!) as Record<string, string>;
    expect(listening.keys).toBe(`admin key in ${path.join(server.dataDir, 'api-key')}`);
    expect(listening.console).toBe(`${server.url}/`);
    // Printed once: the requests above did not log it again.
    expect(server.logs().split(key).length - 1).toBe(1);

    const dataDir = server.dataDir;
    await server.stop();
    server = await startServer({ dataDir, env: { P_API_KEYS: '' } });
    expect((await call(server, list, {})).status).toBe(401);
    const r = await call(server, list, authHeaders(key));
    expect(r.status).toBe(200);
    expect((r.body as { name: string }[]).map((d) => d.name)).toEqual(['keyed']);
    expect(server.logs()).not.toContain(key);
    expect(server.logs()).not.toContain('apiKey');
    expect((await fs.readFile(path.join(dataDir, 'api-key'), 'utf8')).trim()).toBe(key);
  });
});
