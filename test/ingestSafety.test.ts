/**
 * Ingest safety (issue 9's ingest side): one event never bricks a dataset, ordinary names are ordinary,
 * headers cannot forge metadata, a body's cost is bounded, and type conflicts or a full schema never
 * drop data. Everything through HTTP against spawned servers, as clients send it.
 */
import * as http from 'node:http';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError } from './helpers/assert.ts';
import { ADMIN_KEY, query, startServer, type TestServer } from './helpers/server.ts';
import { otlpLogsJson, otlpLogsProtobuf, remoteWriteV1, remoteWriteV2, REMOTE_WRITE_V2, type SeriesSpec } from './helpers/wire.ts';
import { sleep, waitFor } from './helpers/wait.ts';

/** Expects 200 (the body is JSON, or empty protobuf for OTLP/protobuf) and returns the body's text. */
async function okJson(res: Response): Promise<string> {
  const text = await res.text();
  expect(res.status, text).toBe(200);
  return text;
}

const postJson = (server: TestServer, dataset: string, text: string | Buffer, headers: Record<string, string> = {}) =>
  server.request('/api/v1/ingest', { method: 'POST', body: typeof text === 'string' ? text : new Uint8Array(text), headers: { 'content-type': 'application/json', 'X-P-Stream': dataset, ...headers } });
const postLogs = (server: TestServer, dataset: string, body: string | Buffer) =>
  server.request('/v1/logs', {
    method: 'POST',
    body: typeof body === 'string' ? body : new Uint8Array(body),
    headers: { 'content-type': typeof body === 'string' ? 'application/json' : 'application/x-protobuf', 'X-P-Stream': dataset },
  });
const postRemoteWrite = (server: TestServer, dataset: string, body: Buffer, v2 = false) =>
  server.request(`/v1/prometheus/write?stream=${dataset}`, {
    method: 'POST',
    body: new Uint8Array(body),
    headers: { 'content-encoding': 'snappy', 'content-type': v2 ? REMOTE_WRITE_V2 : 'application/x-protobuf' },
  });

async function fieldTypes(server: TestServer, dataset: string): Promise<Record<string, string>> {
  const res = await server.request(`/api/v1/logstream/${dataset}/schema`);
  expect(res.status).toBe(200);
  const schema = (await res.json()) as { fields: { name: string; data_type: string }[] };
  return Object.fromEntries(schema.fields.map((f) => [f.name, f.data_type]));
}

/** A gauge or counter of the server's /metrics (unlabelled). */
const metricOf = async (server: TestServer, name: string) =>
  Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(await (await server.request('/metrics')).text())?.[1]);

/**
 * A JSON ingest request opened with node:http, so a test can send part of its declared body, finish it
 * later (`req.end(rest)`) or go away (`req.destroy()`). `response` settles when the server answers.
 */
function openIngest(server: TestServer, stream: string, declaredLength: number) {
  const url = new URL(server.url);
  const req = http.request({
    host: url.hostname,
    port: url.port,
    path: '/api/v1/ingest',
    method: 'POST',
    headers: { 'x-api-key': server.apiKey, 'x-p-stream': stream, 'content-type': 'application/json', 'content-length': declaredLength },
  });
  const response = new Promise<{ status: number; body: string }>((resolve, reject) => {
    req.on('response', (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, body: text }));
    });
    req.on('error', reject);
  });
  // A test that destroys the request never awaits its response.
  response.catch(() => {});
  return { req, response };
}

const NUL = '\u0000';
const now = Date.now();

