import * as path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterEach, describe, expect, it } from 'vitest';
import { listFiles } from './helpers/files.ts';
import { query, startServer, tempDir, type TestServer } from './helpers/server.ts';
import { otlpLogsJson } from './helpers/wire.ts';

/**
 * These tests wait for replaced and expired files to be deleted: Iceberg snapshots that still list them
 * expire after seconds here (the default keeps them 15 minutes, and the delete grace follows it).
 */
const SHORT_SNAPSHOTS = { P_ICEBERG_INTERVAL: '500ms', P_ICEBERG_SNAPSHOT_RETENTION: '1s' };
import { sleep, waitFor } from './helpers/wait.ts';

const parquetFiles = (dir: string) => listFiles(dir, '.parquet');

async function stats(server: TestServer, name: string) {
  return (await (await server.request(`/api/v1/logstream/${name}/stats`)).json()) as {
    ingestion: { count: number };
    storage: { files: number; size: number };
    wal: { count: number };
  };
}

describe('compaction and retention (local storage)', () => {
  const servers: TestServer[] = [];
  // A test's servers go with it, so idle ones (flushing, compacting, refreshing) do not slow later tests.
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.kill();
  });

  it('merges small files into one per hour while queries see every row exactly once', async () => {
    const dataDir = await tempDir();
    const env = { P_FLUSH_INTERVAL: '100ms', P_COMPACTION_INTERVAL: '1h', P_QUERY_TIMEOUT: '3s', P_CATALOG_REFRESH: '500ms', ...SHORT_SNAPSHOTS };
    let server = await startServer({ dataDir, env });
    servers.push(server);
    await server.request('/api/v1/logstream/c', { method: 'PUT' });
    let total = 0;
    for (let b = 0; b < 6; b++) {
      const events = Array.from({ length: 100 }, (_, i) => ({ b, i, msg: `batch ${b} event ${i}` }));
      expect((await server.request('/api/v1/logstream/c', { method: 'POST', json: events })).status).toBe(200);
      total += events.length;
      await waitFor('flush', async () => (await stats(server, 'c')).wal.count === 0);
    }
    const before = await stats(server, 'c');
    expect(before.storage.files).toBeGreaterThanOrEqual(6);
    await server.stop();

    // Restart with compaction on, and query continuously while it runs.
    server = await startServer({ dataDir, env: { ...env, P_COMPACTION_INTERVAL: '300ms' } });
    servers.push(server);
    let queries = 0;
    let done = false;
    const checker = (async () => {
      while (!done) {
        const rows = await query(server, 'SELECT count(*) AS n, count(DISTINCT b * 1000 + i) AS d FROM c');
        expect(rows).toEqual([{ n: total, d: total }]);
        queries++;
      }
    })();
    const after = await waitFor('compaction', async () => {
      const s = await stats(server, 'c');
      return s.storage.files < before.storage.files ? s : undefined;
    });
    await sleep(300);
    done = true;
    await checker;
    expect(queries).toBeGreaterThan(0);
    // Files of one hour become one file (the test may straddle an hour boundary: then two).
    expect(after.storage.files).toBeLessThanOrEqual(2);
    expect(after.ingestion.count).toBe(total);
    const merged = await parquetFiles(path.join(dataDir, 'store', 'c'));
    expect(merged.some((f) => f.endsWith('.compacted.parquet'))).toBe(true);
    // Old files are deleted after the grace period (2×timeout + 2×refresh + 5 s: 12 s here).
    await waitFor('old files deleted', async () => (await parquetFiles(path.join(dataDir, 'store', 'c'))).length === after.storage.files);
    expect(await query(server, 'SELECT count(*) AS n FROM c')).toEqual([{ n: total }]);
  });

  it('a merged file is in time order: files are joined as stored, only the rows where files overlap in time sorted', async () => {
    // OTel logs are timed by each record's own time, so a client decides how flushes line up in time.
    // Each batch's records are sent newest first, which the flush keeps: joining files as stored keeps
    // that order inside each file, sorting does not. A minute of the previous hour holds every record.
    const hour = Math.floor(Date.now() / 3_600_000) * 3_600_000 - 3_600_000;
    const batch = (fromSec: number, toSec: number) =>
      Array.from({ length: toSec - fromSec + 1 }, (_, i) => ({ timeMs: hour + (toSec - i) * 1000, body: `t${toSec - i}`, attributes: [] }));
    const cases: [string, [number, number][], number[]][] = [
      // [dataset, batches (seconds into the hour), expected seconds in the merged file's order]
      ['following', [[0, 4], [10, 14]], [4, 3, 2, 1, 0, 14, 13, 12, 11, 10]],
      // Only the window where the files overlap (5–9 s) is sorted; the rest of each file is kept as stored.
      ['overlapping', [[5, 9], [0, 14]], [4, 3, 2, 1, 0, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 14, 13, 12, 11, 10]],
      // The overlapping pair's window (3–4 s) is sorted; the file after the pair is joined as stored.
      ['partly', [[0, 4], [3, 6], [10, 14]], [2, 1, 0, 3, 3, 4, 4, 6, 5, 14, 13, 12, 11, 10]],
    ];
    const dataDir = await tempDir();
    const env = { P_FLUSH_INTERVAL: '100ms', P_COMPACTION_INTERVAL: '1h', P_QUERY_TIMEOUT: '3s', P_CATALOG_REFRESH: '500ms', ...SHORT_SNAPSHOTS };
    let server = await startServer({ dataDir, env });
    servers.push(server);
    for (const [name, batches] of cases) {
      for (const [from, to] of batches) {
        const res = await server.request('/v1/logs', { method: 'POST', body: otlpLogsJson(batch(from, to)), headers: { 'content-type': 'application/json', 'x-p-stream': name } });
        expect(res.status, await res.text()).toBe(200);
        await waitFor('flush', async () => (await stats(server, name)).wal.count === 0);
      }
      expect((await stats(server, name)).storage.files).toBe(batches.length);
    }
    await server.stop();
    server = await startServer({ dataDir, env: { ...env, P_COMPACTION_INTERVAL: '300ms' } });
    servers.push(server);
    const duck = await (await DuckDBInstance.create(':memory:', { threads: '1' })).connect();
    try {
      for (const [name, , expected] of cases) {
        await waitFor(`${name} compacted`, async () => (await stats(server, name)).storage.files === 1);
        const merged = (await parquetFiles(path.join(dataDir, 'store', name))).filter((f) => f.endsWith('.compacted.parquet'));
        expect(merged).toHaveLength(1);
        // One thread reads the file's rows in the order they are stored.
        const rows = (await duck.runAndReadAll(`SELECT epoch_ms(time_unix_nano) AS ms FROM read_parquet('${merged[0]}')`)).getRowObjectsJson();
        expect(rows.map((r) => (Number(r.ms) - hour) / 1000), name).toEqual(expected);
        expect(await query(server, `SELECT count(*) AS n FROM ${name}`, { startTime: new Date(hour).toISOString() })).toEqual([{ n: expected.length }]);
      }
    } finally {
      duck.closeSync();
    }
  });

  it('overlapping files of one hour that differ in columns merge, by column name (issue 36)', async () => {
    // The reproducer: three OTLP/JSON requests timed in one past hour; the second's records
    // carry an attribute `x` the others lack, and overlap the first's in time.
    const hour = Math.floor(Date.now() / 3_600_000) * 3_600_000 - 3_600_000;
    const t0 = hour + 60_000;
    const records = (from: number, to: number, x?: string) =>
      Array.from({ length: to - from + 1 }, (_, i) => ({
        timeMs: t0 + (from + i) * 1000,
        body: `s${from + i}`,
        attributes: x === undefined ? [] : [['x', { string: `${x}${from + i}` }] as [string, { string: string }]],
      }));
    const batches = [records(0, 9), records(5, 14, 'v'), records(20, 29)];
    const dataDir = await tempDir();
    const env = { P_FLUSH_INTERVAL: '100ms', P_COMPACTION_INTERVAL: '1h', P_QUERY_TIMEOUT: '3s', P_CATALOG_REFRESH: '500ms', ...SHORT_SNAPSHOTS };
    let server = await startServer({ dataDir, env });
    servers.push(server);
    for (const batch of batches) {
      const res = await server.request('/v1/logs', { method: 'POST', body: otlpLogsJson(batch), headers: { 'content-type': 'application/json', 'x-p-stream': 'cols' } });
      expect(res.status, await res.text()).toBe(200);
      await waitFor('flush', async () => (await stats(server, 'cols')).wal.count === 0);
    }
    expect((await stats(server, 'cols')).storage.files).toBe(3);
    const sql = `SELECT body, x FROM cols ORDER BY body, x`;
    const range = { startTime: new Date(hour).toISOString() };
    const before = await query(server, sql, range);
    // Independent of the service: what was sent, row by row.
    const sent = batches.flat().map((r) => ({ body: r.body, x: r.attributes[0]?.[1].string ?? null }));
    // As the SQL orders them: by body, then x with NULL last.
    const key = (r: { body: string; x: string | null }) => `${r.body}\u0000${r.x === null ? '\uffff' : r.x}`;
    const byBodyX = (a: { body: string; x: string | null }, b: { body: string; x: string | null }) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0);
    expect(before).toEqual(sent.sort(byBodyX));
    await server.stop();

    server = await startServer({ dataDir, env: { ...env, P_COMPACTION_INTERVAL: '300ms' } });
    servers.push(server);
    await waitFor('the hour compacted', async () => (await stats(server, 'cols')).storage.files === 1);
    expect(await query(server, sql, range)).toEqual(before);
  });

  it('compaction survives kill -9 at any moment with no loss and no duplicates', async () => {
    const dataDir = await tempDir();
    const env = { P_FLUSH_INTERVAL: '50ms', P_COMPACTION_INTERVAL: '100ms', P_QUERY_TIMEOUT: '3s', P_CATALOG_REFRESH: '200ms', ...SHORT_SNAPSHOTS };
    let server = await startServer({ dataDir, env });
    servers.push(server);
    await server.request('/api/v1/logstream/k', { method: 'PUT' });
    let total = 0;
    for (let round = 0; round < 4; round++) {
      for (let b = 0; b < 5; b++) {
        const events = Array.from({ length: 50 }, (_, i) => ({ round, b, i }));
        expect((await server.request('/api/v1/logstream/k', { method: 'POST', json: events })).status).toBe(200);
        total += events.length;
        await sleep(60);
      }
      await sleep(50 + round * 70);
      await server.kill();
      server = await startServer({ dataDir, env });
      servers.push(server);
      const rows = await query(server, 'SELECT count(*) AS n, count(DISTINCT round * 100000 + b * 1000 + i) AS d FROM k');
      expect(rows).toEqual([{ n: total, d: total }]);
    }
  });

  it('retention removes files older than the limit', async () => {
    const server = await startServer({ env: { P_FLUSH_INTERVAL: '100ms', P_COMPACTION_INTERVAL: '300ms', P_QUERY_TIMEOUT: '3s', P_CATALOG_REFRESH: '500ms', ...SHORT_SNAPSHOTS } });
    servers.push(server);
    await server.request('/api/v1/logstream/r', { method: 'PUT' });
    expect((await server.request('/api/v1/logstream/r', { method: 'POST', json: [{ a: 1 }, { a: 2 }] })).status).toBe(200);
    await waitFor('flush', async () => (await stats(server, 'r')).wal.count === 0);
    const bad = await server.request('/api/v1/logstream/r/retention', { method: 'PUT', json: [{ action: 'delete', duration: 'soon' }] });
    expect(bad.status).toBe(400);
    const res = await server.request('/api/v1/logstream/r/retention', { method: 'PUT', json: [{ description: 'keep 2 s', action: 'delete', duration: '2s' }] });
    expect(res.status).toBe(200);
    expect(await (await server.request('/api/v1/logstream/r/retention')).json()).toEqual([{ description: 'keep 2 s', action: 'delete', duration: '2s' }]);
    await waitFor('retention', async () => (await stats(server, 'r')).storage.files === 0);
    expect(await query(server, 'SELECT count(*) AS n FROM r')).toEqual([{ n: 0 }]);
    await waitFor('files deleted', async () => (await parquetFiles(path.join(server.dataDir, 'store', 'r'))).length === 0);
  });
});

