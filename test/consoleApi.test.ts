import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ADMIN_KEY, startServer, type TestServer } from './helpers/server.ts';
import { sendJsonEvents } from './helpers/consoleData.ts';
import { sleep } from './helpers/wait.ts';

/**
 * The endpoints the console uses beyond the core API, through HTTP as any client calls them: who the
 * key is (`GET /api/v1/whoami`), field statistics of a query (`POST /api/v1/field-stats`) and live tail
 * by long polling (`POST /api/v1/tail`), each with scoped keys.
 */
const READER = 'reader-key-for-console-api';
const SCOPED = 'scoped-key-for-console-api';
const WRITER = 'writer-key-for-console-api';

let server: TestServer;
const as = (key: string, path: string, json?: unknown) => server.request(path, { method: json === undefined ? 'GET' : 'POST', headers: { 'X-API-Key': key }, json });
const ns = (ms: number) => `${BigInt(ms) * 1_000_000n}`;

beforeAll(async () => {
  server = await startServer({ env: { P_API_KEYS: `${ADMIN_KEY}:admin,${READER}:reader,${SCOPED}:reader:app|nothing-yet,${WRITER}:writer:app` } });
  for (const name of ['app', 'secret']) expect((await server.request(`/api/v1/logstream/${name}`, { method: 'PUT' })).status).toBe(200);
  await sendJsonEvents(server, 'app', Array.from({ length: 50 }, (_, i) => ({ level: i % 5 ? 'info' : 'error', msg: `event ${i}`, ...(i % 2 ? { user: `u${i % 3}` } : {}) })));
  await sendJsonEvents(server, 'secret', [{ level: 'info', msg: 'not for the scoped key' }]);
  // OTLP logs carry their own times: one two hours ago, two five minutes ago.
  const now = Date.now();
  const rec = (ms: number, body: string) => ({ timeUnixNano: ns(ms), severityText: 'INFO', body: { stringValue: body } });
  const res = await server.request('/v1/logs', {
    method: 'POST',
    headers: { 'X-P-Stream': 'timed' },
    json: { resourceLogs: [{ resource: { attributes: [] }, scopeLogs: [{ logRecords: [rec(now - 2 * 3_600_000, 'old'), rec(now - 300_000, 'recent'), rec(now - 290_000, 'recent')] }] }] },
  });
  expect(res.status).toBe(200);
}, 120_000);

afterAll(() => server?.stop());

describe('GET /api/v1/whoami', () => {
  test('says the role, the actions and the datasets of each key, and needs a valid key', async () => {
    expect(await (await as(ADMIN_KEY, '/api/v1/whoami')).json()).toMatchObject({ role: 'admin', actions: ['ingest', 'create', 'read', 'delete', 'admin'], datasets: null });
    expect(await (await as(READER, '/api/v1/whoami')).json()).toMatchObject({ role: 'reader', actions: ['read'], datasets: null });
    // A scoped key's datasets are its scope, including names that do not exist yet.
    expect(await (await as(SCOPED, '/api/v1/whoami')).json()).toMatchObject({ role: 'reader', actions: ['read'], datasets: ['app', 'nothing-yet'] });
    expect(await (await as(WRITER, '/api/v1/whoami')).json()).toMatchObject({ role: 'writer', actions: ['ingest', 'create'], datasets: ['app'] });
    const ids = await Promise.all([ADMIN_KEY, READER].map(async (k) => ((await (await as(k, '/api/v1/whoami')).json()) as { keyId: string }).keyId));
    expect(ids[0]).toMatch(/^[0-9a-f]{16}$/);
    expect(ids[0]).not.toBe(ids[1]);
    expect((await as('not-a-key', '/api/v1/whoami')).status).toBe(401);
    expect((await fetch(`${server.url}/api/v1/whoami`)).status).toBe(401);
  });
});

interface Stats {
  total: number;
  fields: { name: string; present: number; distinct: number; top: { value: string; count: number }[] }[];
}

