import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import snappy from 'snappy';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WriteRequestV1 } from '../src/ingest/prometheus/decode.ts';
import { QueryPool } from '../src/query/worker/pool.ts';
import type { FromWorker } from '../src/query/worker/protocol.ts';
import { startServer, tempDir, type TestServer } from './helpers/server.ts';
import { sleep, waitFor } from './helpers/wait.ts';

/**
 * Memory that goes back (docs/memory.md): an idle service holds no query worker process and no ingest
 * worker thread. With default pools (no warm query worker) and short quiet periods, both are let go
 * after use, and queries, PromQL and ingestion after the quiet period answer and store exactly.
 */
describe('the idle service lets its workers go', () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startServer({
      env: {
        // The defaults (the test helper keeps one warm query worker), with short quiet periods.
        P_QUERY_WARM_WORKERS: '0',
        P_QUERY_WORKER_IDLE: '1s',
        P_INGEST_WORKER_IDLE: '1s',
        P_INGEST_WORKERS: '2',
        P_FLUSH_INTERVAL: '1s',
      },
    });
    expect((await server.request('/api/v1/logstream/idle', { method: 'PUT' })).status).toBeLessThan(300);
  });
  afterAll(async () => server?.stop());

  /** The pools' gauges from /metrics: query worker processes (any state) and ingest worker threads. */
  async function workers(): Promise<{ query: number; ingest: number }> {
    const text = await (await server.request('/metrics')).text();
    let query = 0;
    for (const m of text.matchAll(/^lakehouse_query_workers\{state="\w+"\} (\d+)/gm)) query += Number(m[1]);
    const ingest = /^lakehouse_ingest_workers (\d+)/m.exec(text);
    expect(ingest, 'lakehouse_ingest_workers gauge').not.toBeNull();
    return { query, ingest: Number(ingest![1]) };
  }
  const released = () => waitFor('no query worker and no ingest thread', async () => {
    const w = await workers();
    return w.query === 0 && w.ingest === 0;
  });

  /** 8 concurrent requests of 1,000 events each (bodies large enough for the ingest threads). */
  async function ingest(round: string): Promise<void> {
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, b) =>
        server.request('/api/v1/logstream/idle', {
          method: 'POST',
          json: Array.from({ length: 1000 }, (_, i) => ({ round, batch: b, i, message: `event ${i} of batch ${b} in ${round}, padded to be worth a thread` })),
        }),
      ),
    );
    for (const r of results) expect(r.status, await r.text()).toBe(200);
  }

  async function counts(): Promise<Record<string, number>> {
    const res = await server.request('/api/v1/query', {
      method: 'POST',
      json: { query: 'SELECT round, count(*) AS n, count(DISTINCT batch * 1000 + i) AS distinct_events FROM idle GROUP BY round ORDER BY round', startTime: new Date(Date.now() - 3_600_000).toISOString(), endTime: new Date(Date.now() + 60_000).toISOString() },
    });
    expect(res.status, await res.clone().text()).toBe(200);
    const rows = (await res.json()) as { round: string; n: number; distinct_events: number }[];
    for (const r of rows) expect(r.distinct_events).toBe(r.n);
    return Object.fromEntries(rows.map((r) => [r.round, r.n]));
  }

  it('starts with no query worker and no ingest thread', async () => {
    expect(await workers()).toEqual({ query: 0, ingest: 0 });
  });

  it('ingests and answers exactly, lets the workers go, and does so again after the quiet period', async () => {
    await ingest('first');
    expect(await counts()).toEqual({ first: 8000 });
    await released();
    // A query on no worker starts one and answers exactly; ingestion after the quiet period stores exactly.
    expect(await counts()).toEqual({ first: 8000 });
    await ingest('second');
    expect(await counts()).toEqual({ first: 8000, second: 8000 });
    await released();
    expect(await counts()).toEqual({ first: 8000, second: 8000 });
  });

  it('answers PromQL on a freshly started worker (its engine loaded on first use)', async () => {
    const t0 = Math.floor(Date.now() / 60_000) * 60_000 - 600_000;
    const raw = WriteRequestV1.encode(
      WriteRequestV1.fromObject({
        timeseries: [{ labels: [{ name: '__name__', value: 'idle_requests_total' }, { name: 'job', value: 'api' }], samples: Array.from({ length: 41 }, (_, i) => ({ timestamp: t0 + i * 15_000, value: i * 15 })) }],
      }),
    ).finish();
    const w = await server.request('/v1/prometheus/write?stream=idle_prom', {
      method: 'POST',
      body: new Uint8Array(snappy.compressSync(Buffer.from(raw))),
      headers: { 'content-encoding': 'snappy', 'content-type': 'application/x-protobuf' },
    });
    expect(w.status, await w.text()).toBe(200);
    await released();
    const at = (t0 + 40 * 15_000) / 1000;
    const res = await server.request(`/prometheus/idle_prom/api/v1/query?query=${encodeURIComponent('sum by (job) (max_over_time(idle_requests_total[10m]))')}&time=${at}`);
    const body = (await res.json()) as { status: string; data: { result: { metric: Record<string, string>; value: [number, string] }[] } };
    expect(res.status, JSON.stringify(body)).toBe(200);
    // The last of the samples written (40 × 15).
    expect(body.data.result).toEqual([{ metric: { job: 'api' }, value: [at, '600'] }]);
    await released();
  });
});

