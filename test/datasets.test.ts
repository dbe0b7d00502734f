import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { query, startServer, type TestServer } from './helpers/server.ts';
import { listFiles } from './helpers/files.ts';

interface DatasetInfo {
  name: string;
  kind: string;
  created_at: string;
}
interface CreateResponse extends DatasetInfo {
  message: string;
}
interface SchemaResponse {
  name: string;
  kind: string;
  time_column: string;
  fields: { name: string; data_type: unknown; nullable: boolean; dict_id: number; dict_is_ordered: boolean; metadata: Record<string, string> }[];
  metadata: Record<string, string>;
}
interface Stats {
  stream: string;
  ingestion: { count: number; size: number; format: string; lifetime_count: number; lifetime_size: number; deleted_count: number; deleted_size: number };
  storage: { size: number; format: string; files: number; lifetime_size: number; deleted_size: number };
  wal: { count: number; size: number; segments: number };
}

/** An Arrow field as arrow-rs serialises it (what Parseable's schema endpoint returns). */
const arrowField = (name: string, data_type: unknown) => ({ name, data_type, nullable: true, dict_id: 0, dict_is_ordered: false, metadata: {} });
/** Ingestion stats with nothing deleted yet: lifetime equals current. */
const ingestion = (count: number, size: number) => ({ count, size, format: 'json', lifetime_count: count, lifetime_size: size, deleted_count: 0, deleted_size: 0 });

// Data stays in the WAL until a graceful stop flushes it, so the stats before and after are predictable.
const ENV = { P_FLUSH_INTERVAL: '1h' };

async function body<T>(res: Response): Promise<T> {
  return JSON.parse(await res.text()) as T;
}

async function put(server: TestServer, name: string): Promise<Response> {
  return server.request(`/api/v1/logstream/${name}`, { method: 'PUT' });
}

/** Sends a raw JSON text (so the byte count is exact) and expects 200. */
async function ingestText(server: TestServer, name: string, text: string): Promise<void> {
  const res = await server.request(`/api/v1/logstream/${name}`, { method: 'POST', body: text, headers: { 'content-type': 'application/json' } });
  expect(res.status, await res.clone().text()).toBe(200);
}

/** Every file (not directory) below `dir`; [] when `dir` does not exist. */
const filesUnder = (dir: string) => listFiles(dir, '');

