import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError } from './helpers/assert.ts';
import { ADMIN_KEY, startServer, tempDir, type TestServer } from './helpers/server.ts';

/**
 * What no key (and no one without a key) can do to the service or learn from it (docs/security.md):
 * each case is an attack through the real process.
 */

const READER = 'reader-key-app-only-0123456789';
const as = (key: string) => ({ headers: { 'x-api-key': key } });

describe('saved filters are bounded', () => {
  let server: TestServer;
  let bigKey: string;
  const filter = (name: string, sql = 'select * from app') => ({ stream_name: 'app', filter_name: name, query: { filter_type: 'sql', filter_query: sql } });

  beforeAll(async () => {
    // A filter object far over the limit, saved before the limit existed: set aside at start-up.
    const dataDir = await tempDir();
    const dir = path.join(dataDir, 'store', '.filters');
    await fs.mkdir(dir, { recursive: true });
    bigKey = 'oversized-from-before';
    const big = { ...filter('huge', `select 1 -- ${'x'.repeat(2 * 1024 * 1024)}`), filter_id: bigKey, user_id: 'someone', version: 'v2' };
    await fs.writeFile(path.join(dir, `${bigKey}.json`), JSON.stringify(big));
    server = await startServer({ dataDir, env: { P_API_KEYS: `${ADMIN_KEY}:admin,${READER}:reader:app`, P_FILTERS_PER_KEY: '3' } });
  });
  afterAll(() => server?.stop());

  it('an object over the size limit found at start-up is moved aside, and the listing answers without it', async () => {
    const moved = path.join(server.dataDir, 'store', '.filters-set-aside', `${bigKey}.json`);
    const original = path.join(server.dataDir, 'store', '.filters', `${bigKey}.json`);
    const exists = (p: string) => fs.stat(p).then(() => true, () => false);
    const deadline = Date.now() + 30_000;
    while (!(await exists(moved)) || (await exists(original))) {
      if (Date.now() > deadline) throw new Error(`not set aside:\n${server.logs()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const res = await server.request('/api/v1/filters', as(READER));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual([]);
  });

  it('a filter over P_FILTER_MAX_BYTES is refused with 413, by POST and PUT', async () => {
    const huge = filter('huge', `select 1 -- ${'x'.repeat(300 * 1024)}`);
    await expectError(await server.request('/api/v1/filters', { method: 'POST', json: huge, ...as(READER) }), 413);
    const small = (await (await server.request('/api/v1/filters', { method: 'POST', json: filter('small'), ...as(READER) })).json()) as { filter_id: string };
    await expectError(await server.request(`/api/v1/filters/${small.filter_id}`, { method: 'PUT', json: huge, ...as(READER) }), 413);
    expect((await server.request(`/api/v1/filters/${small.filter_id}`, { method: 'DELETE', ...as(READER) })).status).toBe(200);
  });

  it('a key owns at most P_FILTERS_PER_KEY filters (409 past it, concurrent saves included); other keys are not affected', async () => {
    const saves = await Promise.all(
      Array.from({ length: 6 }, (_, i) => server.request('/api/v1/filters', { method: 'POST', json: filter(`f${i}`), ...as(READER) })),
    );
    const statuses = saves.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 200, 200, 409, 409, 409]);
    const listed = (await (await server.request('/api/v1/filters', as(READER))).json()) as { filter_name: string }[];
    expect(listed).toHaveLength(3);
    // The admin still saves; after a delete the reader saves again.
    expect((await server.request('/api/v1/filters', { method: 'POST', json: filter('admin') })).status).toBe(200);
    const mine = (await (await server.request('/api/v1/filters', as(READER))).json()) as { filter_id: string; filter_name: string }[];
    const own = mine.find((f) => f.filter_name !== 'admin')!;
    expect((await server.request(`/api/v1/filters/${own.filter_id}`, { method: 'DELETE', ...as(READER) })).status).toBe(200);
    expect((await server.request('/api/v1/filters', { method: 'POST', json: filter('again'), ...as(READER) })).status).toBe(200);
  });
});