/**
 * The storage DuckDB (flushes, compaction, query parsing) is closed after P_STORAGE_DUCKDB_IDLE unused
 * and opened again on next use (docs/memory.md): ingestion, flushes, compaction and queries after a
 * close store and answer exactly, as a client sees them.
 */
describe('the storage DuckDB is closed when idle and opened again on use', () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startServer({ env: { P_STORAGE_DUCKDB_IDLE: '1s', P_FLUSH_INTERVAL: '1s', P_COMPACTION_INTERVAL: '3s' } });
    expect((await server.request('/api/v1/logstream/duckidle', { method: 'PUT' })).status).toBeLessThan(300);
  });
  afterAll(async () => server?.stop());

  /** The storage DuckDB's gauges from /metrics: open (1) or closed (0), and opens since start. */
  async function duck(): Promise<{ open: number; opens: number }> {
    const text = await (await server.request('/metrics')).text();
    const open = /^lakehouse_storage_duckdb_open (\d+)/m.exec(text);
    const opens = /^lakehouse_storage_duckdb_opens (\d+)/m.exec(text);
    expect(open && opens, 'lakehouse_storage_duckdb_open(s) gauges').toBeTruthy();
    return { open: Number(open![1]), opens: Number(opens![1]) };
  }
  const compactions = async () => Number(/^lakehouse_compactions_total\{result="ok"\} (\d+)/m.exec(await (await server.request('/metrics')).text())?.[1] ?? 0);
  const closed = () => waitFor('the storage DuckDB closed', async () => (await duck()).open === 0 && (await duck()));
  const stats = async () => (await (await server.request('/api/v1/logstream/duckidle/stats')).json()) as { wal: { count: number }; storage: { files: number } };
  const flushed = () => waitFor('the WAL flushed', async () => (await stats()).wal.count === 0 && (await stats()));

  async function ingest(round: string, requests: number): Promise<void> {
    for (let b = 0; b < requests; b++) {
      const r = await server.request('/api/v1/logstream/duckidle', { method: 'POST', json: Array.from({ length: 500 }, (_, i) => ({ round, batch: b, i })) });
      expect(r.status, await r.text()).toBe(200);
    }
  }
  async function query<T>(sql: string): Promise<T[]> {
    const res = await server.request('/api/v1/query', { method: 'POST', json: { query: sql, startTime: new Date(Date.now() - 3_600_000).toISOString(), endTime: new Date(Date.now() + 60_000).toISOString() } });
    expect(res.status, await res.clone().text()).toBe(200);
    return (await res.json()) as T[];
  }
  async function counts(): Promise<Record<string, number>> {
    const rows = await query<{ round: string; n: number; distinct_events: number }>('SELECT round, count(*) AS n, count(DISTINCT batch * 1000 + i) AS distinct_events FROM duckidle GROUP BY round ORDER BY round');
    for (const r of rows) expect(r.distinct_events).toBe(r.n);
    return Object.fromEntries(rows.map((r) => [r.round, r.n]));
  }

  it('flushes, compacts and answers exactly after each close', async () => {
    // Idle after start: the instance that read the SQL keywords is closed.
    const start = await closed();
    // A flush opens it again; each flush of a round writes files that compaction merges later.
    await ingest('first', 3);
    await flushed();
    const afterFirst = await closed();
    expect(afterFirst.opens).toBeGreaterThan(start.opens);
    // A query's parsing opens it again (the answer comes from a query worker).
    expect(await counts()).toEqual({ first: 1500 });
    const afterQuery = await closed();
    expect(afterQuery.opens).toBeGreaterThan(afterFirst.opens);
    // Ingestion and flushes after a close, in several flushes (several files), then compaction.
    for (const round of ['second', 'third']) {
      await ingest(round, 2);
      await flushed();
    }
    // Compaction (every 3 s) merges the rounds' files, on an instance it opens again when closed.
    // One file per hour once merged (the rounds may straddle an hour).
    const hours = await query<{ h: number }>("SELECT count(DISTINCT date_trunc('hour', p_timestamp)) AS h FROM duckidle");
    await waitFor('compaction merged the files', async () => (await compactions()) > 0 && (await stats()).storage.files === hours[0].h, 60_000);
    expect(await counts()).toEqual({ first: 1500, second: 1000, third: 1000 });
    await closed();
    expect(await counts()).toEqual({ first: 1500, second: 1000, third: 1000 });
  });
});