describe('ingest safety', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({ env: { P_FLUSH_INTERVAL: '1h' } });
  });
  afterAll(async () => server?.stop());

  it('a NUL in a name or a lone surrogate in a name or value, in every format, is acknowledged and stays queryable through a flush', async () => {
    // JSON: the escapes as a client's JSON text carries them.
    await okJson(await postJson(server, 'poison_json', '[{"a\\u0000b":1,"msg":"\\ud83d truncated emoji","\\ud83dk":"x","ctl\\u0001\\nname":"v\\u0000x"},{"msg":"fine"}]'));
    // OTLP/JSON and OTLP/protobuf: attribute keys with NUL (and, in JSON, a lone surrogate value).
    await okJson(await postLogs(server, 'poison_otlp', otlpLogsJson([{ timeMs: now, attributes: [[`a${NUL}b`, { string: '\ud83d' }], ['ok', { int: 1 }]] }])));
    await okJson(await postLogs(server, 'poison_otlp', otlpLogsProtobuf([{ timeMs: now, attributes: [[Buffer.from([0x61, 0, 0x62]), { string: Buffer.from([0xed, 0xa0, 0xbd]) }], ['ok', { int: 2 }]] }])));
    // Remote write 1.0 and 2.0: label names with NUL.
    const series = (v: number): SeriesSpec[] => [{ labels: [['__name__', 'poison'], [`a${NUL}b`, `v${NUL}`], ['ok', String(v)]], samples: [{ value: v, timestampMs: now }] }];
    await okJson(await postRemoteWrite(server, 'poison_prom', remoteWriteV1(series(1))));
    await okJson(await postRemoteWrite(server, 'poison_prom', remoteWriteV2(series(2)), true));

    const expectations = async () => {
      expect(await query(server, 'SELECT ab, msg, "\ufffdk" AS k, ctlname FROM poison_json ORDER BY msg')).toEqual([
        { ab: null, msg: 'fine', k: null, ctlname: null },
        { ab: 1, msg: '\ufffd truncated emoji', k: 'x', ctlname: `v${NUL}x` },
      ]);
      expect(await query(server, 'SELECT ok, ab FROM poison_otlp ORDER BY ok')).toEqual([
        { ok: 1, ab: '\ufffd' },
        { ok: 2, ab: '\ufffd\ufffd\ufffd' },
      ]);
      expect(await query(server, 'SELECT ok, ab FROM poison_prom ORDER BY ok')).toEqual([
        { ok: '1', ab: `v${NUL}` },
        { ok: '2', ab: `v${NUL}` },
      ]);
      for (const d of ['poison_json', 'poison_otlp', 'poison_prom']) expect((await query(server, `SELECT * FROM ${d}`)).length).toBeGreaterThan(1);
    };
    await expectations();
    // A graceful restart flushes every WAL to Parquet; a poisoned dataset would fail here forever.
    await server.stop();
    server = await startServer({ dataDir: server.dataDir, env: { P_FLUSH_INTERVAL: '1h' } });
    for (const d of ['poison_json', 'poison_otlp', 'poison_prom']) {
      const stats = (await (await server.request(`/api/v1/logstream/${d}/stats`)).json()) as { wal: { count: number }; storage: { files: number } };
      expect(stats.wal.count, d).toBe(0);
      expect(stats.storage.files, d).toBeGreaterThan(0);
    }
    await expectations();
    await okJson(await postJson(server, 'poison_json', '{"msg":"after"}'));
    expect(await query(server, "SELECT count(*) AS n FROM poison_json WHERE msg = 'after'")).toEqual([{ n: 1 }]);
  });

  it('names of Object.prototype members are ordinary field names in every format', async () => {
    const names = ['constructor', 'toString', 'hasOwnProperty', '__proto__', 'valueOf'];
    await okJson(await postJson(server, 'proto_json', '{"constructor":"c","toString":"t","hasOwnProperty":"h","__proto__":"p","valueOf":1,"nested":{"__proto__":{"x":2}}}'));
    const types = await fieldTypes(server, 'proto_json');
    for (const n of names) expect(Object.keys(types)).toContain(n);
    expect(await query(server, 'SELECT "constructor" AS a, "toString" AS b, "hasOwnProperty" AS c, "__proto__" AS d, "valueOf" AS e, "nested___proto___x" AS f FROM proto_json')).toEqual([
      { a: 'c', b: 't', c: 'h', d: 'p', e: 1, f: 2 },
    ]);
    await okJson(await postLogs(server, 'proto_otlp', otlpLogsJson([{ timeMs: now, attributes: names.map((n, i) => [n, { int: i }]) }])));
    expect(await query(server, 'SELECT "constructor" AS a, "__proto__" AS d, "valueOf" AS e FROM proto_otlp')).toEqual([{ a: 0, d: 3, e: 4 }]);
    await okJson(await postRemoteWrite(server, 'proto_prom', remoteWriteV1([{ labels: names.map((n) => [n, `${n}!`]), samples: [{ value: 1, timestampMs: now }] }])));
    expect(await query(server, 'SELECT "constructor" AS a, "__proto__" AS d FROM proto_prom')).toEqual([{ a: 'constructor!', d: '__proto__!' }]);
  });

  it('X-P-* headers: separators in X-P-Meta-* cannot forge pairs; each header is a column as in current Parseable; p_src_ip, p_user_agent', async () => {
    const headers = {
      'X-P-Meta-Host': 'web-1^env=prod',
      'X-P-Tag-Team': 'a%b',
      'X-P-Environment': 'dev',
      'X-P-Long': 'x'.repeat(150),
      'X-P-Mine': 'from-header',
      'User-Agent': 'fluent-bit/3.1',
      'X-Forwarded-For': '203.0.113.7, 10.0.0.1',
    };
    await okJson(await postJson(server, 'headers', '[{"n":1},{"n":2,"mine":"from-event"}]', headers));
    const rows = await query(server, 'SELECT n, p_metadata, p_tags, "meta-host" AS mh, "tag-team" AS tt, environment, long, mine, p_src_ip, p_user_agent FROM headers ORDER BY n');
    const common = { p_metadata: 'host=web-1%5Eenv%3Dprod', p_tags: 'team=a%25b', mh: 'web-1^env=prod', tt: 'a%b', environment: 'dev', long: 'x'.repeat(100), p_src_ip: '203.0.113.7', p_user_agent: 'fluent-bit/3.1' };
    expect(rows).toEqual([
      { n: 1, mine: 'from-header', ...common },
      { n: 2, mine: 'from-event', ...common },
    ]);
    // Only the first 8 header columns (by name) are kept; X-P-Stream is never a column; without a
    // forwarding header the peer's address is p_src_ip.
    const many = Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`X-P-H${String(i).padStart(2, '0')}`, String(i)]));
    await okJson(await postJson(server, 'headers_many', '{"n":1}', many));
    const cols = Object.keys(await fieldTypes(server, 'headers_many'));
    expect(cols.filter((c) => /^h\d\d$/.test(c)).sort()).toEqual(['h00', 'h01', 'h02', 'h03', 'h04', 'h05', 'h06', 'h07']);
    expect(cols).not.toContain('stream');
    expect(await query(server, 'SELECT p_src_ip FROM headers_many')).toEqual([{ p_src_ip: '127.0.0.1' }]);
  });

  it('OTel attributes that change type are stored in typed sibling columns; the request is accepted', async () => {
    const rec = (status: { int: number } | { string: string } | { bool: boolean }, i: number) => ({ timeMs: now + i, attributes: [['http.status_code', status], ['i', { int: i }]] as [string, typeof status | { int: number }][] });
    await okJson(await postLogs(server, 'otel_conflict', otlpLogsJson([rec({ int: 200 }, 1)])));
    const res = await postLogs(server, 'otel_conflict', otlpLogsJson([rec({ string: 'OK' }, 2), rec({ int: 500 }, 3), rec({ bool: true }, 4)]));
    expect(res.status, await res.clone().text()).toBe(200);
    expect(await res.json()).toEqual({});
    const types = await fieldTypes(server, 'otel_conflict');
    expect(types['http.status_code']).toBe('Int64');
    expect(types['http.status_code_utf8']).toBe('Utf8');
    expect(types['http.status_code_bool']).toBe('Boolean');
    expect(await query(server, 'SELECT i, "http.status_code" AS s, "http.status_code_utf8" AS u, "http.status_code_bool" AS b FROM otel_conflict ORDER BY i')).toEqual([
      { i: 1, s: 200, u: null, b: null },
      { i: 2, s: null, u: 'OK', b: null },
      { i: 3, s: 500, u: null, b: null },
      { i: 4, s: null, u: null, b: true },
    ]);
  });

  it('requests racing to add the same new column with different types are all stored', async () => {
    const sends: Promise<Response>[] = [];
    for (let d = 0; d < 6; d++) {
      for (const v of [1, 'one', true, 2.5]) sends.push(postJson(server, `race_${d}`, JSON.stringify({ x: v, kind: typeof v })));
    }
    for (const res of await Promise.all(sends)) await okJson(res);
    for (let d = 0; d < 6; d++) {
      const types = await fieldTypes(server, `race_${d}`);
      const xs = Object.keys(types).filter((c) => c === 'x' || c.startsWith('x_'));
      // Every value is there, in exactly one of the x columns (which one depends on who came first).
      const rows = await query(server, `SELECT kind, ${xs.map((c) => `"${c}"`).join(', ')} FROM race_${d} ORDER BY kind`);
      expect(rows.map((r) => r.kind)).toEqual(['boolean', 'number', 'number', 'string']);
      for (const row of rows) expect(xs.filter((c) => row[c] !== null).length, JSON.stringify(row)).toBe(1);
    }
  });
});