describe('datasets', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({ env: ENV });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('PUT creates a dataset (200, as Parseable answers), a second PUT is idempotent (200, "already exists"), and the list is sorted by name', async () => {
    const first = await put(server, 'web');
    expect(first.status).toBe(200);
    const created = await body<CreateResponse>(first);
    expect(created.name).toBe('web');
    expect(created.kind).toBe('json');
    expect(typeof created.message).toBe('string');
    expect(created.message).not.toMatch(/already exists/);
    expect(new Date(created.created_at).toISOString()).toBe(created.created_at);
    expect(Math.abs(Date.parse(created.created_at) - Date.now())).toBeLessThan(60_000);

    const second = await put(server, 'web');
    expect(second.status).toBe(200);
    const again = await body<CreateResponse>(second);
    expect(again.message).toMatch(/already exists/);
    expect(again).toMatchObject({ name: 'web', kind: 'json', created_at: created.created_at });

    for (const name of ['zeta', 'apps', 'mid']) expect((await put(server, name)).status).toBe(200);
    const listRes = await server.request('/api/v1/logstream');
    expect(listRes.status).toBe(200);
    const list = await body<DatasetInfo[]>(listRes);
    expect(list.map((d) => d.name)).toEqual(['apps', 'mid', 'web', 'zeta']);
    expect(list.find((d) => d.name === 'web')).toEqual({ name: 'web', kind: 'json', created_at: created.created_at });
    for (const d of list) {
      expect(Object.keys(d).sort()).toEqual(['created_at', 'kind', 'name']);
      expect(d.kind).toBe('json');
    }
  });

  it('rejects invalid names with 400 and a message naming the rule', async () => {
    const cases: [string, RegExp][] = [
      ['%20%20%20', /start with a letter/],
      ['a'.repeat(65), /at most 64 characters/],
      ['1logs', /start with a letter/],
      ['9', /start with a letter/],
      ['my.logs', /only letters, digits/],
      ['my%20logs', /only letters, digits/],
      ['my%2Flogs', /only letters, digits/],
      ['select', /reserved SQL keyword/],
      ['from', /reserved SQL keyword/],
      ['order', /reserved SQL keyword/],
      ['SELECT', /reserved SQL keyword/],
      ['p_logs', /"p_"/],
      ['P_Logs', /"p_"/],
    ];
    for (const [name, rule] of cases) {
      const res = await put(server, name);
      const text = await res.text();
      expect(res.status, `${name}: ${text}`).toBe(400);
      const err = JSON.parse(text) as { error: string };
      expect(err.error, name).toMatch(rule);
    }
    // The longest allowed name (64) is fine.
    expect((await put(server, 'b'.repeat(64))).status).toBe(200);
    const list = await body<DatasetInfo[]>(await server.request('/api/v1/logstream'));
    expect(list.map((d) => d.name)).toEqual(['apps', 'b'.repeat(64), 'mid', 'web', 'zeta']);
  });

  it('a name differing only in letter case from an existing dataset is a 409', async () => {
    expect((await put(server, 'CaseTest')).status).toBe(200);
    for (const other of ['casetest', 'CASETEST', 'caseTest']) {
      const res = await put(server, other);
      expect(res.status, other).toBe(409);
      expect((await body<{ error: string }>(res)).error).toMatch(/CaseTest/);
    }
    expect((await put(server, 'CaseTest')).status).toBe(200);
    const list = await body<DatasetInfo[]>(await server.request('/api/v1/logstream'));
    expect(list.filter((d) => d.name.toLowerCase() === 'casetest').map((d) => d.name)).toEqual(['CaseTest']);
  });

  it('GET schema reflects the ingested fields as an Arrow schema', async () => {
    expect((await put(server, 'typed')).status).toBe(200);
    const empty = await body<SchemaResponse>(await server.request('/api/v1/logstream/typed/schema'));
    expect(empty).toEqual({ name: 'typed', kind: 'json', time_column: 'p_timestamp', fields: [], metadata: {} });

    await ingestText(server, 'typed', JSON.stringify({ s: 'x', i: 5, f: 1.5, b: true, nested: { k: 'v' }, arr: [1, 'two'], nothing: null }));
    const res = await server.request('/api/v1/logstream/typed/schema');
    expect(res.status).toBe(200);
    const schema = await body<SchemaResponse>(res);
    expect(schema.name).toBe('typed');
    expect(schema.kind).toBe('json');
    expect(schema.time_column).toBe('p_timestamp');
    expect([...schema.fields].sort((a, b) => (a.name < b.name ? -1 : 1))).toEqual([
      arrowField('arr', 'Utf8'),
      arrowField('b', 'Boolean'),
      arrowField('f', 'Float64'),
      arrowField('i', 'Int64'),
      arrowField('nested_k', 'Utf8'),
      arrowField('p_src_ip', 'Utf8'),
      arrowField('p_timestamp', { Timestamp: ['Millisecond', null] }),
      arrowField('p_user_agent', 'Utf8'),
      arrowField('s', 'Utf8'),
    ]);
    expect(schema.metadata).toEqual({});

    const missing = await server.request('/api/v1/logstream/nosuch/schema');
    expect(missing.status).toBe(404);
    expect((await body<{ error: string }>(missing)).error).toMatch(/nosuch/);
  });

  it('stats count events and request bytes, and survive a graceful restart', async () => {
    expect((await put(server, 'metrics')).status).toBe(200);
    const fresh = await body<Stats>(await server.request('/api/v1/logstream/metrics/stats'));
    expect(fresh).toMatchObject({
      stream: 'metrics',
      ingestion: ingestion(0, 0),
      storage: { size: 0, format: 'parquet', files: 0, lifetime_size: 0, deleted_size: 0 },
      wal: { count: 0, size: 0, segments: 0 },
    });

    const bodies = [
      JSON.stringify({ value: 1, unit: 'ms' }),
      JSON.stringify([{ value: 2, unit: 'ms' }, { value: 3, unit: 'µs' }, { value: 4, note: 'café ☕' }]),
      `[ {"value": 5},\n  {"value": 6} ]`,
    ];
    for (const b of bodies) await ingestText(server, 'metrics', b);
    const bytes = bodies.reduce((sum, b) => sum + Buffer.byteLength(b), 0);
    expect(bytes).toBeGreaterThan(bodies.reduce((sum, b) => sum + b.length, 0)); // multi-byte characters counted as bytes

    const res = await server.request('/api/v1/logstream/metrics/stats');
    expect(res.status).toBe(200);
    const before = await body<Stats>(res);
    expect(before.stream).toBe('metrics');
    expect(before.ingestion).toEqual(ingestion(6, bytes));
    expect(before.storage).toEqual({ size: 0, format: 'parquet', files: 0, lifetime_size: 0, deleted_size: 0 });
    expect(before.wal.count).toBe(6);
    expect(before.wal.size).toBeGreaterThan(0);
    expect(before.wal.segments).toBeGreaterThanOrEqual(1);

    await server.stop();
    server = await startServer({ dataDir: server.dataDir, env: ENV });

    const after = await body<Stats>(await server.request('/api/v1/logstream/metrics/stats'));
    expect(after.stream).toBe('metrics');
    expect(after.ingestion).toEqual(ingestion(6, bytes));
    expect(after.storage.format).toBe('parquet');
    expect(after.storage.size).toBeGreaterThan(0);
    expect(after.storage.lifetime_size).toBe(after.storage.size);
    expect(after.storage.deleted_size).toBe(0);
    expect(after.storage.files).toBeGreaterThanOrEqual(1);
    expect(after.wal).toEqual({ count: 0, size: 0, segments: 0 });
    expect(await query(server, 'SELECT count(*) AS n, sum(value) AS s FROM metrics')).toEqual([{ n: 6, s: 21 }]);
    // Datasets and their schemas survive the restart too.
    const list = await body<DatasetInfo[]>(await server.request('/api/v1/logstream'));
    expect(list.map((d) => d.name).sort()).toEqual(['apps', 'b'.repeat(64), 'CaseTest', 'metrics', 'mid', 'typed', 'web', 'zeta'].sort());
  });

  it('DELETE removes the dataset, its files and WAL; a new PUT starts empty with a fresh schema', async () => {
    // Rows in Parquet (flushed by the restart) and rows still in the WAL.
    await ingestText(server, 'metrics', JSON.stringify({ value: 7, unit: 's' }));
    const storeDir = path.join(server.dataDir, 'store', 'metrics');
    const walDir = path.join(server.dataDir, 'wal', 'metrics');
    expect((await filesUnder(storeDir)).filter((f) => f.endsWith('.parquet')).length).toBeGreaterThanOrEqual(1);
    expect((await filesUnder(walDir)).filter((f) => f.endsWith('.ndjson')).length).toBeGreaterThanOrEqual(1);

    const del = await server.request('/api/v1/logstream/metrics', { method: 'DELETE' });
    expect(del.status).toBe(200);
    expect(typeof (await body<{ message: string }>(del)).message).toBe('string');

    const schema = await server.request('/api/v1/logstream/metrics/schema');
    expect(schema.status).toBe(404);
    expect(typeof (await body<{ error: string }>(schema)).error).toBe('string');
    expect((await server.request('/api/v1/logstream/metrics/stats')).status).toBe(404);
    const q = await server.request('/api/v1/query', {
      method: 'POST',
      json: { query: 'SELECT count(*) FROM metrics', startTime: '1970-01-01T00:00:00Z', endTime: '2100-01-01T00:00:00Z' },
    });
    expect(q.status).toBe(404);
    expect((await body<{ error: string }>(q)).error).toMatch(/metrics/);
    const post = await server.request('/api/v1/logstream/metrics', { method: 'POST', json: { value: 8 } });
    expect(post.status).toBe(404);
    expect((await body<{ error: string }>(post)).error).toMatch(/metrics/);
    expect(await filesUnder(storeDir)).toEqual([]);
    expect(await filesUnder(walDir)).toEqual([]);
    const list = await body<DatasetInfo[]>(await server.request('/api/v1/logstream'));
    expect(list.map((d) => d.name)).not.toContain('metrics');

    const recreate = await put(server, 'metrics');
    expect(recreate.status).toBe(200);
    expect((await body<SchemaResponse>(await server.request('/api/v1/logstream/metrics/schema'))).fields).toEqual([]);
    await ingestText(server, 'metrics', JSON.stringify({ other: 'x' }));
    const fields = (await body<SchemaResponse>(await server.request('/api/v1/logstream/metrics/schema'))).fields;
    expect(fields.map((f) => f.name).sort()).toEqual(['other', 'p_src_ip', 'p_timestamp', 'p_user_agent']);
    expect(await query(server, 'SELECT count(*) AS n FROM metrics')).toEqual([{ n: 1 }]);
    const oldColumn = await server.request('/api/v1/query', {
      method: 'POST',
      json: { query: 'SELECT value FROM metrics', startTime: '1970-01-01T00:00:00Z', endTime: '2100-01-01T00:00:00Z' },
    });
    expect(oldColumn.status).toBe(400);
    const stats = await body<Stats>(await server.request('/api/v1/logstream/metrics/stats'));
    expect(stats.ingestion.count).toBe(1);
    expect(stats.storage).toEqual({ size: 0, format: 'parquet', files: 0, lifetime_size: 0, deleted_size: 0 });
  });

  it('a re-created dataset is empty: count(*) = 0 before anything is ingested', async () => {
    expect((await server.request('/api/v1/logstream/metrics', { method: 'DELETE' })).status).toBe(200);
    expect((await put(server, 'metrics')).status).toBe(200);
    expect((await body<SchemaResponse>(await server.request('/api/v1/logstream/metrics/schema'))).fields).toEqual([]);
    expect(await query(server, 'SELECT count(*) AS n FROM metrics')).toEqual([{ n: 0 }]);
  });

  it('deleting a missing dataset is a 404', async () => {
    const res = await server.request('/api/v1/logstream/neverexisted', { method: 'DELETE' });
    expect(res.status).toBe(404);
    expect((await body<{ error: string }>(res)).error).toMatch(/neverexisted/);
  });

  it('concurrent PUTs of names differing only in case create one dataset; the others are 409', async () => {
    const variants = ['Racer', 'racer', 'RACER'];
    const statuses = (await Promise.all(variants.map((n) => put(server, n)))).map((r) => r.status);
    expect([...statuses].sort()).toEqual([200, 409, 409]);
    const list = await body<DatasetInfo[]>(await server.request('/api/v1/logstream'));
    expect(list.filter((d) => d.name.toLowerCase() === 'racer').length).toBe(1);
  });
});
