/**
 * Ingest-only probe for profiling (not part of `npm run bench`): starts the service (BENCH_NODE_ARGS,
 * e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`), sends JSON batches (PROBE_EVENTS, 8 clients) and single
 * events (PROBE_SINGLE, 32 clients; PROBE_FLUSH=1 waits for the WAL to be in Parquet), prints events/s, service CPU seconds and peak RSS of its tree.
 */
import { api, fmt, sendAll, settle, startService, threadCpu, waitFlushed, watchTree } from './lib.ts';
import { makeLogEvents } from './logs.ts';

const EVENTS = Number(process.env.PROBE_EVENTS ?? 300_000);
const SINGLE = Number(process.env.PROBE_SINGLE ?? 10_000);
const events = makeLogEvents(EVENTS, 42);
const bodies: string[] = [];
for (let i = 0; i < events.length; i += 1000) bodies.push(JSON.stringify(events.slice(i, i + 1000)));
const singles = makeLogEvents(SINGLE, 7).map((e) => JSON.stringify(e));
const server = await startService({ P_FLUSH_INTERVAL: '5s', ...(process.env.PROBE_ENV ? JSON.parse(process.env.PROBE_ENV) : {}) });
try {
  await api(server.port, 'PUT', '/api/v1/logstream/bench_logs');
  await api(server.port, 'PUT', '/api/v1/logstream/bench_single');
  await settle(server.pid);
  if (EVENTS) {
    const w = watchTree(server.pid);
    const cpu0 = process.cpuUsage();
    const secs = await sendAll(server.port, '/api/v1/logstream/bench_logs', bodies, 8);
    const c = process.cpuUsage(cpu0);
    // PROBE_FLUSH=1: the window runs until the WAL is in Parquet, as in `npm run bench` (flush memory included).
    if (process.env.PROBE_FLUSH === '1') await waitFlushed(server.port, 'bench_logs');
    const u = await w.stop();
    console.log(`batches: ${fmt(EVENTS / secs)} ev/s, service CPU ${fmt((u.cpuSec / EVENTS) * 1e6, 2)} s/1M, client CPU ${fmt(((c.user + c.system) / 1e6 / EVENTS) * 1e6, 2)} s/1M, peak RSS tree ${fmt(u.peakTreeRss / 1e6)} MB main ${fmt(u.peakMainRss / 1e6)} MB, PSS tree ${fmt(u.peakTreePss / 1e6)} MB`);
    console.log(`  by thread (CPU s): ${threadCpu(u.byThread)}`);
  }
  if (SINGLE) {
    const w = watchTree(server.pid);
    const cpu0 = process.cpuUsage();
    const secs = await sendAll(server.port, '/api/v1/logstream/bench_single', singles, 32);
    const c = process.cpuUsage(cpu0);
    const u = await w.stop();
    console.log(`singles: ${fmt(SINGLE / secs)} req/s, service CPU ${fmt((u.cpuSec / SINGLE) * 1e6, 1)} µs/req, client CPU ${fmt((c.user + c.system) / SINGLE, 1)} µs/req, peak RSS tree ${fmt(u.peakTreeRss / 1e6)} MB`);
    console.log(`  by thread (CPU s): ${threadCpu(u.byThread)}`);
  }
} finally {
  await server.stop();
}
