import { afterAll, describe, expect, it } from 'vitest';
import { memoryCgroup } from './helpers/cgroup.ts';
import { sleep, waitFor } from './helpers/wait.ts';
import { query, startServer, type TestServer } from './helpers/server.ts';
import { otlpLogsJson, otlpLogsProtobuf } from './helpers/wire.ts';

const MiB = 1024 * 1024;

/**
 * The service in a 512 MiB memory cgroup (a common container size), with default settings (only the
 * compaction interval shortened, so compaction runs within the test): JSON and OTLP bursts, a request
 * whose records are a minute apart, and a query whose strings outgrow DuckDB's accounting. The main
 * process is never OOM-killed, every acknowledged row is stored, nothing is set aside.
 */
describe('a worker fits a 512 MiB container', () => {
  let server: TestServer | undefined;
  let cgroup: Awaited<ReturnType<typeof memoryCgroup>> | undefined;
  afterAll(async () => {
    await server?.kill();
    await cgroup?.remove();
  });

  it('bursts, spread data and a heavy query inside 512 MiB: no OOM kill of the service, every acknowledged row stored', async () => {
    cgroup = await memoryCgroup(512 * MiB);
    // P_SIGNAL_TIME_PAST_LIMIT 0: the spread request's records are months old.
    server = await startServer({ wrap: cgroup.wrap, env: { P_COMPACTION_INTERVAL: '5s', P_SIGNAL_TIME_PAST_LIMIT: '0' } });
    const s = server;
    let alive = true;
    void s.exited.then(() => (alive = false));
    // The defaults were sized from the cgroup's limit.
    expect(s.logs()).toMatch(/"msg":"memory budget","bytes":536870912,"source":"cgroup v[12]"/);

    /** Sends until acknowledged: a 503 (in-flight budget, disk) is retried, as clients do. */
    const deliver = async (path: string, body: string | Uint8Array<ArrayBuffer>, headers: Record<string, string>) => {
      for (let attempt = 0; ; attempt++) {
        const res = await s.request(path, { method: 'POST', body, headers });
        if (res.status === 200) return;
        expect(res.status, await res.text()).toBe(503);
        expect(attempt).toBeLessThan(200);
        await sleep(100);
      }
    };
    const inParallel = async (n: number, clients: number, send: (i: number) => Promise<void>) => {
      let next = 0;
      await Promise.all(Array.from({ length: clients }, async () => {
        while (next < n) await send(next++);
      }));
    };

    expect((await s.request('/api/v1/logstream/cg_json', { method: 'PUT' })).status).toBe(200);
    // JSON burst: 200,000 events, 8 clients × 1,000 events a request.
    await inParallel(200, 8, (b) =>
      deliver(
        '/api/v1/logstream/cg_json',
        JSON.stringify(Array.from({ length: 1000 }, (_, i) => ({ id: b * 1000 + i, level: i % 7 ? 'info' : 'error', message: `request ${b * 1000 + i} served by host-${b % 17}`, latency_ms: (i * 7919) % 1000 }))),
        { 'content-type': 'application/json' },
      ),
    );
    // OTLP/JSON burst: 50,000 log records.
    const now = Date.now();
    await inParallel(50, 8, (b) =>
      deliver('/v1/logs', otlpLogsJson(Array.from({ length: 1000 }, (_, i) => ({ timeMs: now - i, body: `otlp ${b * 1000 + i}`, attributes: [['k', { int: b * 1000 + i }]] }))), {
        'content-type': 'application/json',
        'X-P-Stream': 'cg_otlp',
      }),
    );
    // The spread request of issue 18: 5,000 records one minute apart.
    const start = Date.UTC(2026, 0, 1);
    await deliver('/v1/logs', new Uint8Array(otlpLogsProtobuf(Array.from({ length: 5000 }, (_, i) => ({ timeMs: start + i * 60_000, body: `spread ${i}`, attributes: [] })))), {
      'content-type': 'application/x-protobuf',
      'X-P-Stream': 'cg_spread',
    });
    // The heavy query: stopped at its worker's cap (413), or its worker killed by the kernel (503).
    const heavy = await s.request('/api/v1/query', {
      method: 'POST',
      json: { query: "SELECT len(string_split(repeat('abcdefghijklmnopqrstuvwxyz0123456789,', 20000000), ',')) AS n", startTime: '1970-01-01T00:00:00Z', endTime: '2100-01-01T00:00:00Z' },
    });
    expect([413, 503]).toContain(heavy.status);

    for (const name of ['cg_json', 'cg_otlp', 'cg_spread']) {
      await waitFor(`${name} flushed`, async () => ((await (await s.request(`/api/v1/logstream/${name}/stats`)).json()) as { wal: { count: number } }).wal.count === 0, 120_000);
    }
    expect(await query(s, 'SELECT count(*) AS n, count(DISTINCT id) AS d FROM cg_json')).toEqual([{ n: 200_000, d: 200_000 }]);
    expect(await query(s, 'SELECT count(*) AS n, count(DISTINCT body) AS d FROM cg_otlp')).toEqual([{ n: 50_000, d: 50_000 }]);
    expect(await query(s, 'SELECT count(*) AS n, count(DISTINCT body) AS d FROM cg_spread')).toEqual([{ n: 5000, d: 5000 }]);
    // Compaction ran (every 5 s here) inside the limit too.
    await waitFor('compaction ran', async () => s.logs().includes('"msg":"compacted"'), 60_000);
    expect(await query(s, 'SELECT count(*) AS n FROM cg_json')).toEqual([{ n: 200_000 }]);

    const ready = (await (await s.request('/api/v1/readiness')).json()) as { details?: { quarantined?: unknown[] } };
    expect(ready.details?.quarantined ?? []).toEqual([]);
    expect(alive, 'the service process died').toBe(true);
    expect((await s.request('/api/v1/liveness')).status).toBe(200);
    // The kernel may have killed a query worker (it is picked first); never the service.
    expect(s.logs()).not.toMatch(/"msg":"fatal"/);
  }, 300_000);
});