describe('a dataset at P_MAX_COLUMNS', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({ env: { P_MAX_COLUMNS: '8' } });
  });
  afterAll(async () => server?.stop());

  it('stores fields beyond the limit in the p_overflow JSON column instead of refusing them', async () => {
    const event = Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`f${String(i).padStart(2, '0')}`, i]));
    await okJson(await postJson(server, 'wide', JSON.stringify(event)));
    await okJson(await postJson(server, 'wide', JSON.stringify({ f00: 100, late: 'x' })));
    const types = await fieldTypes(server, 'wide');
    // 5 data columns fill the limit next to the 3 service columns; the overflow column is extra.
    expect(Object.keys(types).sort()).toEqual(['f00', 'f01', 'f02', 'f03', 'f04', 'p_overflow', 'p_src_ip', 'p_timestamp', 'p_user_agent']);
    expect(types.p_overflow).toBe('Utf8');
    const rows = await query(server, "SELECT f00, p_overflow, json_extract(p_overflow, '$.f11')::INTEGER AS f11 FROM wide ORDER BY f00");
    expect(rows).toEqual([
      { f00: 0, p_overflow: '{"f05":5,"f06":6,"f07":7,"f08":8,"f09":9,"f10":10,"f11":11}', f11: 11 },
      { f00: 100, p_overflow: '{"late":"x"}', f11: null },
    ]);
  });
});

