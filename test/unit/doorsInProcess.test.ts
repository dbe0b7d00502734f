import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { DomainError, type ErrorKind } from '../../src/errors.ts';
import { createApp } from '../../src/doors/http/app.ts';
import { ApiKeys } from '../../src/doors/shared/auth.ts';
import { ConnectionBudget } from '../../src/doors/shared/connections.ts';
import type { Services } from '../../src/doors/shared/context.ts';
import { STATUS } from '../../src/doors/shared/httpStatus.ts';
import { esStatus } from '../../src/doors/es/errors.ts';
import { RecordingIngest } from '../../src/ingest/fake.ts';
import type { Ingest } from '../../src/ingest/service.ts';
import type { SqlQueries } from '../../src/query/sql/queries.ts';
import { RecordingQueries } from '../../src/query/sql/fake.ts';
import { tempDir } from '../helpers/server.ts';

/**
 * The ingest doors and the SQL query route in process (test/README.md "Where a test goes"): the HTTP app
 * via `app.request()` with RecordingIngest and RecordingQueries in place of the services. Each case:
 * request in → what the service got (dataset, format, headers, decoded groups; statement, window,
 * caller) and the answer per error kind the service throws.
 * The expected statuses come from each door's own kind → status map, not from literals here.
 */
describe('HTTP doors in process', async () => {
  const dir = await tempDir('doors-');
  const keys = await ApiKeys.load('w:writer,r:reader,only:writer:other,ronly:reader:other', dir);
  const fake = new RecordingIngest();
  const ingest: Ingest = fake;
  const sql = new RecordingQueries();
  const queries: SqlQueries = sql;
  const storage = { store: { list: async () => [] }, resolve: async () => undefined };
  const connections = new ConnectionBudget({ maxConnections: 64, headersTimeoutMs: 10_000 });
  const services = { config: loadConfig({ P_DATA_DIR: dir }), keys, connections, storage, ingest, queries, isReady: async () => ({ ready: true }) } as unknown as Services;
  const app = createApp(services);
  const post = (path: string, body: string, headers: Record<string, string> = {}) =>
    app.request(path, { method: 'POST', body, headers: { 'X-API-Key': 'w', ...headers } });

  const jsonBody = JSON.stringify([{ msg: 'hello' }]);
  const routes: { name: string; path: string; headers: Record<string, string>; dataset: string | undefined; format: unknown }[] = [
    { name: 'logstream', path: '/api/v1/logstream/app', headers: {}, dataset: 'app', format: { kind: 'json', existingOnly: true } },
    { name: 'ingest', path: '/api/v1/ingest', headers: { 'X-P-Stream': 'app' }, dataset: 'app', format: { kind: 'json', existingOnly: false } },
    { name: 'otlp logs', path: '/v1/logs', headers: { 'content-type': 'application/json', 'X-P-Stream': 'ol' }, dataset: 'ol', format: { kind: 'otlp', signal: 'logs', format: 'json' } },
    { name: 'otlp traces, no stream', path: '/v1/traces', headers: { 'content-type': 'application/x-protobuf' }, dataset: undefined, format: { kind: 'otlp', signal: 'traces', format: 'protobuf' } },
  ];
  it.each(routes)('$name hands the service dataset, format, headers and body', async ({ path, headers, dataset, format }) => {
    fake.script = {};
    const res = await post(path, jsonBody, { 'X-P-Meta-Team': 'a', ...headers });
    expect(res.status).toBe(200);
    const got = fake.last();
    expect(got).toMatchObject({ call: 'ingest', dataset, format });
    expect(got.body.toString()).toBe(jsonBody);
    expect(got.headers.get('x-p-meta-team')).toBe('a');
    expect(got.rights).toMatchObject({ ingest: true });
  });

  const kinds: ErrorKind[] = ['invalid', 'forbidden', 'not_found', 'too_large', 'unsupported', 'too_many_requests', 'storage', 'unavailable'];
  it.each(kinds)('JSON ingest: a %s from the service is its status with the message', async (kind) => {
    fake.script = { throws: new DomainError(kind, `the ${kind} message`, 2.5) };
    const res = await post('/api/v1/ingest', jsonBody, { 'X-P-Stream': 'app' });
    expect(res.status).toBe(STATUS[kind]);
    expect(await res.json()).toEqual({ error: `the ${kind} message` });
    if (kind === 'too_many_requests' || kind === 'unavailable') expect(res.headers.get('retry-after')).toBe('3');
  });

  it.each(kinds)('Elasticsearch _bulk: a %s of one dataset fails its items only', async (kind) => {
    fake.script = { groupErrors: { bad: new DomainError(kind, `the ${kind} message`) } };
    const bulk = ['{"index":{"_index":"good"}}', '{"a":1}', '{"create":{"_index":"bad"}}', '{"b":2}', ''].join('\n');
    const res = await post('/es/_bulk', bulk, { 'content-type': 'application/x-ndjson' });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-elastic-product')).toBe('Elasticsearch');
    const out = (await res.json()) as { errors: boolean; items: Record<string, { status: number; error?: { reason: string } }>[] };
    expect(out.errors).toBe(true);
    expect(out.items[0].index.status).toBe(201);
    expect(out.items[1].create).toMatchObject({ status: esStatus(new DomainError(kind, '')), error: { reason: `the ${kind} message` } });
    expect(fake.last().groups?.map((g) => [g.dataset, g.events.map((e) => Object.keys(JSON.parse(e) as object))])).toEqual([
      ['good', [expect.arrayContaining(['a'])]],
      ['bad', [expect.arrayContaining(['b'])]],
    ]);
  });

  it.each(kinds)('Loki push: a %s from the service is its status as text', async (kind) => {
    fake.script = { groupErrors: { logs1: new DomainError(kind, `the ${kind} message`) } };
    const push = JSON.stringify({ streams: [{ stream: { job: 'x' }, values: [[String(Date.now() * 1e6), 'line one']] }] });
    const res = await post('/loki/api/v1/push', push, { 'content-type': 'application/json', 'X-P-Stream': 'logs1' });
    expect(res.status).toBe(STATUS[kind]);
    expect(await res.text()).toBe(`the ${kind} message\n`);
    expect(fake.last().groups?.map((g) => [g.dataset, g.events.length])).toEqual([['logs1', 1]]);
  });

  it('Loki push stored is 204 into the X-P-Stream dataset', async () => {
    fake.script = {};
    const push = JSON.stringify({ streams: [{ stream: { job: 'x' }, values: [[String(Date.now() * 1e6), 'a'], [String(Date.now() * 1e6), 'b']] }] });
    const res = await post('/loki/api/v1/push', push, { 'content-type': 'application/json', 'X-P-Stream': 'logs1' });
    expect(res.status).toBe(204);
    expect(fake.last().groups?.map((g) => [g.dataset, g.events.length])).toEqual([['logs1', 2]]);
  });

  it('HEC: events go to their index or the X-P-Stream dataset; the Splunk key scheme authenticates', async () => {
    fake.script = {};
    const body = '{"event":"one","index":"idx"}{"event":"two"}';
    const res = await app.request('/services/collector/event', { method: 'POST', body, headers: { Authorization: 'Splunk w', 'X-P-Stream': 'h' } });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ text: 'Success', code: 0 });
    expect(fake.last().groups?.map((g) => [g.dataset, g.events.length]).sort()).toEqual([['h', 1], ['idx', 1]]);
  });

  it.each(kinds)('HEC: a %s of a group is the whole answer, in Splunk shape', async (kind) => {
    fake.script = { groupErrors: { h: new DomainError(kind, `the ${kind} message`) } };
    const res = await app.request('/services/collector/event', { method: 'POST', body: '{"event":"one"}', headers: { Authorization: 'Splunk w', 'X-P-Stream': 'h' } });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(await res.json()).toMatchObject({ text: `the ${kind} message`, code: expect.any(Number) });
  });

  const auth: { name: string; path: string; headers: Record<string, string>; status: number }[] = [
    { name: 'JSON, no key', path: '/api/v1/ingest', headers: { 'X-API-Key': '' }, status: 401 },
    { name: 'JSON, wrong key', path: '/api/v1/ingest', headers: { 'X-API-Key': 'nope' }, status: 401 },
    { name: 'JSON, reader key', path: '/api/v1/ingest', headers: { 'X-API-Key': 'r' }, status: 403 },
    { name: 'JSON, key of another dataset', path: '/api/v1/logstream/app', headers: { 'X-API-Key': 'only' }, status: 403 },
    { name: 'OTLP, reader key', path: '/v1/logs', headers: { 'X-API-Key': 'r', 'content-type': 'application/json' }, status: 403 },
    { name: 'ES, wrong key', path: '/es/_bulk', headers: { 'X-API-Key': 'nope' }, status: 401 },
    { name: 'Loki, no key', path: '/loki/api/v1/push', headers: { 'X-API-Key': '' }, status: 401 },
    { name: 'HEC, wrong Splunk key', path: '/services/collector/event', headers: { 'X-API-Key': '', Authorization: 'Splunk nope' }, status: 401 },
  ];
  it.each(auth)('$name → $status, and the service is not called', async ({ path, headers, status }) => {
    fake.script = {};
    const before = fake.calls.length;
    const res = await post(path, '{}', { 'X-P-Stream': 'app', ...headers });
    expect(res.status).toBe(status);
    expect(fake.calls.length).toBe(before);
  });

  const query = (body: unknown, key = 'r', qs = '') =>
    app.request(`/api/v1/query${qs}`, { method: 'POST', body: JSON.stringify(body), headers: { 'X-API-Key': key, 'content-type': 'application/json' } });
  const rows = [{ a: 1, b: 'x' }, { a: 2, b: null }];
  const window = { startTime: '2026-01-01T00:00:00Z', endTime: '2026-01-01T01:00:00Z' };

  it('SQL query: the executor gets the statement, window and caller; the answer is its rows as a JSON array', async () => {
    sql.script = { fields: ['a', 'b'], rows };
    const res = await query({ query: 'select a, b from app', ...window });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual(rows);
    const got = sql.calls.at(-1);
    expect(got).toMatchObject({ sql: 'select a, b from app', startMs: Date.parse(window.startTime), endMs: Date.parse(window.endTime), streaming: false, sendNull: false });
    expect(got?.principalId).toBeTruthy();
  });

  it('SQL query: a key limited to one dataset is told so by canRead', async () => {
    sql.script = { fields: [], rows: [] };
    const before = sql.calls.length;
    expect((await query({ query: 'select 1', ...window }, 'ronly')).status).toBe(200);
    expect(sql.calls.length).toBe(before + 1);
    const got = sql.calls.at(-1);
    expect([got?.canRead('other'), got?.canRead('app')]).toEqual([true, false]);
  });

  it('SQL query: fields=true wraps the rows; streaming is NDJSON with the error as the last line', async () => {
    sql.script = { fields: ['a', 'b'], rows };
    const wrapped = await query({ query: 'select 1', ...window, fields: true });
    expect(await wrapped.json()).toEqual({ fields: ['a', 'b'], records: rows });
    sql.script = { fields: ['a', 'b'], rows, throws: new DomainError('timeout', 'cut off'), failAfter: 1 };
    const streamed = await query({ query: 'select 1', ...window, streaming: true, fields: true });
    expect(streamed.headers.get('content-type')).toContain('application/x-ndjson');
    const lines = (await streamed.text()).trim().split('\n').map((l) => JSON.parse(l) as unknown);
    expect(lines).toEqual([{ fields: ['a', 'b'] }, [rows[0]], { error: 'cut off' }]);
  });

  it.each(kinds)('SQL query: a %s before the columns is its status', async (kind) => {
    sql.script = { throws: new DomainError(kind, `the ${kind} message`, 2.5) };
    const res = await query({ query: 'select 1', ...window });
    expect(res.status).toBe(STATUS[kind]);
    expect(await res.json()).toEqual({ error: `the ${kind} message` });
  });

  it.each([
    { name: 'writer key', body: { query: 'select 1', ...window }, key: 'w', status: 403 },
    { name: 'start after end', body: { query: 'select 1', startTime: window.endTime, endTime: window.startTime }, key: 'r', status: 400 },
    { name: 'empty query', body: { query: '', ...window }, key: 'r', status: 400 },
  ])('SQL query: $name → $status, and the executor is not called', async ({ body, key, status }) => {
    const before = sql.calls.length;
    const res = await query(body, key);
    expect(res.status).toBe(status);
    expect(sql.calls.length).toBe(before);
  });
});