describe('crash at each step of a flush and of a compaction (kill -9 at a failpoint)', () => {
  const base = { P_FLUSH_INTERVAL: '100ms', P_COMPACTION_INTERVAL: '1h', P_QUERY_TIMEOUT: '3s', P_CATALOG_REFRESH: '200ms', ...SHORT_SNAPSHOTS };
  const servers: TestServer[] = [];
  // A test's servers go with it, so idle ones (flushing, compacting, refreshing) do not slow later tests.
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.kill();
  });
  const start = async (dataDir: string, env: Record<string, string> = {}) => {
    const s = await startServer({ dataDir, env: { ...base, ...env } });
    servers.push(s);
    return s;
  };
  const exactlyOnce = async (server: TestServer, total: number) =>
    expect(await query(server, 'SELECT count(*) AS n, count(DISTINCT b * 1000 + i) AS d FROM f')).toEqual([{ n: total, d: total }]);

  for (const point of ['flush-after-upload', 'flush-after-manifest', 'compaction-after-upload', 'compaction-after-manifest']) {
    it(`${point}: after the restart every row is there exactly once`, async () => {
      const dataDir = await tempDir();
      let server = await start(dataDir);
      await server.request('/api/v1/logstream/f', { method: 'PUT' });
      let total = 0;
      for (let b = 0; b < 3; b++) {
        expect((await server.request('/api/v1/logstream/f', { method: 'POST', json: Array.from({ length: 50 }, (_, i) => ({ b, i })) })).status).toBe(200);
        total += 50;
        await waitFor('flush', async () => (await stats(server, 'f')).wal.count === 0);
      }
      await server.stop();
      if (point.startsWith('flush')) {
        server = await start(dataDir, { P_FAILPOINT: point });
        expect((await server.request('/api/v1/logstream/f', { method: 'POST', json: Array.from({ length: 50 }, (_, i) => ({ b: 3, i })) })).status).toBe(200);
        total += 50;
      } else {
        server = await start(dataDir, { P_FAILPOINT: point, P_COMPACTION_INTERVAL: '1s' });
      }
      await Promise.race([server.exited, sleep(20_000).then(() => Promise.reject(new Error(`never reached ${point}`)))]);
      server = await start(dataDir, { P_COMPACTION_INTERVAL: '300ms' });
      await exactlyOnce(server, total);
      // And the interrupted work completes on the next run without changing the answer.
      await waitFor('compacted', async () => (await stats(server, 'f')).storage.files <= 2); // 2 if the test straddles an hour
      await exactlyOnce(server, total);
    });
  }
});
