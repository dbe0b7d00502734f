import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { query, startServer, type TestServer } from './helpers/server.ts';
import { expectError } from './helpers/assert.ts';

interface SchemaResponse {
  fields: { name: string; data_type: unknown }[];
}
interface Stats {
  ingestion: { count: number };
  storage: { files: number };
  wal: { count: number };
}

const MAX_BODY = 1024;
/** Columns the service adds to every JSON event (fetch sends a User-Agent, so p_user_agent is never empty here). */
const SERVICE_COLUMNS = { p_timestamp: { Timestamp: ['Millisecond', null] }, p_src_ip: 'Utf8', p_user_agent: 'Utf8' };

async function body<T>(res: Response): Promise<T> {
  return JSON.parse(await res.text()) as T;
}

async function put(server: TestServer, name: string, headers: Record<string, string> = {}): Promise<Response> {
  return server.request(`/api/v1/logstream/${name}`, { method: 'PUT', headers });
}

async function post(server: TestServer, name: string, payload: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return server.request(`/api/v1/logstream/${name}`, { method: 'POST', json: payload, headers });
}

/** POSTs a raw body (any bytes, possibly invalid JSON). */
async function postRaw(server: TestServer, name: string, text: string | ReadableStream<Uint8Array>): Promise<Response> {
  const init: RequestInit & { duplex?: 'half' } = { method: 'POST', body: text, headers: { 'content-type': 'application/json' } };
  if (typeof text !== 'string') init.duplex = 'half';
  return server.request(`/api/v1/logstream/${name}`, init);
}

async function ingestOk(server: TestServer, name: string, payload: unknown, headers: Record<string, string> = {}): Promise<number> {
  const res = await post(server, name, payload, headers);
  const text = await res.text();
  expect(res.status, text).toBe(200);
  const parsed = JSON.parse(text) as { message: string; count: number };
  expect(parsed.message).toBe('ingested');
  return parsed.count;
}


async function count(server: TestServer, name: string): Promise<number> {
  const rows = await query(server, `SELECT count(*) AS n FROM ${name}`);
  return rows[0].n as number;
}

async function fieldTypes(server: TestServer, name: string): Promise<Record<string, unknown>> {
  const res = await server.request(`/api/v1/logstream/${name}/schema`);
  expect(res.status).toBe(200);
  return Object.fromEntries((await body<SchemaResponse>(res)).fields.map((f) => [f.name, f.data_type]));
}

/** `levels` nested objects: {"l1":{"l2":…{"leaf":1}}}, the outer event object counting as level 1. */
function nested(levels: number): Record<string, unknown> {
  let obj: Record<string, unknown> = { leaf: 1 };
  for (let i = levels; i > 1; i--) obj = { [`l${i}`]: obj };
  return obj;
}