describe('bodies that cost far more than their size', () => {
  let server: TestServer;
  let small: TestServer;
  beforeAll(async () => {
    [server, small] = await Promise.all([startServer(), startServer({ env: { P_MAX_EVENTS_PER_REQUEST: '50', P_MAX_VALUES_PER_REQUEST: '2000' } })]);
  });
  afterAll(async () => {
    await Promise.all([server?.stop(), small?.stop()]);
  });

  it('a gzip bomb of 22 million empty events is refused with 413 at once, and ingestion goes on', async () => {
    // 64 MiB (P_MAX_DECOMPRESSED_BYTES) of `[{},{},…]`: 22 million events.
    const events = Math.floor((64 * 1024 * 1024 - 1) / 3);
    const bomb = gzipSync(Buffer.from(`[${'{},'.repeat(events - 1)}{}]`), { level: 9 });
    expect(bomb.length).toBeLessThan(200_000);
    const started = Date.now();
    const res = await postJson(server, 'bombed', bomb, { 'content-encoding': 'gzip' });
    expect(await expectError(res, 413)).toMatch(/P_MAX_EVENTS_PER_REQUEST/);
    // Generous for a contended machine; it was 87 s before the limit.
    expect(Date.now() - started).toBeLessThan(15_000);
    const two = await Promise.all([postJson(server, 'bombed', bomb, { 'content-encoding': 'gzip' }), postJson(server, 'bombed', '{"ok":1}')]);
    expect(two[0].status).toBe(413);
    await okJson(two[1]);
    expect(await query(server, 'SELECT ok FROM bombed')).toEqual([{ ok: 1 }]);
  });

  it('events, log records and samples per request: the limit is fine, one more is 413 naming the setting', async () => {
    const events = (n: number) => JSON.stringify(Array.from({ length: n }, (_, i) => ({ i })));
    await okJson(await postJson(small, 'limited', events(50)));
    expect(await expectError(await postJson(small, 'limited', events(51)), 413)).toMatch(/51 events.*P_MAX_EVENTS_PER_REQUEST/);
    const records = (n: number) => Array.from({ length: n }, (_, i) => ({ timeMs: now + i, attributes: [] as [string, { int: number }][] }));
    await okJson(await postLogs(small, 'limited_logs', otlpLogsJson(records(50))));
    expect(await expectError(await postLogs(small, 'limited_logs', otlpLogsJson(records(51))), 413)).toMatch(/log records.*P_MAX_EVENTS_PER_REQUEST/);
    await okJson(await postLogs(small, 'limited_logs', otlpLogsProtobuf(records(50))));
    expect(await expectError(await postLogs(small, 'limited_logs', otlpLogsProtobuf(records(51))), 413)).toMatch(/log records.*P_MAX_EVENTS_PER_REQUEST/);
    const samples = (n: number): SeriesSpec[] => [{ labels: [['__name__', 'm']], samples: Array.from({ length: n }, (_, i) => ({ value: i, timestampMs: now + i })) }];
    await okJson(await postRemoteWrite(small, 'limited_prom', remoteWriteV1(samples(50))));
    expect(await expectError(await postRemoteWrite(small, 'limited_prom', remoteWriteV1(samples(51))), 413)).toMatch(/samples.*P_MAX_EVENTS_PER_REQUEST/);
    expect(await expectError(await postRemoteWrite(small, 'limited_prom', remoteWriteV2(samples(51)), true), 413)).toMatch(/samples.*P_MAX_EVENTS_PER_REQUEST/);
    expect(await query(small, 'SELECT count(*) AS n FROM limited')).toEqual([{ n: 50 }]);
    expect(await query(small, 'SELECT count(*) AS n FROM limited_logs')).toEqual([{ n: 100 }]);
    expect(await query(small, 'SELECT count(*) AS n FROM limited_prom')).toEqual([{ n: 50 }]);
  });

  it('values per request: one event with thousands of fields, one record with thousands of attributes are 413', async () => {
    const wide = JSON.stringify(Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`k${i}`, i])));
    expect(await expectError(await postJson(small, 'limited_values', wide), 413)).toMatch(/P_MAX_VALUES_PER_REQUEST/);
    const attrs = Array.from({ length: 3000 }, (_, i) => [`a${i}`, { int: i }] as [string, { int: number }]);
    expect(await expectError(await postLogs(small, 'limited_values_logs', otlpLogsProtobuf([{ timeMs: now, attributes: attrs }])), 413)).toMatch(/P_MAX_VALUES_PER_REQUEST/);
    expect(await expectError(await postLogs(small, 'limited_values_logs', otlpLogsJson([{ timeMs: now, attributes: attrs }])), 413)).toMatch(/P_MAX_VALUES_PER_REQUEST/);
    // Nothing was stored, and no dataset was created by a refused body.
    const list = (await (await small.request('/api/v1/logstream')).json()) as { name: string }[];
    expect(list.map((d) => d.name)).not.toContain('limited_values');
  });
});