describe('QueryPool: workers beyond the warm ones go after a quiet period', () => {
  let dir: string;
  let pool: QueryPool;
  beforeAll(async () => {
    dir = await tempDir('qidle-');
    pool = new QueryPool({ workDir: path.join(dir, 'work'), concurrency: 2, perKey: 2, queue: 4, queueWaitMs: 60_000, threads: 1, memoryLimit: '256MB', heapMb: 128, warm: 1, idleMs: 300 });
    await pool.start();
  });
  afterAll(async () => {
    await pool?.close();
    await fs.rm(dir, { recursive: true, force: true });
  });
  const total = () => {
    const s = pool.stats;
    return s.starting + s.idle + s.busy;
  };

  async function run(sql: string): Promise<unknown[]> {
    const exec = await pool.run('k', () => ({ type: 'run', links: [], views: [], sql, sendNull: true, timeFormat: 'iso', maxRows: 1000, maxBytes: 1 << 20, streaming: false, materialize: false }));
    const chunks: string[] = [];
    for await (const m of exec.events as AsyncIterable<FromWorker>) {
      if (m.type === 'chunk' || m.type === 'answer') chunks.push(m.text);
      if (m.type === 'error') throw new Error(m.message);
    }
    return JSON.parse(`[${chunks.join(',')}]`) as unknown[];
  }

  it('keeps the warm worker, lets the second go, and never a busy one', async () => {
    expect(total()).toBe(1);
    // Two at once: a second worker starts. The sums take a while, longer than the quiet period on
    // most machines: a busy worker is not let go.
    const sql = 'SELECT sum(i) AS s FROM range(200000000) t(i)';
    const [a, b] = await Promise.all([run(sql), run(sql)]);
    expect(a).toEqual([{ s: '19999999900000000' }]); // a HUGEINT sum: a string, exact
    expect(b).toEqual(a);
    await waitFor('the second worker to go', async () => total() === 1);
    // The warm one stays through further quiet periods, and answers.
    await sleep(1000);
    expect(total()).toBe(1);
    expect(await run('SELECT 42 AS n')).toEqual([{ n: 42 }]);
  });
});