describe('JSON ingestion', () => {
  let server: TestServer;
  beforeAll(async () => {
    // Nothing is flushed while the file runs: every read below comes from the WAL.
    server = await startServer({ env: { P_MAX_BODY_BYTES: String(MAX_BODY), P_FLUSH_INTERVAL: '1h' } });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('POST /api/v1/logstream/{name} takes one object or an array; unknown dataset is 404', async () => {
    expect((await put(server, 'app')).status).toBe(200);
    const one = await post(server, 'app', { msg: 'one' });
    expect(one.status).toBe(200);
    expect(await body<unknown>(one)).toEqual({ message: 'ingested', count: 1 });
    const many = await post(server, 'app', [{ msg: 'two' }, { msg: 'three' }, { msg: 'four' }]);
    expect(many.status).toBe(200);
    expect(await body<unknown>(many)).toEqual({ message: 'ingested', count: 3 });
    expect(await count(server, 'app')).toBe(4);
    const rows = await query(server, 'SELECT msg FROM app ORDER BY msg');
    expect(rows.map((r) => r.msg)).toEqual(['four', 'one', 'three', 'two']);

    const missing = await post(server, 'ghost', { msg: 'x' });
    expect(await expectError(missing, 404)).toMatch(/ghost/);
    const list = await body<{ name: string }[]>(await server.request('/api/v1/logstream'));
    expect(list.map((d) => d.name)).not.toContain('ghost');
  });

  it('POST /api/v1/ingest creates the dataset named by X-P-Stream or ?stream=, and needs one of them', async () => {
    const viaHeader = await server.request('/api/v1/ingest', { method: 'POST', json: [{ a: 1 }, { a: 2 }], headers: { 'X-P-Stream': 'autocreated' } });
    expect(viaHeader.status).toBe(200);
    expect(await body<unknown>(viaHeader)).toEqual({ message: 'ingested', count: 2 });
    const again = await server.request('/api/v1/ingest', { method: 'POST', json: { a: 3 }, headers: { 'X-P-Stream': 'autocreated' } });
    expect(await body<unknown>(again)).toEqual({ message: 'ingested', count: 1 });
    expect(await query(server, 'SELECT a FROM autocreated ORDER BY a')).toEqual([{ a: 1 }, { a: 2 }, { a: 3 }]);

    const viaQuery = await server.request('/api/v1/ingest?stream=viaquery', { method: 'POST', json: { b: 'x' } });
    expect(viaQuery.status).toBe(200);
    expect(await body<unknown>(viaQuery)).toEqual({ message: 'ingested', count: 1 });
    expect(await query(server, 'SELECT b FROM viaquery')).toEqual([{ b: 'x' }]);

    const list = await body<{ name: string; kind: string }[]>(await server.request('/api/v1/logstream'));
    expect(list.filter((d) => d.name === 'autocreated' || d.name === 'viaquery')).toEqual([
      expect.objectContaining({ name: 'autocreated', kind: 'json' }),
      expect.objectContaining({ name: 'viaquery', kind: 'json' }),
    ]);

    const none = await server.request('/api/v1/ingest', { method: 'POST', json: { a: 1 } });
    expect(await expectError(none, 400)).toMatch(/X-P-Stream/);
    // The auto-create obeys the dataset name rules.
    const badName = await server.request('/api/v1/ingest', { method: 'POST', json: { a: 1 }, headers: { 'X-P-Stream': '1bad' } });
    expect(await expectError(badName, 400)).toMatch(/start with a letter/);
  });

  it('flattens nested objects with "_", keeps arrays as JSON text, and drops nulls', async () => {
    expect((await put(server, 'flat')).status).toBe(200);
    await ingestOk(server, 'flat', { http: { method: 'GET', status: 200, req: { bytes: 12 } }, tags: ['a', 1], gone: null, obj: { inner: null } });
    const types = await fieldTypes(server, 'flat');
    expect(types).toEqual({ http_method: 'Utf8', http_status: 'Int64', http_req_bytes: 'Int64', tags: 'Utf8', ...SERVICE_COLUMNS });
    const rows = await query(
      server,
      "SELECT http_method, http_status, http_req_bytes, tags, json_extract_string(tags, '$[0]') AS first, json_extract(tags, '$[1]')::INTEGER AS second, json_array_length(tags) AS len FROM flat",
    );
    expect(rows).toEqual([{ http_method: 'GET', http_status: 200, http_req_bytes: 12, tags: '["a",1]', first: 'a', second: 1, len: 2 }]);
  });

  it('stamps p_timestamp with the receive time and stores X-P-Meta-* / X-P-Tag-* headers', async () => {
    expect((await put(server, 'stamped')).status).toBe(200);
    const before = Date.now();
    await ingestOk(server, 'stamped', [{ n: 1, p_timestamp: '2001-01-01T00:00:00Z' }, { n: 2 }], { 'X-P-Meta-Host': 'h1', 'X-P-Tag-Env': 'prod' });
    const after = Date.now();
    const rows = await query(server, 'SELECT n, p_timestamp, p_metadata, p_tags FROM stamped ORDER BY n');
    expect(rows.length).toBe(2);
    for (const row of rows) {
      const ts = String(row.p_timestamp);
      expect(ts).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?Z$/);
      const ms = Date.parse(ts);
      expect(ms).toBeGreaterThanOrEqual(before);
      expect(ms).toBeLessThanOrEqual(after);
      expect(row.p_metadata).toBe('host=h1');
      expect(row.p_tags).toBe('env=prod');
    }
    // Both events of one request share the receive time, kept to the millisecond.
    expect(rows[0].p_timestamp).toBe(rows[1].p_timestamp);
    const exact = await query(server, `SELECT count(*) AS n FROM stamped WHERE p_timestamp = '${String(rows[0].p_timestamp).replace('Z', '')}'::TIMESTAMP`);
    expect(exact).toEqual([{ n: 2 }]);
    expect(await query(server, "SELECT count(*) AS n FROM stamped WHERE p_timestamp < '2002-01-01'")).toEqual([{ n: 0 }]);
    // Without the headers, the columns are null; a client's own p_ fields are kept in p_overflow.
    await ingestOk(server, 'stamped', { n: 3, p_metadata: 'forged', p_tags: 'forged' });
    expect(await query(server, 'SELECT p_metadata, p_tags, p_overflow FROM stamped WHERE n = 3')).toEqual([
      { p_metadata: null, p_tags: null, p_overflow: '{"p_metadata":"forged","p_tags":"forged"}' },
    ]);
    expect(await query(server, 'SELECT p_overflow FROM stamped WHERE n = 1')).toEqual([{ p_overflow: '{"p_timestamp":"2001-01-01T00:00:00Z"}' }]);
  });

  it('timestamps read back in the Date#toISOString form, milliseconds always written out', async () => {
    const [row] = await query(server, "SELECT p_timestamp AS t, date_trunc('second', p_timestamp) AS s FROM stamped WHERE n = 1");
    const ms = Date.parse(String(row.t));
    // A whole second (as 1 receive time in 1000 is) still shows ".000".
    expect(row.s).toBe(new Date(Math.floor(ms / 1000) * 1000).toISOString());
    expect(row.t).toBe(new Date(ms).toISOString());
  });

  it('an event is visible to a query as soon as the ingest returns (before any flush)', async () => {
    expect((await put(server, 'instant')).status).toBe(200);
    for (let i = 1; i <= 5; i++) {
      await ingestOk(server, 'instant', { i });
      expect(await query(server, 'SELECT max(i) AS m, count(*) AS n FROM instant')).toEqual([{ m: i, n: i }]);
    }
    const stats = await body<Stats>(await server.request('/api/v1/logstream/instant/stats'));
    expect(stats.wal.count).toBe(5);
    expect(stats.storage.files).toBe(0);
  });

  it('schema evolution: new fields add columns that read as null in older rows', async () => {
    expect((await put(server, 'evo')).status).toBe(200);
    await ingestOk(server, 'evo', { a: 1 });
    expect(await fieldTypes(server, 'evo')).toEqual({ a: 'Int64', ...SERVICE_COLUMNS });
    await ingestOk(server, 'evo', { a: 2, b: 'new' });
    expect(await fieldTypes(server, 'evo')).toEqual({ a: 'Int64', ...SERVICE_COLUMNS, b: 'Utf8' });
    expect(await query(server, 'SELECT a, b FROM evo ORDER BY a', {}, { send_null: true })).toEqual([
      { a: 1, b: null },
      { a: 2, b: 'new' },
    ]);
    expect(await query(server, 'SELECT a, b FROM evo ORDER BY a', {}, { send_null: false })).toEqual([{ a: 1 }, { a: 2, b: 'new' }]);
  });

  it('schema evolution: BIGINT widens to DOUBLE; numbers into a VARCHAR column are stored as text', async () => {
    expect((await put(server, 'widen')).status).toBe(200);
    await ingestOk(server, 'widen', { n: 1 });
    await ingestOk(server, 'widen', { n: 1.5 });
    expect((await fieldTypes(server, 'widen')).n).toBe('Float64');
    const rows = await query(server, 'SELECT n FROM widen ORDER BY n');
    expect(rows).toEqual([{ n: 1 }, { n: 1.5 }]);
    expect(rows.map((r) => typeof r.n)).toEqual(['number', 'number']);
    // An integer into the widened column is fine.
    await ingestOk(server, 'widen', { n: 7 });
    expect(await query(server, 'SELECT sum(n) AS s FROM widen')).toEqual([{ s: 9.5 }]);

    expect((await put(server, 'texty')).status).toBe(200);
    await ingestOk(server, 'texty', { code: 'abc' });
    await ingestOk(server, 'texty', [{ code: 42 }, { code: 2.5 }]);
    expect((await fieldTypes(server, 'texty')).code).toBe('Utf8');
    const codes = await query(server, 'SELECT code FROM texty ORDER BY code');
    expect(codes).toEqual([{ code: '2.5' }, { code: '42' }, { code: 'abc' }]);
    expect(await query(server, "SELECT count(*) AS n FROM texty WHERE code = '42'")).toEqual([{ n: 1 }]);
  });

  it('schema evolution: a value that conflicts with its column goes to the typed sibling column, the request is accepted', async () => {
    expect((await put(server, 'strict')).status).toBe(200);
    await ingestOk(server, 'strict', { n: 1 });
    expect(await ingestOk(server, 'strict', [{ n: 2, extra: 'valid row' }, { n: 'three' }, { n: true }, { n: 4.5 }])).toBe(4);
    // Parseable's naming: <field>_<Arrow type>. The BIGINT column widened for 4.5; nothing was rewritten.
    expect(await fieldTypes(server, 'strict')).toEqual({ n: 'Float64', ...SERVICE_COLUMNS, extra: 'Utf8', n_utf8: 'Utf8', n_bool: 'Boolean' });
    expect(await query(server, 'SELECT n, n_utf8, n_bool, extra FROM strict ORDER BY p_timestamp, n NULLS LAST, n_utf8 NULLS LAST')).toEqual([
      { n: 1, n_utf8: null, n_bool: null, extra: null },
      { n: 2, n_utf8: null, n_bool: null, extra: 'valid row' },
      { n: 4.5, n_utf8: null, n_bool: null, extra: null },
      { n: null, n_utf8: 'three', n_bool: null, extra: null },
      { n: null, n_utf8: null, n_bool: true, extra: null },
    ]);
    // Later values of each type go where the earlier ones went.
    await ingestOk(server, 'strict', [{ n: 'four' }, { n: 5 }]);
    expect(await query(server, "SELECT count(*) AS c FROM strict WHERE n_utf8 = 'four' OR n = 5")).toEqual([{ c: 2 }]);
    const stats = await body<Stats>(await server.request('/api/v1/logstream/strict/stats'));
    expect(stats.ingestion.count).toBe(7);
  });

  it('field names differing only in letter case from a column go to p_overflow, by name', async () => {
    expect((await put(server, 'cased')).status).toBe(200);
    await ingestOk(server, 'cased', { level: 'info' });
    await ingestOk(server, 'cased', { Level: 'warn' });
    await ingestOk(server, 'cased', [{ other: 1 }, { LEVEL: 'x' }]);
    await ingestOk(server, 'cased', { Dup: 1, dup: 2 });
    expect(await count(server, 'cased')).toBe(5);
    expect(await fieldTypes(server, 'cased')).toEqual({ level: 'Utf8', ...SERVICE_COLUMNS, p_overflow: 'Utf8', other: 'Int64', Dup: 'Int64' });
    const rows = await query(server, "SELECT level, p_overflow, json_extract_string(p_overflow, '$.Level') AS lv FROM cased WHERE p_overflow IS NOT NULL ORDER BY p_overflow");
    expect(rows).toEqual([
      { level: null, p_overflow: '{"LEVEL":"x"}', lv: null },
      { level: null, p_overflow: '{"Level":"warn"}', lv: 'warn' },
      { level: null, p_overflow: '{"dup":2}', lv: null },
    ]);
  });

  it('rejects bad bodies with a JSON error and stores nothing from them', async () => {
    expect((await put(server, 'limits')).status).toBe(200);
    await ingestOk(server, 'limits', { ok: 1 });

    // Body size: the limit itself is fine, one byte over is 413 (declared length or streamed).
    const fill = (size: number) => {
      const base = JSON.stringify({ ok: 2, pad: '' });
      const text = JSON.stringify({ ok: 2, pad: 'x'.repeat(size - base.length) });
      expect(Buffer.byteLength(text)).toBe(size);
      return text;
    };
    const atLimit = await postRaw(server, 'limits', fill(MAX_BODY));
    expect(atLimit.status, await atLimit.clone().text()).toBe(200);
    expect(await expectError(await postRaw(server, 'limits', fill(MAX_BODY + 1)), 413)).toMatch(/limit/);
    expect(await expectError(await postRaw(server, 'limits', fill(MAX_BODY * 4)), 413)).toMatch(/limit/);
    const chunk = new TextEncoder().encode(fill(600));
    const streamed = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(chunk);
        controller.enqueue(chunk);
        controller.close();
      },
    });
    expect(await expectError(await postRaw(server, 'limits', streamed), 413)).toMatch(/limit/);

    expect(await expectError(await postRaw(server, 'limits', '{"ok": 3,'), 400)).toMatch(/JSON/);
    expect(await expectError(await postRaw(server, 'limits', "{'ok': 3}"), 400)).toMatch(/JSON/);
    for (const scalar of ['42', '"x"', 'true', 'null']) {
      expect(await expectError(await postRaw(server, 'limits', scalar), 400), scalar).toMatch(/object/);
    }
    expect(await expectError(await postRaw(server, 'limits', '[{"ok": 4}, 5]'), 400)).toMatch(/element 1/);
    expect(await expectError(await postRaw(server, 'limits', '[{"ok": 4}, [{"ok": 5}]]'), 400)).toMatch(/element 1/);
    expect(await expectError(await postRaw(server, 'limits', '[{"ok": 4}, null]'), 400)).toMatch(/element 1/);
    expect(await expectError(await postRaw(server, 'limits', ''), 400)).toMatch(/empty/);

    // Nesting: P_MAX_NESTING (10) levels are fine, one more is a 400, in objects and in arrays alike.
    expect(await ingestOk(server, 'limits', nested(10))).toBe(1);
    expect(await expectError(await post(server, 'limits', [{ ok: 6 }, nested(11)]), 400)).toMatch(/nesting/);
    expect(await expectError(await post(server, 'limits', nested(50)), 400)).toMatch(/nesting/);
    let deepArray: unknown = 1;
    for (let i = 0; i < 12; i++) deepArray = [deepArray];
    expect(await expectError(await post(server, 'limits', { ok: 7, deep: deepArray }), 400)).toMatch(/nesting/);

    // Only the three accepted requests are stored.
    expect(await count(server, 'limits')).toBe(3);
    expect(await query(server, 'SELECT ok FROM limits ORDER BY ok')).toEqual([{ ok: 1 }, { ok: 2 }, { ok: null }]);
    const types = await fieldTypes(server, 'limits');
    expect(Object.keys(types).sort()).toEqual(['l2_l3_l4_l5_l6_l7_l8_l9_l10_leaf', 'ok', 'p_src_ip', 'p_timestamp', 'p_user_agent', 'pad']);
  });

  it('JSON events cannot go into an OTel dataset', async () => {
    const created = await put(server, 'otellogs', { 'X-P-Log-Source': 'otel-logs' });
    expect(created.status).toBe(200);
    expect(await body<{ kind: string }>(created)).toMatchObject({ name: 'otellogs', kind: 'otel-logs' });
    expect(await expectError(await post(server, 'otellogs', { msg: 'x' }), 400)).toMatch(/otel-logs/);
    const viaIngest = await server.request('/api/v1/ingest', { method: 'POST', json: { msg: 'x' }, headers: { 'X-P-Stream': 'otellogs' } });
    expect(await expectError(viaIngest, 400)).toMatch(/otel-logs/);
    const stats = await body<Stats>(await server.request('/api/v1/logstream/otellogs/stats'));
    expect(stats.ingestion.count).toBe(0);
    expect(await expectError(await put(server, 'bogus', { 'X-P-Log-Source': 'syslog' }), 400)).toMatch(/X-P-Log-Source/);
  });
});
