import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { listFiles } from './helpers/files.ts';
import { query, startServer, type TestServer } from './helpers/server.ts';
import { waitFor } from './helpers/wait.ts';

type Quarantined = { key: string; kind: string; reason: string };
type Stats = { wal: { count: number }; storage: { files: number }; quarantined: Quarantined[] };

/**
 * Damaged stored objects of every kind: a damaged object is set aside and reported, the rest of its
 * dataset stays readable, and no other dataset (nor the service) is affected.
 */
describe('damaged stored objects', () => {
  const servers: TestServer[] = [];
  // A test's servers go with it, so idle ones (flushing, compacting, refreshing) do not slow later tests.
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.kill();
  });
  const start = async (dataDir: string | undefined, env: Record<string, string>) => {
    const s = await startServer({ dataDir, env: { P_CATALOG_REFRESH: '300ms', ...env } });
    servers.push(s);
    return s;
  };
  const stats = async (s: TestServer, name: string) => (await (await s.request(`/api/v1/logstream/${name}/stats`)).json()) as Stats;
  const post = async (s: TestServer, name: string, rows: Record<string, unknown>[]) =>
    expect((await s.request(`/api/v1/logstream/${name}`, { method: 'POST', json: rows })).status).toBe(200);
  const rows = (b: number, n = 10) => Array.from({ length: n }, (_, i) => ({ id: b * 100 + i, batch: b, msg: `row ${i} of batch ${b}` }));

  it('truncated manifest, metadata and schema objects, truncated and deleted Parquet files, random bytes and a NUL hole in WAL segments', async () => {
    // Phase 1: five flushed batches in "hurt" (one Parquet file and one manifest each), one in "good",
    // one in "lost" (whose metadata gets damaged).
    let s = await start(undefined, { P_FLUSH_INTERVAL: '200ms' });
    const dataDir = s.dataDir;
    for (const name of ['hurt', 'good', 'lost', 'walhurt']) expect((await s.request(`/api/v1/logstream/${name}`, { method: 'PUT' })).status).toBe(200);
    for (let b = 0; b < 5; b++) {
      await post(s, 'hurt', rows(b));
      await waitFor('flushed', async () => (await stats(s, 'hurt')).wal.count === 0);
    }
    await post(s, 'good', rows(9));
    await post(s, 'lost', rows(9));
    await waitFor('flushed', async () => (await stats(s, 'good')).wal.count === 0 && (await stats(s, 'lost')).wal.count === 0);
    await s.stop();

    // Phase 2: rows acknowledged into "walhurt" and never flushed (kill -9).
    s = await start(dataDir, { P_FLUSH_INTERVAL: '1h' });
    for (let b = 0; b < 4; b++) await post(s, 'walhurt', rows(b, 50));
    await s.kill();

    // The damage.
    const store = path.join(dataDir, 'store');
    const truncate = async (file: string) => fs.truncate(file, Math.floor((await fs.stat(file)).size / 2));
    const manifests = await listFiles(path.join(store, 'hurt', '.manifests'), '.json');
    expect(manifests.length).toBe(5);
    await truncate(manifests[0]); // batch 0's files drop out of the catalog
    const parquet = async (b: number) => {
      const m = JSON.parse(await fs.readFile(manifests[b], 'utf8')) as { add: { key: string }[] };
      return path.join(store, ...m.add[0].key.split('/'));
    };
    await truncate(await parquet(1));
    await fs.rm(await parquet(2));
    const [schemaObject] = await listFiles(path.join(store, 'hurt', '.schema'), '.json');
    await truncate(schemaObject);
    await truncate(path.join(store, '.streams', 'lost.json'));
    const [segment] = await listFiles(path.join(dataDir, 'wal', 'walhurt'), '.ndjson');
    const handle = await fs.open(segment, 'r+');
    const size = (await handle.stat()).size;
    await handle.write(randomBytes(100), 0, 100, Math.floor(size / 3));
    await handle.write(Buffer.alloc(300), 0, 300, Math.floor((2 * size) / 3));
    await handle.close();

    // Phase 3: the service starts and serves everything that is not damaged.
    s = await start(dataDir, { P_FLUSH_INTERVAL: '300ms' });
    expect(await query(s, 'SELECT count(*) AS n FROM good')).toEqual([{ n: 10 }]);
    const hurt = await query(s, 'SELECT DISTINCT batch FROM hurt ORDER BY batch');
    expect(hurt).toEqual([{ batch: 3 }, { batch: 4 }]);
    expect(await query(s, 'SELECT count(*) AS n, count(DISTINCT id) AS d FROM hurt')).toEqual([{ n: 20, d: 20 }]);
    const hurtStats = await stats(s, 'hurt');
    const key = (file: string) => path.relative(store, file).split(path.sep).join('/');
    const quarantinedKeys = hurtStats.quarantined.map((q) => q.key);
    expect(quarantinedKeys).toEqual(expect.arrayContaining([key(manifests[0]), key(schemaObject)]));
    expect(hurtStats.quarantined.filter((q) => q.kind === 'parquet').length).toBe(2);
    // The dataset with damaged metadata is not served, and nothing else is affected.
    expect((await s.request('/api/v1/logstream/lost/stats')).status).toBe(404);

    // The damaged WAL segment is cut to its readable lines, flushed, and the rest set aside.
    await waitFor('walhurt flushed', async () => (await stats(s, 'walhurt')).wal.count === 0, 30_000);
    const [wal] = await query(s, 'SELECT count(*) AS n, count(DISTINCT id) AS d, min(id) AS lo, max(id) AS hi FROM walhurt');
    expect(wal.n).toBe(wal.d);
    expect(Number(wal.n)).toBeGreaterThanOrEqual(200 - 8);
    expect(Number(wal.n)).toBeLessThan(200);
    const walStats = await stats(s, 'walhurt');
    expect(walStats.quarantined.some((q) => q.kind === 'wal')).toBe(true);
    expect((await listFiles(path.join(dataDir, 'quarantine'), '')).length).toBeGreaterThan(0);

    // Readiness: ready (damaged objects do not take a worker out), details only with a key.
    const probe = await fetch(`${s.url}/api/v1/readiness`);
    expect(probe.status).toBe(200);
    expect(await probe.json()).toEqual({ ready: true });
    const detailed = (await (await s.request('/api/v1/readiness')).json()) as { ready: boolean; quarantined: Quarantined[] };
    expect(detailed.ready).toBe(true);
    expect(detailed.quarantined.map((q) => q.key)).toEqual(expect.arrayContaining([key(manifests[0]), '.streams/lost.json']));

    // An operator restores the metadata object: the dataset is served again, without a restart.
    await fs.writeFile(
      path.join(store, '.streams', 'lost.json'),
      JSON.stringify({ version: 1, name: 'lost', generation: path.basename((await fs.readdir(path.join(store, 'lost', '.manifests')))[0]), kind: 'json', timeColumn: 'p_timestamp', createdAt: new Date().toISOString() }),
    );
    await waitFor('lost is back', async () => (await s.request('/api/v1/logstream/lost/stats')).status === 200);
    expect(await query(s, 'SELECT count(*) AS n FROM lost')).toEqual([{ n: 10 }]);
  }, 120_000);
});