describe('the in-flight byte budget (P_MAX_INFLIGHT_BYTES)', () => {
  const LIMIT = 1024 * 1024;
  let server: TestServer;
  beforeAll(async () => {
    // No waiting: a request that does not fit is refused at once, so the test needs no timing.
    server = await startServer({ env: { P_MAX_INFLIGHT_BYTES: String(LIMIT), P_INFLIGHT_WAIT: '0', P_MAX_BODY_BYTES: '2MiB' } });
  }, 60_000);
  afterAll(async () => server?.stop());
  const now = Date.now();
  const metric = (name: string) => metricOf(server, name);
  const events = (n: number, from: number) => JSON.stringify(Array.from({ length: n }, (_, i) => ({ i: from + i, pad: 'x'.repeat(200) })));
  const records = (n: number) => Array.from({ length: n }, (_, i) => ({ timeMs: now + i, attributes: [['pad', { string: 'y'.repeat(200) }]] as [string, { string: string }][] }));
  const samples = (n: number): SeriesSpec[] => Array.from({ length: n }, (_, s) => ({ labels: [['__name__', 'm'], ['s', String(s)], ['pad', 'z'.repeat(200)]], samples: [{ value: s, timestampMs: now }] }));

  it('while one large body holds the budget, every ingest route answers 503 with Retry-After; the held body is then stored', async () => {
    // A client that sends all but the last bytes of a large body: what has arrived is reserved (in steps,
    // never past the declared length) while the rest is awaited.
    const held = Buffer.from(events(3000, 0));
    expect(held.length).toBeGreaterThan(LIMIT / 2);
    expect(held.length).toBeLessThan(LIMIT);
    const { req, response } = openIngest(server, 'inflight_held', held.length);
    req.write(held.subarray(0, held.length - 10));
    await waitFor('the held body is admitted', async () => (await metric('lakehouse_ingest_inflight_bytes')) >= held.length - 10);

    const refusals: [string, () => Promise<Response>][] = [
      // Each over the ~390 KB left: its body, or for remote write its body and the snappy block's decoded size.
      ['JSON', () => postJson(server, 'inflight_json', events(2000, 0))],
      ['OTLP logs', () => postLogs(server, 'inflight_otlp', otlpLogsJson(records(2000)))],
      ['OTLP logs, protobuf', () => postLogs(server, 'inflight_otlp', otlpLogsProtobuf(records(2000)))],
      ['remote write', () => postRemoteWrite(server, 'inflight_prom', remoteWriteV1(samples(2000)))],
      // Without Content-Length (chunked) a body is reserved as it arrives just the same: refused once it outgrows the room left.
      ['JSON, chunked', () => server.request('/api/v1/ingest', { method: 'POST', body: new Blob([events(2000, 0)]).stream(), duplex: 'half', headers: { 'content-type': 'application/json', 'X-P-Stream': 'inflight_json' } } as RequestInit)],
    ];
    for (const [label, send] of refusals) {
      const res = await send();
      expect(res.status, label).toBe(503);
      expect(Number(res.headers.get('retry-after')), label).toBeGreaterThan(0);
      expect(await res.text(), label).toMatch(/P_MAX_INFLIGHT_BYTES/);
    }
    req.end(held.subarray(held.length - 10));
    const stored = await response;
    expect(stored.status, stored.body).toBe(200);
    expect(JSON.parse(stored.body)).toMatchObject({ count: 3000 });
    // Refused requests stored nothing and created no dataset.
    const list = (await (await server.request('/api/v1/logstream')).json()) as { name: string }[];
    expect(list.map((d) => d.name).filter((n) => n.startsWith('inflight_') && n !== 'inflight_members')).toEqual(['inflight_held']);
    expect(await metric('lakehouse_ingest_inflight_bytes')).toBe(0);
  });

  it('a client that goes away in the middle of its body stores nothing, creates no dataset and gives its reservation back', async () => {
    const body = Buffer.from(events(2000, 0));
    for (const size of [body.length, 100]) {
      // 100 bytes: a body that arrives in one chunk, cut short just the same.
      const { req } = openIngest(server, 'inflight_gone', size);
      req.write(body.subarray(0, Math.min(size, body.length) >> 1));
      await waitFor('the body is admitted', async () => (await metric('lakehouse_ingest_inflight_bytes')) > 0);
      req.destroy();
      await waitFor('the reservation is given back', async () => (await metric('lakehouse_ingest_inflight_bytes')) === 0);
    }
    const list = (await (await server.request('/api/v1/logstream')).json()) as { name: string }[];
    expect(list.map((d) => d.name)).not.toContain('inflight_gone');
    // And the route still serves the next client.
    await okJson(await postJson(server, 'inflight_after_gone', events(3, 0)));
  });

  it('many concurrent large requests on every route: clients retrying 503s get everything stored, and bytes in flight never pass the limit', async () => {
    type Sent = { route: string; send: () => Promise<Response>; rows: number };
    const sent: Sent[] = [];
    for (let k = 0; k < 8; k++) {
      sent.push({ route: 'json', send: () => postJson(server, 'burst_json', events(1000, k * 1000)), rows: 1000 });
      sent.push({ route: 'json, gzip', send: () => postJson(server, 'burst_json', gzipSync(events(1000, 100_000 + k * 1000)), { 'content-encoding': 'gzip' }), rows: 1000 });
      sent.push({ route: 'otlp', send: () => postLogs(server, 'burst_otlp', otlpLogsProtobuf(records(1000))), rows: 1000 });
      sent.push({ route: 'remote write', send: () => postRemoteWrite(server, 'burst_prom', remoteWriteV1(samples(1000))), rows: 1000 });
    }
    let refused = 0;
    await Promise.all(
      sent.map(async ({ route, send }) => {
        // A client with retries: a 503 is sent again (after a short pause rather than the full Retry-After, to keep the test short).
        for (;;) {
          const res = await send();
          if (res.status === 200) return void (await res.arrayBuffer());
          expect(res.status, `${route}: ${await res.text()}`).toBe(503);
          expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
          refused++;
          await sleep(20);
        }
      }),
    );
    // 32 bodies of ~230 KB at once against 1 MiB: most had to be retried.
    expect(refused).toBeGreaterThan(0);
    expect(await metric('lakehouse_ingest_inflight_peak_bytes')).toBeLessThanOrEqual(LIMIT);
    expect(await metric('lakehouse_ingest_inflight_bytes')).toBe(0);
    expect(await query(server, 'SELECT count(*) AS n, count(DISTINCT i) AS d FROM burst_json')).toEqual([{ n: 16_000, d: 16_000 }]);
    expect(await query(server, 'SELECT count(*) AS n FROM burst_otlp')).toEqual([{ n: 8000 }]);
    expect(await query(server, 'SELECT count(*) AS n FROM burst_prom')).toEqual([{ n: 8000 }]);
  });

  it('a gzip body of several members (its trailer states only the last one) is decoded and stored whole (reserving the full decompressed limit, so it ran alone)', async () => {
    // A server of its own: the peak this test reserves must not meet the other tests' budget figures.
    const own = await startServer({ env: { P_MAX_INFLIGHT_BYTES: String(LIMIT), P_INFLIGHT_WAIT: '0', P_MAX_BODY_BYTES: '2MiB' } });
    try {
      // One JSON array split across two members; the second, tiny, is what the trailer describes.
      const text = events(500, 0);
      const body = Buffer.concat([gzipSync(text.slice(0, -1)), gzipSync(',{"i":500}]')]);
      const res = await postJson(own, 'inflight_members', body, { 'content-encoding': 'gzip' });
      expect(JSON.parse(await okJson(res))).toMatchObject({ count: 501 });
      expect(await metricOf(own, 'lakehouse_ingest_inflight_peak_bytes')).toBeGreaterThanOrEqual(64 * 1024 * 1024);
      expect(await metricOf(own, 'lakehouse_ingest_inflight_bytes')).toBe(0);
    } finally {
      await own.stop();
    }
  });
});