describe('POST /api/v1/field-stats', () => {
  const range = { startTime: '1h', endTime: 'now' };
  test('counts every column over every row of the query, not a page of them', async () => {
    const res = await as(READER, '/api/v1/field-stats', { query: 'SELECT level, msg, "user" FROM app ORDER BY p_timestamp DESC LIMIT 10', ...range, top: 3 });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Stats;
    expect(body.total).toBe(50);
    const level = body.fields.find((f) => f.name === 'level')!;
    expect(level).toEqual({ name: 'level', present: 50, distinct: 2, top: [{ value: 'info', count: 40 }, { value: 'error', count: 10 }] });
    const user = body.fields.find((f) => f.name === 'user')!;
    expect(user.present).toBe(25);
    expect(user.distinct).toBe(3);
    expect(user.top.map((t) => t.count).reduce((a, b) => a + b, 0)).toBe(25);
    expect(body.fields.find((f) => f.name === 'msg')!.top).toHaveLength(3);
  });

  test('follows the query (its filter) and the time range', async () => {
    const filtered = (await (await as(READER, '/api/v1/field-stats', { query: "SELECT * FROM app WHERE level = 'error'", ...range })).json()) as Stats;
    expect(filtered.total).toBe(10);
    expect(filtered.fields.find((f) => f.name === 'level')!.top).toEqual([{ value: 'error', count: 10 }]);
    const all = (await (await as(READER, '/api/v1/field-stats', { query: 'SELECT * FROM timed', startTime: '3h', endTime: 'now' })).json()) as Stats;
    expect(all.total).toBe(3);
    const recent = (await (await as(READER, '/api/v1/field-stats', { query: 'SELECT * FROM timed', startTime: '1h', endTime: 'now' })).json()) as Stats;
    expect(recent.total).toBe(2);
    expect(recent.fields.find((f) => f.name === 'body')!.top).toEqual([{ value: 'recent', count: 2 }]);
    const none = (await (await as(READER, '/api/v1/field-stats', { query: 'SELECT * FROM timed', startTime: '10h', endTime: '5h' })).json()) as Stats;
    expect(none).toEqual({ total: 0, sampled: 0, fields: [] });
  });

  test("keeps to the key's scope and role, and the sandbox holds", async () => {
    expect((await as(SCOPED, '/api/v1/field-stats', { query: 'SELECT * FROM app', ...range })).status).toBe(200);
    const denied = await as(SCOPED, '/api/v1/field-stats', { query: 'SELECT * FROM secret', ...range });
    expect(denied.status).toBe(403);
    expect(JSON.stringify(await denied.json())).not.toContain('not for the scoped key');
    expect((await as(SCOPED, '/api/v1/field-stats', { query: 'SELECT * FROM app UNION ALL SELECT * FROM secret', ...range })).status).toBe(403);
    expect((await as(WRITER, '/api/v1/field-stats', { query: 'SELECT * FROM app', ...range })).status).toBe(403);
    expect((await as(READER, '/api/v1/field-stats', { query: "SELECT * FROM read_csv('/etc/passwd')", ...range })).status).toBe(400);
    expect((await as(READER, '/api/v1/field-stats', { query: 'SELECT * FROM app', startTime: 'now', endTime: '1h' })).status).toBe(400);
  });
});

describe('POST /api/v1/tail', () => {
  test('answers the newest rows, then waits for new ones and answers as they arrive', async () => {
    type Tail = { cursor: string; timeColumn: string; rows: Record<string, unknown>[] };
    const first = (await (await as(READER, '/api/v1/tail', { dataset: 'app', after: '1h', where: "level = 'error'" })).json()) as Tail;
    expect(first.timeColumn).toBe('p_timestamp');
    expect(first.rows).toHaveLength(10);
    expect(first.rows.every((r) => r.level === 'error')).toBe(true);
    // With the cursor it waits: nothing new, so an answer only at the end of a short wait.
    const idle = (await (await as(READER, '/api/v1/tail', { dataset: 'app', after: '1h', cursor: first.cursor, wait: 1 })).json()) as Tail;
    expect(idle.cursor).toBe(first.cursor);
    // A waiting request answers once a row arrives (long before its 25 s wait ends).
    const waiting = as(READER, '/api/v1/tail', { dataset: 'app', after: '1h', cursor: first.cursor, where: "msg = 'arrived'" });
    await sleep(500);
    await sendJsonEvents(server, 'app', [{ level: 'warn', msg: 'arrived' }]);
    const next = (await (await waiting).json()) as Tail;
    expect(next.cursor).not.toBe(first.cursor);
    expect(next.rows.map((r) => r.msg)).toEqual(['arrived']);
  });

  test("keeps to the key's scope and checks the filter in the sandbox", async () => {
    expect((await as(SCOPED, '/api/v1/tail', { dataset: 'secret', after: '1h' })).status).toBe(403);
    // Not found and not allowed look the same to a key that may not read the name.
    expect((await as(SCOPED, '/api/v1/tail', { dataset: 'missing', after: '1h' })).status).toBe(403);
    expect((await as(READER, '/api/v1/tail', { dataset: 'missing', after: '1h' })).status).toBe(404);
    expect((await as(SCOPED, '/api/v1/tail', { dataset: 'app', after: '1h', where: '1=1) UNION ALL (SELECT * FROM secret' })).status).toBe(403);
    expect((await as(WRITER, '/api/v1/tail', { dataset: 'app', after: '1h' })).status).toBe(403);
  });
});
