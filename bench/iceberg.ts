/**
 * What publishing the Iceberg lake (docs/lake.md) costs, in one run:
 *
 * - CPU seconds (user + sys, /proc) of the service's whole process tree per million events with
 *   `P_ICEBERG` on against off: two services, BENCH_ICEBERG_ROUNDS (9) rounds after an uncounted
 *   warm-up, each round sending the same bodies to both AT ONCE (4 clients each), so the machine's
 *   other load falls on both alike; counted over one window per round, from the first request until the
 *   off service has flushed and the on one has also committed the round's files. The figure is the median
 *   of the per-round on/off ratios, with their interquartile range and extremes and the load average
 *   over the rounds: on a shared machine the rounds spread more than the effect.
 * - The same cost from inside: both services run with `--cpu-prof`, and the on service's main-thread
 *   profile gives the time spent in src/storage/iceberg/ (bench/cpuProfile.ts), which other load on the
 *   machine barely moves; a lower bound (I/O the publisher awaits is finished in frames of the store).
 * - The files the publisher writes per commit on local disk, and the object-store requests per flush and
 *   per idle second on S3 (moto behind a counting relay, bench/icebergRequests.ts), on against off.
 * - The lag from the last acknowledgement to the rows being visible in pyiceberg (RestCatalog through
 *   our REST catalog), polled; each poll starts a Python process, so the figure is an upper bound
 *   by up to one poll (printed beside it). Spark local beside our SQL over the same rows.
 *
 * Alone: `npx tsx bench/iceberg.ts` (BENCH_ICEBERG_EVENTS, BENCH_ICEBERG_ROUNDS; BENCH_ICEBERG_READERS=off
 * leaves out pyiceberg and Spark, BENCH_ICEBERG_S3=off the S3 requests).
 */
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { execFile } from 'node:child_process';
import * as os from 'node:os';
import { promisify } from 'node:util';
import { readerCounts } from '../test/helpers/iceberg.ts';
import { api, BENCH_KEY, fmt, median, runIfMain, sendAll, settle, startService, waitFlushed, watchTree, type BenchServer } from './lib.ts';
import { makeLogEvents } from './logs.ts';
import { mainThreadProfiles, partCost } from './cpuProfile.ts';
import { icebergRequests } from './icebergRequests.ts';

const BATCH = 1000;
const CLIENTS = 8;
const INTERVAL = '1s';

function bodies(count: number): Buffer[] {
  const events = makeLogEvents(count, 42);
  const out: Buffer[] = [];
  for (let i = 0; i < events.length; i += BATCH) out.push(Buffer.from(JSON.stringify(events.slice(i, i + BATCH))));
  return out;
}

/** The service's committed Iceberg commits, from /metrics. */
async function commits(port: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { authorization: `Bearer ${BENCH_KEY}` } })).text();
  const m = /^lakehouse_iceberg_commits_total\{result="committed"\} (\d+)/m.exec(text);
  return m ? Number(m[1]) : 0;
}

/** Every file under `dir` whose path has a `metadata` folder in it (the lake's own files). */
async function lakeFiles(dir: string): Promise<number> {
  const all = await fs.readdir(dir, { recursive: true, withFileTypes: true });
  return all.filter((e) => e.isFile() && path.join(e.parentPath, e.name).split(path.sep).includes('metadata')).length;
}

async function waitFor(check: () => Promise<boolean>, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 100));
  }
}

const QUERIES: Record<string, string> = {
  count: 'SELECT count(*) AS n FROM {t}',
  'by level': 'SELECT level, count(*) AS n FROM {t} GROUP BY level ORDER BY level',
};

/** A path a setup script kept in the lakehouse test cache (71-spark.sh). */
async function cachedPath(name: string): Promise<string> {
  const cache = process.env.LAKEHOUSE_TEST_CACHE ?? path.join(os.homedir(), '.cache', 'lakehouse-test');
  return (await fs.readFile(path.join(cache, name), 'utf8')).trim();
}

/**
 * Each query through Spark local (second run, warm JVM) beside our SQL over HTTP (second run): rows
 * checked equal, wall ms of each. Spark reads the same Parquet files through the Iceberg table.
 */