describe('a client that leaves while its request waits for room in the in-flight budget', () => {
  const LIMIT = 1024 * 1024;
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({ env: { P_MAX_INFLIGHT_BYTES: String(LIMIT), P_INFLIGHT_WAIT: '20s' } });
  }, 60_000);
  afterAll(async () => server?.stop());
  const metric = (name: string) => metricOf(server, name);
  const events = (n: number) => Buffer.from(JSON.stringify(Array.from({ length: n }, (_, i) => ({ i, pad: 'x'.repeat(200) }))));

  it('gives its reservation back once the budget lets it in, and the request that held the budget is stored', async () => {
    // A holds ~700 KB of the 1 MiB while the last bytes of its body are awaited.
    const heldBody = events(3000);
    const a = openIngest(server, 'leave_held', heldBody.length);
    a.req.write(heldBody.subarray(0, heldBody.length - 10));
    await waitFor('A is admitted', async () => (await metric('lakehouse_ingest_inflight_bytes')) >= heldBody.length - 10);
    // B's body outgrows the room left and waits; its client then goes away.
    const bBody = events(2000);
    const b = openIngest(server, 'leave_gone', bBody.length);
    b.req.write(bBody.subarray(0, bBody.length - 10));
    await waitFor('B waits', async () => (await metric('lakehouse_ingest_waiting')) === 1);
    b.req.destroy();
    await sleep(200);
    // A ends; B is let in after its client left, and must give the room back at once.
    a.req.end(heldBody.subarray(heldBody.length - 10));
    const stored = await a.response;
    expect(stored.status, stored.body).toBe(200);
    await waitFor('every reservation is given back', async () => (await metric('lakehouse_ingest_inflight_bytes')) === 0 && (await metric('lakehouse_ingest_waiting')) === 0);
    const list = (await (await server.request('/api/v1/logstream')).json()) as { name: string }[];
    expect(list.map((d) => d.name)).not.toContain('leave_gone');
    expect(await query(server, 'SELECT count(*) AS n FROM leave_held')).toEqual([{ n: 3000 }]);
  });
});

