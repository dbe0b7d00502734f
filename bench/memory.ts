import { api, fmt, post, sendAll, settle, startService, treeUsage, waitFlushed, watchTree } from './lib.ts';

/**
 * Memory of the whole process tree per phase (issue 18), with default settings: idle, JSON ingest,
 * flush, compaction, queries (including the per-minute histogram), and a minute after the last
 * request. Peak PSS and RSS per phase, as MB. `events`: JSON events sent (8 clients × 1,000 a request).
 */
export async function benchMemory(events = 500_000, env: Record<string, string> = {}): Promise<Record<string, { pssMb: number; rssMb: number }>> {
  const server = await startService({ P_COMPACTION_INTERVAL: '10s', ...env });
  const out: Record<string, { pssMb: number; rssMb: number }> = {};
  const mb = (b: number) => Math.round(b / 1e6);
  const phase = async (name: string, work: () => Promise<unknown>) => {
    const w = watchTree(server.pid);
    await work();
    const r = await w.stop();
    out[name] = { pssMb: mb(r.peakTreePss), rssMb: mb(r.peakTreeRss) };
  };
  try {
    await settle(server.pid);
    const idle = await treeUsage(server.pid);
    out.idle = { pssMb: mb(idle.pssBytes), rssMb: mb(idle.rssBytes) };
    await api(server.port, 'PUT', '/api/v1/logstream/mem');
    const bodies = Array.from({ length: events / 1000 }, (_, b) =>
      JSON.stringify(Array.from({ length: 1000 }, (_, i) => ({ level: i % 7 ? 'info' : 'error', service: `svc-${i % 13}`, host: `host-${b % 17}`, latency_ms: (i * 7919) % 1000, message: `request ${b * 1000 + i} served`, user: { id: i % 5000, tier: i % 3 ? 'free' : 'paid' } }))),
    );
    await phase('ingest', () => sendAll(server.port, '/api/v1/logstream/mem', bodies, 8));
    await phase('flush', () => waitFlushed(server.port, 'mem'));
    // Compaction (every 10 s here) merges the flushed files of each hour.
    await phase('compaction', async () => {
      const files = async () => ((await api(server.port, 'GET', '/api/v1/logstream/mem/stats')) as { storage: { files: number } }).storage.files;
      const before = await files();
      for (let i = 0; i < 120 && (await files()) >= before && before > 1; i++) await new Promise((r) => setTimeout(r, 500));
      await settle(server.pid, 30_000);
    });
    await phase('queries', async () => {
      const range = { startTime: new Date(Date.now() - 3_600_000).toISOString(), endTime: new Date(Date.now() + 60_000).toISOString() };
      for (const query of [
        'SELECT count(*) FROM mem',
        "SELECT date_trunc('minute', p_timestamp) AS m, count(*) FROM mem GROUP BY 1 ORDER BY 1",
        'SELECT service, level, count(*), avg(latency_ms) FROM mem GROUP BY ALL ORDER BY 3 DESC',
        "SELECT * FROM mem WHERE message LIKE '%request 4242%'",
      ]) {
        const res = await post(server.port, '/api/v1/query', JSON.stringify({ query, ...range }));
        if (res.status !== 200) throw new Error(`query failed ${res.status}: ${res.body}`);
      }
    });
    await new Promise((r) => setTimeout(r, 60_000));
    const after = await treeUsage(server.pid);
    out.minuteAfter = { pssMb: mb(after.pssBytes), rssMb: mb(after.rssBytes) };
    console.log(`memory (MB, process tree, ${fmt(events)} JSON events): ${Object.entries(out).map(([k, v]) => `${k} PSS ${v.pssMb} / RSS ${v.rssMb}`).join('; ')}`);
    return out;
  } finally {
    await server.stop();
  }
}