async function sparkBeside(server: BenchServer, table: string): Promise<string[][]> {
  const script = path.resolve(import.meta.dirname, 'iceberg_spark.py');
  const args = { uri: `http://127.0.0.1:${server.port}/iceberg`, key: BENCH_KEY, jar: await cachedPath('iceberg-spark-jar'), table, queries: QUERIES };
  const { stdout } = await promisify(execFile)(await cachedPath('spark-python'), [script, JSON.stringify(args)], { maxBuffer: 1 << 22, timeout: 300_000 });
  const spark = JSON.parse(stdout.trim().split('\n').pop()!) as Record<string, { rows: unknown[][]; ms: number; firstMs: number }>;
  const out: string[][] = [];
  for (const [label, sql] of Object.entries(QUERIES)) {
    const body = { query: sql.replace('{t}', table), startTime: '2000-01-01T00:00:00Z', endTime: '2100-01-01T00:00:00Z' };
    let ours: Record<string, unknown>[] = [];
    let ms = 0;
    for (let i = 0; i < 2; i++) {
      const t = performance.now();
      ours = (await api(server.port, 'POST', '/api/v1/query', body)) as Record<string, unknown>[];
      ms = performance.now() - t;
    }
    const mine = JSON.stringify(ours.map((r) => Object.values(r).map((v) => (typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v))));
    if (mine !== JSON.stringify(spark[label].rows)) throw new Error(`${label}: Spark ${JSON.stringify(spark[label].rows)} ≠ ours ${mine}`);
    out.push([label, fmt(ms, 0), fmt(spark[label].ms, 0), fmt(spark[label].firstMs, 0)]);
  }
  return out;
}

/** Ack → visible in pyiceberg: seconds, and the longest single poll (the bound's slack). */
async function lag(server: BenchServer, data: Buffer[]): Promise<[number, number]> {
  const name = 'bench_iceberg_lag';
  await api(server.port, 'PUT', `/api/v1/logstream/${name}`);
  await sendAll(server.port, `/api/v1/logstream/${name}`, data, CLIENTS);
  const acked = performance.now();
  let poll = 0;
  for (;;) {
    const t = performance.now();
    const counts = await readerCounts({ uri: `http://127.0.0.1:${server.port}/iceberg`, key: BENCH_KEY, table: name, timeColumn: 'p_timestamp', start: '2000-01-01T00:00:00', end: '2100-01-01T00:00:00' }).catch(() => undefined);
    poll = Math.max(poll, (performance.now() - t) / 1000);
    if (counts && counts.pyiceberg[0] === data.length * BATCH) return [(performance.now() - acked) / 1000, poll];
    if (performance.now() - acked > 120_000) throw new Error('not visible in pyiceberg after 120 s');
  }
}

/** The q-quantile of xs (linear between neighbours). */
function quantile(xs: number[], q: number): number {
  const sorted = [...xs].sort((a, b) => a - b);
  const at = (sorted.length - 1) * q;
  const lo = Math.floor(at);
  return sorted[lo] + (sorted[Math.min(lo + 1, sorted.length - 1)] - sorted[lo]) * (at - lo);
}

const pct = (x: number) => `${x >= 1 ? '+' : ''}${fmt((x - 1) * 100, 1)}%`;

/**
 * One round on both services at once: the same bodies sent to each in the same minutes (the machine's
 * other load falls on both alike), CPU s per 1M events of each over one window, from the first request
 * until the off service has flushed and the on one has also committed. Both are polled alike meanwhile.
 */
async function together(on: BenchServer, off: BenchServer, name: string, data: Buffer[]): Promise<[number, number]> {
  await Promise.all([on, off].map((s) => api(s.port, 'PUT', `/api/v1/logstream/${name}`)));
  await Promise.all([settle(on.pid), settle(off.pid)]);
  const before = await commits(on.port);
  let lakeDone = false;
  const watches = [watchTree(on.pid), watchTree(off.pid)];
  await Promise.all([
    (async () => {
      await sendAll(on.port, `/api/v1/logstream/${name}`, data, CLIENTS / 2);
      await waitFlushed(on.port, name);
      await waitFor(async () => (await commits(on.port)) > before);
      lakeDone = true;
    })(),
    (async () => {
      await sendAll(off.port, `/api/v1/logstream/${name}`, data, CLIENTS / 2);
      await waitFlushed(off.port, name);
      await waitFor(async () => (await commits(off.port)) >= 0 && lakeDone);
    })(),
  ]);
  const [u, v] = await Promise.all(watches.map((w) => w.stop()));
  const per1M = (sec: number) => (sec / (data.length * BATCH)) * 1e6;
  return [per1M(u.cpuSec), per1M(v.cpuSec)];
}

/** Rounds on both services at once (after an uncounted warm-up); CPU s per 1M events, and the load average at each round. */
async function rounds(on: BenchServer, off: BenchServer, data: Buffer[], count: number): Promise<{ on: number[]; off: number[]; load: number[] }> {
  const runs = { on: [] as number[], off: [] as number[], load: [] as number[] };
  await together(on, off, 'bench_iceberg_warmup', data.slice(0, Math.ceil(data.length / 4)));
  for (let r = 0; r < count; r++) {
    runs.load.push(os.loadavg()[0]);
    const [a, b] = await together(on, off, `bench_iceberg_${r}`, data);
    runs.on.push(a);
    runs.off.push(b);
  }
  return runs;
}