describe('health probes', () => {
  let server: TestServer;
  afterAll(async () => {
    await server?.kill();
  });

  it('liveness and readiness answer GET and HEAD without a key; readiness details need a valid key', async () => {
    server = await startServer();
    for (const p of ['/api/v1/liveness', '/api/v1/readiness']) {
      expect((await fetch(`${server.url}${p}`)).status).toBe(200);
      const head = await fetch(`${server.url}${p}`, { method: 'HEAD' });
      expect(head.status).toBe(200);
      expect(await head.text()).toBe('');
    }
    expect(await (await fetch(`${server.url}/api/v1/readiness`)).json()).toEqual({ ready: true });
    expect(await (await fetch(`${server.url}/api/v1/readiness`, { headers: { 'X-API-Key': 'wrong' } })).json()).toEqual({ ready: true });
    const keyed = (await (await server.request('/api/v1/readiness')).json()) as Record<string, unknown>;
    expect(keyed).toMatchObject({ ready: true, storage: 'reachable', quarantined: [] });
    // Everything else still needs a key.
    expect((await fetch(`${server.url}/api/v1/logstream`)).status).toBe(401);
  });
});

describe('a metadata object that names another dataset', () => {
  let server: TestServer | undefined;
  afterAll(async () => {
    await server?.kill();
  });

  it('is set aside as damaged at start-up; the service and the named dataset are served', async () => {
    server = await startServer();
    expect((await server.request('/api/v1/logstream/orig', { method: 'PUT' })).status).toBe(200);
    expect((await server.request('/api/v1/logstream/orig', { method: 'POST', json: [{ a: 1 }] })).status).toBe(200);
    await server.stop();
    // A copy under another name (an operator's backup, a rename by hand).
    const streams = path.join(server.dataDir, 'store', '.streams');
    await fs.copyFile(path.join(streams, 'orig.json'), path.join(streams, 'copy.json'));

    server = await startServer({ dataDir: server.dataDir });
    expect(await query(server, 'SELECT count(*) AS n FROM orig')).toEqual([{ n: 1 }]);
    expect((await server.request('/api/v1/logstream/copy/stats')).status).toBe(404);
    const detailed = (await (await server.request('/api/v1/readiness')).json()) as { ready: boolean; quarantined: Quarantined[] };
    expect(detailed.ready).toBe(true);
    expect(detailed.quarantined).toEqual([expect.objectContaining({ key: '.streams/copy.json', kind: 'metadata', reason: expect.stringMatching(/names dataset "orig"/) })]);
  });
});
