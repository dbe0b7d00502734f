import * as path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterEach, describe, expect, it } from 'vitest';
import { listFiles } from './helpers/files.ts';
import { query, startServer, tempDir, type TestServer } from './helpers/server.ts';
import { sleep } from './helpers/wait.ts';

const BATCH = 20;

/**
 * Several clients send batches with unique ids as fast as they can; returns the ids of every batch
 * that was acknowledged (2xx) before the server died.
 */
function loadUntilDead(server: TestServer, clients: number, round: number) {
  const acked = new Set<string>();
  let stop = false;
  const client = async (c: number) => {
    for (let seq = 0; !stop; seq++) {
      const batchId = `r${round}-c${c}-s${seq}`;
      const events = Array.from({ length: BATCH }, (_, i) => ({ batch: batchId, i, payload: 'x'.repeat(50), nested: { n: seq } }));
      try {
        const res = await server.request('/api/v1/logstream/durable', { method: 'POST', json: events });
        if (res.ok) acked.add(batchId);
        else await res.text();
      } catch {
        return; // connection refused/reset: the server is gone
      }
    }
  };
  const running = Promise.all(Array.from({ length: clients }, (_, c) => client(c)));
  return { acked, finish: async () => { stop = true; await running; } };
}

describe('durability', () => {
  const servers: TestServer[] = [];
  // A test's servers go with it, so idle ones (flushing, compacting, refreshing) do not slow later tests.
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.kill();
  });

  it('every acknowledged event survives kill -9 and restart, none twice, no partial batch', async () => {
    const dataDir = await tempDir();
    // Tiny flush thresholds so kills also land in the middle of flushes.
    const env = { P_FLUSH_INTERVAL: '200ms', P_FLUSH_BYTES: '64KiB' };
    let server = await startServer({ dataDir, env });
    servers.push(server);
    expect((await server.request('/api/v1/logstream/durable', { method: 'PUT' })).status).toBe(200);
    const allAcked = new Set<string>();
    for (let round = 0; round < 3; round++) {
      const load = loadUntilDead(server, 4, round);
      // Kill only once the first batches are acknowledged, at a different moment each round.
      for (let waited = 0; load.acked.size < 3 && waited < 20_000; waited += 50) await sleep(50);
      await sleep(300 + round * 300);
      await server.kill();
      await load.finish();
      for (const id of load.acked) allAcked.add(id);
      expect(load.acked.size).toBeGreaterThan(0);
      server = await startServer({ dataDir, env });
      servers.push(server);
    }
    const rows = await query(server, 'SELECT batch, count(*) AS n, count(DISTINCT i) AS d FROM durable GROUP BY batch');
    const seen = new Map(rows.map((r) => [String(r.batch), r]));
    for (const id of allAcked) {
      expect(seen.has(id), `acknowledged batch ${id} is missing`).toBe(true);
    }
    for (const r of rows) {
      // Each batch is all or nothing, and never stored twice.
      expect(r.n, `batch ${r.batch}`).toBe(BATCH);
      expect(r.d, `batch ${r.batch}`).toBe(BATCH);
    }
    expect(rows.length).toBeGreaterThanOrEqual(allAcked.size);
    // Whatever was in flight when killed and not acknowledged may or may not be there, but nothing else.
    expect(rows.length - allAcked.size).toBeLessThanOrEqual(4 * 3);
  });

  it('queries running while flushes swap WAL for Parquet see every acknowledged row exactly once', async () => {
    const server = await startServer({ env: { P_FLUSH_INTERVAL: '20ms', P_FLUSH_BYTES: '8KiB' } });
    servers.push(server);
    await server.request('/api/v1/logstream/swap', { method: 'PUT' });
    // The columns exist once the first batch is in.
    expect((await server.request('/api/v1/logstream/swap', { method: 'POST', json: [{ b: -1, i: 0 }] })).status).toBe(200);
    let acked = 1;
    let stop = false;
    const writer = (async () => {
      for (let b = 0; !stop; b++) {
        const res = await server.request('/api/v1/logstream/swap', { method: 'POST', json: Array.from({ length: 10 }, (_, i) => ({ b, i })) });
        expect(res.status).toBe(200);
        acked += 10;
      }
    })();
    let checks = 0;
    // At least 3 s and at least 10 checks (queries run in worker processes: slower on a busy machine).
    const started = Date.now();
    while (Date.now() - started < 3000 || (checks < 10 && Date.now() - started < 30_000)) {
      const before = acked;
      const [row] = await query(server, 'SELECT count(*) AS n, count(DISTINCT b * 100 + i) AS d FROM swap');
      const after = acked;
      expect(row.n).toBe(row.d);
      expect(Number(row.n)).toBeGreaterThanOrEqual(before);
      expect(Number(row.n)).toBeLessThanOrEqual(after + 10);
      checks++;
    }
    stop = true;
    await writer;
    expect(checks).toBeGreaterThanOrEqual(10);
    const stats = (await (await server.request('/api/v1/logstream/swap/stats')).json()) as { storage: { files: number } };
    expect(stats.storage.files).toBeGreaterThan(3);
  });

  it('SIGTERM flushes the WAL to ZSTD Parquet that a fresh DuckDB reads as is', async () => {
    const dataDir = await tempDir();
    const server = await startServer({ dataDir, env: { P_FLUSH_INTERVAL: '1h' } });
    servers.push(server);
    expect((await server.request('/api/v1/logstream/plain', { method: 'PUT' })).status).toBe(200);
    const events = Array.from({ length: 500 }, (_, i) => ({ i, level: i % 5 === 0 ? 'error' : 'info', http: { status: 200 + (i % 3) }, ratio: i / 7 }));
    const res = await server.request('/api/v1/logstream/plain', { method: 'POST', json: events });
    expect(res.status).toBe(200);
    expect(await listFiles(path.join(dataDir, 'store', 'plain'), '.parquet')).toEqual([]);
    await server.stop();
    expect(await listFiles(path.join(dataDir, 'wal'), '.ndjson')).toEqual([]);
    const files = await listFiles(path.join(dataDir, 'store', 'plain'), '.parquet');
    expect(files.length).toBeGreaterThanOrEqual(1);
    for (const f of files) {
      expect(path.relative(path.join(dataDir, 'store', 'plain'), f)).toMatch(/^date=\d{4}-\d{2}-\d{2}\/hour=\d{2}\/minute=\d{2}\/[^/]+\.parquet$/);
    }
    const duck = await DuckDBInstance.create(':memory:');
    const conn = await duck.connect();
    const list = `[${files.map((f) => `'${f}'`).join(', ')}]`;
    const got = (await conn.runAndReadAll(`SELECT count(*)::INTEGER AS n, sum(i)::INTEGER AS s, count(*) FILTER (level = 'error')::INTEGER AS e, max(http_status)::INTEGER AS m FROM read_parquet(${list})`)).getRowObjects()[0];
    expect(got).toEqual({ n: 500, s: (499 * 500) / 2, e: 100, m: 202 });
    const codecs = (await conn.runAndReadAll(`SELECT DISTINCT compression FROM parquet_metadata(${list})`)).getRowObjects().map((r) => r.compression);
    expect(codecs).toEqual(['ZSTD']);
    const stats = (await conn.runAndReadAll(`SELECT count(*)::INTEGER AS n FROM parquet_metadata(${list}) WHERE path_in_schema = 'p_timestamp' AND stats_min IS NOT NULL AND stats_max IS NOT NULL`)).getRowObjects()[0];
    expect(Number(stats.n)).toBeGreaterThanOrEqual(1);
    conn.closeSync();
    // And the service reads it back after the restart.
    const again = await startServer({ dataDir });
    servers.push(again);
    expect(await query(again, 'SELECT count(*) AS n FROM plain')).toEqual([{ n: 500 }]);
  });
});
