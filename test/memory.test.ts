import { afterEach, describe, expect, it } from 'vitest';
import * as path from 'node:path';
import { listFiles } from './helpers/files.ts';
import { waitFor } from './helpers/wait.ts';
import { query, startServer, type TestServer } from './helpers/server.ts';
import { otlpLogsProtobuf, remoteWriteV1 } from './helpers/wire.ts';

type Stats = { wal: { count: number }; storage: { files: number } };

/** Spread data (issue 18): records far apart in time must not make a dataset's flush unbounded. */
describe('a flush is bounded whatever the data\'s times', () => {
  const servers: TestServer[] = [];
  // A test's servers go with it, so idle ones (flushing, compacting, refreshing) do not slow later tests.
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.kill();
  });

  it('an OTLP/protobuf request and a remote write whose 5,000 records are one minute apart flush, and every row is queryable', async () => {
    // Records months old: the past limit is lifted, as for a backfill.
    const server = await startServer({ env: { P_FLUSH_INTERVAL: '1s', P_SIGNAL_TIME_PAST_LIMIT: '0' } });
    servers.push(server);
    const start = Date.UTC(2026, 0, 1);
    const records = Array.from({ length: 5000 }, (_, i) => ({ timeMs: start + i * 60_000, body: `record ${i}`, attributes: [] }));
    const otlp = await server.request('/v1/logs', {
      method: 'POST',
      body: new Uint8Array(otlpLogsProtobuf(records)),
      headers: { 'content-type': 'application/x-protobuf', 'X-P-Stream': 'spread_otlp' },
    });
    expect(otlp.status, await otlp.text()).toBe(200);
    const samples = Array.from({ length: 5000 }, (_, i) => ({ value: i, timestampMs: start + i * 60_000 }));
    const prom = await server.request('/v1/prometheus/write?stream=spread_prom', {
      method: 'POST',
      body: new Uint8Array(remoteWriteV1([{ labels: [['__name__', 'backfilled']], samples }])),
      headers: { 'content-encoding': 'snappy', 'content-type': 'application/x-protobuf' },
    });
    expect(prom.status, await prom.text()).toBe(200);

    for (const name of ['spread_otlp', 'spread_prom']) {
      const stats = async () => (await (await server.request(`/api/v1/logstream/${name}/stats`)).json()) as Stats;
      await waitFor(`${name} flushed`, async () => (await stats()).wal.count === 0, 60_000);
      // 5,000 minutes are 84 hours: written as hour files, not 5,000 minute files.
      expect((await stats()).storage.files).toBeLessThanOrEqual(84);
      const all = 'SELECT count(*) AS n, count(DISTINCT time_unix_nano) AS d, min(time_unix_nano) AS lo, max(time_unix_nano) AS hi FROM';
      expect(await query(server, `${all} ${name}`)).toEqual([{ n: 5000, d: 5000, lo: '2026-01-01T00:00:00.000Z', hi: '2026-01-04T11:19:00.000Z' }]);
      // A time range picks exactly its rows (an hour file holds its minutes' rows).
      const range = { startTime: new Date(start + 1000 * 60_000).toISOString(), endTime: new Date(start + 1010 * 60_000).toISOString() };
      expect(await query(server, `SELECT count(*) AS n FROM ${name}`, range)).toEqual([{ n: 10 }]);
    }
    const ready = (await (await server.request('/api/v1/readiness')).json()) as { details?: { quarantined?: unknown[] } };
    expect(ready.details?.quarantined ?? []).toEqual([]);
  }, 120_000);

  it('a query whose lists and strings outgrow DuckDB\'s accounting is stopped at the worker\'s cap by the RSS watchdog: 413, the service and other queries go on', async () => {
    // The watchdog is the fallback where the service may not create cgroups (test/workerCgroup.test.ts has the cgroup).
    const server = await startServer({ env: { P_QUERY_WORKER_MAX_MEMORY: '256MiB', P_QUERY_WORKER_CGROUP: 'off' } });
    servers.push(server);
    const heavy = "SELECT len(string_split(repeat('abcdefghijklmnopqrstuvwxyz0123456789,', 20000000), ',')) AS n";
    const res = await server.request('/api/v1/query', { method: 'POST', json: { query: heavy, startTime: '1970-01-01T00:00:00Z', endTime: '2100-01-01T00:00:00Z' } });
    expect(res.status).toBe(413);
    expect(await res.text()).toMatch(/more memory than a query may use \(256 MiB, P_QUERY_WORKER_MAX_MEMORY\)/);
    expect((await server.request('/api/v1/liveness')).status).toBe(200);
    expect(await query(server, 'SELECT 1 AS one')).toEqual([{ one: 1 }]);
    expect(server.logs()).toContain('query worker over its memory cap; killed');
  }, 120_000);

  it('under memory pressure with several writers, out-of-memory flushes set nothing aside: every acknowledged row stays, and is stored once memory is back', async () => {
    // A storage DuckDB limit of 2 MB: every flush and every WAL check runs out of memory (issue 18 (1)).
    let server = await startServer({ env: { P_FLUSH_INTERVAL: '1s', P_STORAGE_MEMORY_LIMIT: '2MB' } });
    servers.push(server);
    const names = Array.from({ length: 6 }, (_, i) => `pressure${i}`);
    for (const name of names) expect((await server.request(`/api/v1/logstream/${name}`, { method: 'PUT' })).status).toBe(200);
    await Promise.all(
      names.map(async (name, d) => {
        for (let b = 0; b < 5; b++) {
          const events = Array.from({ length: 200 }, (_, i) => ({ id: b * 1000 + i, writer: d, msg: `event ${i} of batch ${b} `.padEnd(300, 'x') }));
          const res = await server.request(`/api/v1/logstream/${name}`, { method: 'POST', json: events });
          expect(res.status).toBe(200);
        }
      }),
    );
    await waitFor('every dataset\'s flush ran out of memory twice', async () =>
      names.every((n) => server.logs().split('\n').filter((l) => l.includes('"flush failed; will retry"') && l.includes(`"dataset":"${n}"`) && l.includes('Out of Memory')).length >= 2),
    60_000);
    const quarantined = async (s: TestServer) => ((await (await s.request('/api/v1/readiness')).json()) as { details?: { quarantined?: unknown[] } }).details?.quarantined ?? [];
    expect(await quarantined(server)).toEqual([]);
    // Parsing SQL shares that DuckDB: a query is asked to come back later (503), not failed (500).
    const pressed = await server.request('/api/v1/query', { method: 'POST', json: { query: `SELECT count(*) FROM ${names[0]}`, startTime: '1970-01-01T00:00:00Z', endTime: '2100-01-01T00:00:00Z' } });
    expect(pressed.status, await pressed.clone().text()).toBe(503);
    expect(Number(pressed.headers.get('retry-after'))).toBeGreaterThan(0);
    // Every acknowledged row is still in the WAL.
    for (const name of names) expect(((await (await server.request(`/api/v1/logstream/${name}/stats`)).json()) as Stats).wal.count).toBe(1000);

    // Memory back (the default limit), after a restart: everything flushes, nothing was set aside.
    await server.kill();
    server = await startServer({ dataDir: server.dataDir, env: { P_FLUSH_INTERVAL: '1s' } });
    servers.push(server);
    for (const name of names) {
      await waitFor(`${name} flushed`, async () => ((await (await server.request(`/api/v1/logstream/${name}/stats`)).json()) as Stats).wal.count === 0, 60_000);
      expect(await query(server, `SELECT count(*) AS n, count(DISTINCT id) AS d FROM ${name}`)).toEqual([{ n: 1000, d: 1000 }]);
    }
    expect(await quarantined(server)).toEqual([]);
    expect(await listFiles(path.join(server.dataDir, 'quarantine'), '')).toEqual([]);
  }, 180_000);
});