describe('slow bodies (one byte at a time) do not hold the in-flight budget', () => {
  const SLOW_KEY = 'slow-writer-key';
  const GRACE_S = 15;
  let server: TestServer;
  beforeAll(async () => {
    // The default budget (64 MiB) and body limit (10 MiB): seven bodies declaring 10 MiB each would hold
    // all of it if what they declare were reserved.
    server = await startServer({ env: { P_API_KEYS: `${ADMIN_KEY}:admin,${SLOW_KEY}:writer:slow_ds`, P_INGEST_BODY_TIMEOUT: `${GRACE_S}s` } });
  }, 60_000);
  afterAll(async () => server?.stop());
  const metric = (name: string) => metricOf(server, name);

  it("seven slow connections of one scoped writer: another key's ingest is stored, and the slow ones are cut after the grace", async () => {
    const url = new URL(server.url);
    const declared = 10 * 1024 * 1024;
    const slow = Array.from({ length: 7 }, () => {
      const req = http.request({ host: url.hostname, port: url.port, path: '/api/v1/ingest', method: 'POST', headers: { 'x-api-key': SLOW_KEY, 'x-p-stream': 'slow_ds', 'content-type': 'application/json', 'content-length': declared } });
      let closed = false;
      req.on('error', () => {});
      req.on('close', () => (closed = true));
      req.on('response', (res) => res.resume());
      req.write('[');
      // One byte a second, as an attacker holding connections would.
      const trickle = setInterval(() => (closed ? clearInterval(trickle) : req.write(' ')), 1000);
      return { req, isClosed: () => closed, stop: () => clearInterval(trickle) };
    });
    try {
      await waitFor('the seven are admitted', async () => (await metric('lakehouse_ingest_inflight_bytes')) > 0 && (await metric('lakehouse_ingest_waiting')) === 0);
      // Each holds what it sent (one reservation step), not the 10 MiB it declared.
      expect(await metric('lakehouse_ingest_inflight_bytes')).toBeLessThanOrEqual(7 * 64 * 1024);
      const events = JSON.stringify(Array.from({ length: 5000 }, (_, i) => ({ i, pad: 'x'.repeat(200) })));
      const res = await server.request('/api/v1/ingest', { method: 'POST', body: events, headers: { 'content-type': 'application/json', 'X-P-Stream': 'slow_other' } });
      expect(res.status, await res.clone().text()).toBe(200);
      expect(await res.json()).toMatchObject({ count: 5000 });
      // The slow ones were still open while that was stored (the grace is far longer than one request).
      expect(slow.filter((s) => s.isClosed())).toHaveLength(0);
      // After the grace, each is cut: its connection closed, its reservation given back, nothing stored.
      await waitFor('the slow connections are closed by the server', async () => slow.every((s) => s.isClosed()), (GRACE_S + 45) * 1000);
      await waitFor('every reservation is given back', async () => (await metric('lakehouse_ingest_inflight_bytes')) === 0);
      const list = (await (await server.request('/api/v1/logstream')).json()) as { name: string }[];
      expect(list.map((d) => d.name)).not.toContain('slow_ds');
    } finally {
      for (const s of slow) {
        s.stop();
        s.req.destroy();
      }
    }
  }, 120_000);
});