/** The rows of the CPU comparison: medians, the paired ratio with its spread, the load. */
function cpuRows(events: number, runs: { on: number[]; off: number[]; load: number[] }): string[][] {
  const paired = runs.on.map((x, i) => x / runs.off[i]);
  const spread = `IQR ${pct(quantile(paired, 0.25))} … ${pct(quantile(paired, 0.75))}; min–max ${pct(Math.min(...paired))} … ${pct(Math.max(...paired))}`;
  const load = `${fmt(Math.min(...runs.load), 1)}–${fmt(Math.max(...runs.load), 1)}`;
  return [
    ['case', 'events/round', 'service CPU s/1M (median)', 'vs off: median of paired rounds', 'paired spread', 'rounds (CPU s/1M)', 'load average (1 min)'],
    ['P_ICEBERG=off', fmt(events), fmt(median(runs.off), 2), '', '', runs.off.map((x) => fmt(x, 2)).join(' '), ''],
    ['P_ICEBERG=on', fmt(events), fmt(median(runs.on), 2), `${pct(median(paired))} (medians ${pct(median(runs.on) / median(runs.off))})`, spread, runs.on.map((x) => fmt(x, 2)).join(' '), load],
  ];
}

/** The publisher's own share of the on service, from its main thread's CPU profile over the same rounds. */
async function profileRows(dir: string, pid: number, events: number, onCpuPer1M: number[]): Promise<string[][]> {
  const files = await mainThreadProfiles(dir, pid);
  if (!files.length) return [['no CPU profile of the service was written in', dir]];
  const cost = await partCost(files[0], '/storage/iceberg/');
  const share = cost.partSec / cost.busySec;
  return [
    ['publisher (src/storage/iceberg/) in the on service\'s main-thread profile', 'publisher s', 'main thread busy s', 'share of main thread', 'as % of the service tree\'s CPU (median round)'],
    ['all rounds and the warm-up', fmt(cost.partSec, 2), fmt(cost.busySec, 2), `${fmt(share * 100, 1)}%`, `${fmt(((cost.partSec / (events / 1e6)) / median(onCpuPer1M)) * 100, 1)}% (${fmt(cost.partSec, 2)} s over ${fmt(events)} events)`],
    ...cost.top.map(([where, sec]) => [`  ${where}`, fmt(sec, 3), '', '', '']),
  ];
}

export async function benchIceberg(events = Number(process.env.BENCH_ICEBERG_EVENTS ?? 200_000), roundCount = Number(process.env.BENCH_ICEBERG_ROUNDS ?? 9)): Promise<string[][]> {
  const data = bodies(events);
  const env = { P_FLUSH_INTERVAL: '2s', P_ICEBERG_INTERVAL: INTERVAL, P_COMPACTION_INTERVAL: '1h' };
  // Both services are profiled (the same sampling overhead on both sides); the on one's profile gives the publisher's share.
  const profileDir = await fs.mkdtemp(path.join(os.tmpdir(), 'bench-iceberg-prof-'));
  const prof = ['--cpu-prof', `--cpu-prof-dir=${profileDir}`];
  const on = await startService({ ...env, P_ICEBERG: 'on' }, prof);
  const off = await startService({ ...env, P_ICEBERG: 'off' }, prof);
  let stopped = false;
  try {
    const runs = await rounds(on, off, data, roundCount);
    const files = await lakeFiles(on.dataDir);
    const made = await commits(on.port);
    const out = [...cpuRows(events, runs), [], ['lake files/commit (local disk)', `${fmt(files / made, 1)} (${files} in ${made} commits)`]];
    if (process.env.BENCH_ICEBERG_READERS !== 'off') {
      const [lagSec, pollSec] = await lag(on, data);
      out.push(['ack → visible in pyiceberg', `${fmt(lagSec, 1)} s (poll ≤ ${fmt(pollSec, 1)} s; flush 2 s + interval ${INTERVAL})`]);
      const beside = await sparkBeside(on, 'bench_iceberg_lag');
      out.push([], ['query (same rows checked)', 'our SQL ms (warm)', 'Spark local ms (warm)', 'Spark first run ms'], ...beside);
    }
    // The profile is written when the service exits.
    await on.stop();
    await off.stop();
    stopped = true;
    const warmup = Math.ceil(data.length / 4) * BATCH;
    out.push([], ...(await profileRows(profileDir, on.pid, events * roundCount + warmup + (process.env.BENCH_ICEBERG_READERS !== 'off' ? events : 0), runs.on)));
    if (process.env.BENCH_ICEBERG_S3 !== 'off') out.push([], ...(await icebergRequests(data[0])));
    return out;
  } finally {
    if (!stopped) {
      await on.stop();
      await off.stop();
    }
    if (!process.env.BENCH_ICEBERG_KEEP_PROFILE) await fs.rm(profileDir, { recursive: true, force: true });
    else console.error('profiles kept in', profileDir);
  }
}

runIfMain(import.meta.filename, () => benchIceberg());
