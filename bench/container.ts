/**
 * Issue 37: JSON ingestion inside a 512 MiB container. The service's whole process tree runs in a
 * 512 MiB memory cgroup (every default sized from it, as in a container; test/helpers/cgroup.ts makes
 * the cgroup), idle PSS is read after start, then 1,000,000 JSON events (1,000 a request, 8 clients)
 * are sent while the tree's PSS is watched; the rate is set beside JSON.parse of the same bodies in
 * this process (one core's CPU, as run.ts's limits of this machine). Three runs, each a fresh service and cgroup.
 * `npx tsx bench/container.ts` runs it alone (root, a memory cgroup to create; BENCH_CONTAINER_RUNS,
 * BENCH_CONTAINER_EVENTS, BENCH_CONTAINER_MEMORY (MiB; 0: no cgroup) change the defaults; BENCH_CONTAINER_ENV, JSON,
 * adds settings).
 */
import * as os from 'node:os';
import { memoryCgroup } from '../test/helpers/cgroup.ts';
import { jsonParseRate } from './limits.ts';
import { makeLogEvents } from './logs.ts';
import { api, fmt, runIfMain, sendAll, settle, startService, threadCpu, treeUsage, waitFlushed, watchTree } from './lib.ts';

const MiB = 1024 * 1024;

/** The bodies of run.ts's JSON ingestion (makeLogEvents, seed 42), 1,000 events each, as bytes. */
function jsonBodies(events: number): Buffer[] {
  const all = makeLogEvents(events, 42);
  const bodies: Buffer[] = [];
  for (let i = 0; i < all.length; i += 1000) bodies.push(Buffer.from(JSON.stringify(all.slice(i, i + 1000))));
  return bodies;
}

export interface ContainerRun {
  perSec: number;
  parsePerSec: number;
  idlePssMb: number;
  peakPssMb: number;
  oomKills: number;
  /** CPU seconds of the whole service tree per million events, from the first request until flushed: less affected by load than the rate. */
  cpuPerMillion: number;
}

/** One run: a fresh cgroup and service, idle PSS, then the events. */
async function containerRun(bodies: Buffer[], events: number, limitBytes: number, env: Record<string, string>): Promise<ContainerRun> {
  // 0: no cgroup (the same run outside a container, for comparison).
  const cgroup = limitBytes > 0 ? await memoryCgroup(limitBytes) : { wrap: [], oomKills: async () => 0, remove: async () => undefined };
  try {
    const server = await startService({ ...env, ...JSON.parse(process.env.BENCH_CONTAINER_ENV ?? '{}') }, undefined, cgroup.wrap);
    try {
      await settle(server.pid);
      const idle = await treeUsage(server.pid);
      await api(server.port, 'PUT', '/api/v1/logstream/container');
      const parsePerSec = jsonParseRate(bodies, 1000).eventsPerSec;
      const watch = watchTree(server.pid);
      const seconds = await sendAll(server.port, '/api/v1/logstream/container', bodies, 8);
      await waitFlushed(server.port, 'container');
      const peak = await watch.stop();
      // Where the CPU went (BENCH_CONTAINER_THREADS=1): the main thread, each ingest thread, DuckDB's.
      if (process.env.BENCH_CONTAINER_THREADS) console.error(threadCpu(peak.byThread));
      return { perSec: events / seconds, parsePerSec, idlePssMb: Math.round(idle.pssBytes / 1e6), peakPssMb: Math.round(peak.peakTreePss / 1e6), oomKills: await cgroup.oomKills(), cpuPerMillion: (peak.cpuSec / events) * 1e6 };
    } finally {
      await server.stop();
    }
  } finally {
    await cgroup.remove();
  }
}

export async function benchContainer(
  runs = Number(process.env.BENCH_CONTAINER_RUNS ?? 3),
  events = Number(process.env.BENCH_CONTAINER_EVENTS ?? 1_000_000),
  limitBytes = Number(process.env.BENCH_CONTAINER_MEMORY ?? 512) * MiB,
  env: Record<string, string> = {},
): Promise<string[][]> {
  const bodies = jsonBodies(events);
  const rows = [['run', 'events/s', 'JSON.parse events/s', 'ratio', 'service CPU s / 1M events', 'idle PSS MB', 'peak PSS MB', 'OOM kills', 'load average']];
  for (let i = 1; i <= runs; i++) {
    const r = await containerRun(bodies, events, limitBytes, env);
        // The 1-minute load average as the run ends: the machine may be shared.
    const load = os.loadavg()[0].toFixed(2);
    rows.push([String(i), fmt(r.perSec), fmt(r.parsePerSec), `${fmt(r.perSec / r.parsePerSec, 3)}×`, fmt(r.cpuPerMillion, 1), String(r.idlePssMb), String(r.peakPssMb), String(r.oomKills), load]);
  }
  return rows;
}

runIfMain(import.meta.filename, () => benchContainer());
