import { spawn, type ChildProcess } from 'node:child_process';
import * as fsSync from 'node:fs';
import * as fs from 'node:fs/promises';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { buildService } from '../scripts/build-service.ts';
import { listeningLine, type ListeningLine } from '../test/helpers/server.ts';

import { prepareRequest, RawConnection } from './loadgen.ts';

export { listFiles } from '../test/helpers/files.ts';

export const root = path.resolve(import.meta.dirname, '..');
export const BENCH_KEY = 'bench-admin-key';

export interface BenchServer {
  /** The ports the service bound (its `listening` line): gRPC and PostgreSQL when asked for. */
  port: number;
  grpcPort?: number;
  pgPort?: number;
  dataDir: string;
  pid: number;
  stop: () => Promise<void>;
}

/**
 * CPU seconds and resident memory of a process and all its descendants (ingest threads are threads of
 * the process; query worker child processes are separate processes), read from /proc (Linux only;
 * zeros elsewhere). A descendant that exits between samples loses its last CPU slice; the service's
 * query workers live as long as it does. With `threads`, CPU seconds per thread name of the process.
 */
export async function treeUsage(pid: number, threads = false): Promise<{ cpuSec: number; rssBytes: number; pssBytes: number; mainRssBytes: number; processes: number; byThread?: Map<string, number> }> {
  const u = treeUsageSync(pid, threads);
  return { ...u, pssBytes: pssOf(u.pids) };
}

/**
 * PSS of these processes: each shared page (node's binary, DuckDB's library: ~70 MB mapped by every
 * process of the tree) counted once over the tree, where summing RSS counts it once per process.
 * Reading smaps_rollup walks the process's page tables (~6 ms for the service's main process, whose
 * virtual mappings are large), in the load generator's process: the watcher reads it sparingly.
 */
function pssOf(pids: number[]): number {
  let pss = 0;
  for (const p of pids) pss += Number(/^Pss:\s+(\d+) kB/m.exec(readProc(`/proc/${p}/smaps_rollup`))?.[1] ?? 0) * 1024;
  return pss;
}

// Synchronous reads: the sampler runs in the load generator's process every 100 ms, and promise-based
// reads of ~60 small /proc files per sample cost the load generator (so the service) measurably more.
const readProc = (file: string) => {
  try {
    return fsSync.readFileSync(file, 'utf8');
  } catch {
    return '';
  }
};

function treeUsageSync(pid: number, threads: boolean) {
  const ticks = 100; // USER_HZ: 100 on every Linux platform Node supports
  const page = 4096;
  const statOf = (file: string) => {
    const text = readProc(file);
    const close = text.lastIndexOf(')');
    if (close < 0) return undefined;
    const f = text.slice(close + 2).split(' ');
    // Fields after the command, numbered from 1 as in proc(5): utime(14) stime(15) rss(24).
    return { comm: text.slice(text.indexOf('(') + 1, close), cpu: (Number(f[11]) + Number(f[12])) / ticks, rss: Number(f[21]) * page };
  };
  let cpuSec = 0;
  let rssBytes = 0;
  let mainRssBytes = 0;
  const pids: number[] = [];
  const byThread = threads ? new Map<string, number>() : undefined;
  const visit = (p: number): void => {
    const s = statOf(`/proc/${p}/stat`);
    if (!s) return;
    pids.push(p);
    cpuSec += s.cpu;
    rssBytes += s.rss;
    if (p === pid) mainRssBytes = s.rss;
    let tids: string[] = [];
    try {
      tids = fsSync.readdirSync(`/proc/${p}/task`);
    } catch {
      // exited meanwhile
    }
    const kids: number[] = [];
    for (const tid of tids) {
      for (const k of readProc(`/proc/${p}/task/${tid}/children`).split(' ')) if (k.trim()) kids.push(Number(k));
      if (byThread && p === pid) {
        const t = statOf(`/proc/${p}/task/${tid}/stat`);
        if (t) byThread.set(`${t.comm}/${tid}`, t.cpu);
      }
    }
    if (byThread && p !== pid) byThread.set(`child ${s.comm}`, (byThread.get(`child ${s.comm}`) ?? 0) + s.cpu);
    for (const k of kids) visit(k);
  };
  visit(pid);
  return { cpuSec, rssBytes, mainRssBytes, processes: pids.length, pids, byThread };
}

/** Samples `treeUsage` every `everyMs` while running; `stop()` gives the peaks and the CPU used since `start`. */
export function watchTree(pid: number, everyMs = 100) {
  let peakTree = 0;
  let peakPss = 0;
  let peakMain = 0;
  let first: number | undefined;
  let lastPss = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      const u = treeUsageSync(pid, false);
      first ??= u.cpuSec;
      // PSS ≤ RSS, and the tree's peak PSS comes with a peak of its RSS: read it (~6 ms of the load
      // generator's CPU each time) at a new peak of the RSS, at most twice a second, and once at the end.
      if (u.rssBytes > peakTree && performance.now() - lastPss >= 500) {
        lastPss = performance.now();
        peakPss = Math.max(peakPss, pssOf(u.pids));
      }
      peakTree = Math.max(peakTree, u.rssBytes);
      peakMain = Math.max(peakMain, u.mainRssBytes);
      await new Promise((r) => setTimeout(r, everyMs));
    }
  })();
  const before = treeUsage(pid, true);
  return {
    stop: async () => {
      running = false;
      await loop;
      const u = await treeUsage(pid, true);
      const b = (await before).byThread!;
      const byThread = new Map([...u.byThread!].map(([k, v]) => [k, v - (b.get(k) ?? 0)]));
      return { cpuSec: u.cpuSec - (first ?? u.cpuSec), peakTreeRss: Math.max(peakTree, u.rssBytes), peakTreePss: Math.max(peakPss, u.pssBytes), peakMainRss: Math.max(peakMain, u.mainRssBytes), byThread };
    },
  };
}

/** CPU seconds per thread (from `watchTree`), busiest first, leaving out threads under 0.05 s. */
export const threadCpu = (byThread: Map<string, number>) =>
  [...byThread]
    .filter(([, s]) => s >= 0.05)
    .sort((a, b) => b[1] - a[1])
    .map(([k, s]) => `${k} ${s.toFixed(2)}`)
    .join(', ');

/** Waits until the service tree uses under 5% of a core over half a second (start-up work done), at most `maxMs`. */
export async function settle(pid: number, maxMs = 20_000): Promise<void> {
  const deadline = Date.now() + maxMs;
  let last = (await treeUsage(pid)).cpuSec;
  while (Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 500));
    const now = (await treeUsage(pid)).cpuSec;
    if (now - last < 0.025) return;
    last = now;
  }
}

let built: Promise<void> | undefined;

export async function startService(
  env: Record<string, string> = {},
  nodeArgs: string[] = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean),
  /** A command that execs the rest (a memory cgroup's `wrap`, test/helpers/cgroup.ts): its pid becomes the service's. */
  wrap: string[] = [],
): Promise<BenchServer> {
  // The service as `npm start` runs it: the build in dist/, made fresh once per benchmark run.
  await (built ??= buildService());
  const dataDir = env.P_DATA_DIR ?? (await fs.mkdtemp(path.join(os.tmpdir(), 'lakehouse-bench-')));
  const command = [...wrap, process.execPath, ...nodeArgs, path.join(root, 'dist/main.js')];
  const child = spawn(command[0], command.slice(1), {
    cwd: root,
    // Port 0: the service binds a free port and reports it in its `listening` line (no port picked here
    // and bound later, which another process could take in between). The extra front doors' fixed
    // default ports would collide between benchmark services: off unless asked for (`127.0.0.1:0` too).
    env: { ...process.env, P_ADDR: '127.0.0.1:0', P_DATA_DIR: dataDir, P_API_KEYS: BENCH_KEY, P_LOG_LEVEL: 'warn', P_OTLP_GRPC_ADDR: 'off', P_PG_ADDR: 'off', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const ports = await announcedPorts(child);
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) throw new Error(`service exited at start (code ${child.exitCode}); env ${JSON.stringify(env)}`);
    try {
      const res = await fetch(`http://127.0.0.1:${ports.port}/api/v1/liveness`);
      if (res.ok) break;
    } catch {
      /* starting */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    port: ports.port,
    ...(ports.grpcPort ? { grpcPort: ports.grpcPort } : {}),
    ...(ports.pgPort ? { pgPort: ports.pgPort } : {}),
    dataDir,
    pid: child.pid!,
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/**
 * The ports the service bound, from its `listening` line (logged at every level). Its stdout is read to
 * the end (shown when BENCH_SERVICE_LOG is set), but kept only until that line is out.
 */
export function announcedPorts(child: ChildProcess): Promise<ListeningLine> {
  return new Promise((resolve, reject) => {
    let output = '';
    let found = false;
    child.stdout!.on('data', (d: Buffer) => {
      if (process.env.BENCH_SERVICE_LOG) process.stdout.write(d);
      if (found) return;
      output += d.toString();
      const ports = listeningLine(output);
      if (ports) {
        found = true;
        output = '';
        resolve(ports);
      }
    });
    child.once('exit', (code) => {
      if (!found) reject(new Error(`service exited at start (code ${code}) before its listening line`));
    });
  });
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

/** A lean HTTP client (node:http with keep-alive) so the load generator steals little CPU. */
export function post(port: number, p: string, body: Buffer | string, headers: Record<string, string> = {}): Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: p, method: 'POST', agent, headers: { 'x-api-key': BENCH_KEY, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString(), headers: res.headers }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

export async function api(port: number, method: string, p: string, body?: unknown): Promise<unknown> {
  const res = await fetch(`http://127.0.0.1:${port}${p}`, {
    method,
    headers: { 'x-api-key': BENCH_KEY, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${p} → ${res.status}: ${text}`);
  return text ? JSON.parse(text) : undefined;
}

/**
 * Sends every body with `clients` concurrent senders (bench/loadgen.ts: one keep-alive connection
 * each, requests prebuilt before the clock starts); returns elapsed seconds.
 */
export async function sendAll(port: number, p: string, bodies: (Buffer | string)[], clients: number, headers: Record<string, string> = {}): Promise<number> {
  const all = { 'x-api-key': BENCH_KEY, 'content-type': 'application/json', ...headers };
  const requests = bodies.map((b) => prepareRequest(port, p, b, all));
  const conns = await Promise.all(Array.from({ length: clients }, () => RawConnection.open(port)));
  let next = 0;
  const started = performance.now();
  try {
    await Promise.all(
      conns.map(async (conn) => {
        while (next < requests.length) {
          const res = await conn.send(requests[next++]);
          if (res.status >= 300) throw new Error(`ingest failed ${res.status}: ${res.body.toString()}`);
        }
      }),
    );
    return (performance.now() - started) / 1000;
  } finally {
    for (const c of conns) c.close();
  }
}

export async function waitFlushed(port: number, dataset: string, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const stats = (await api(port, 'GET', `/api/v1/logstream/${dataset}/stats`)) as { wal: { count: number } };
    if (stats.wal.count === 0) return;
    if (Date.now() > deadline) throw new Error(`${dataset} not flushed in time`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Deterministic PRNG so every run measures the same data. */
export function rng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

/**
 * Runs one benchmark part when its file is the script node was started with (`npx tsx bench/<part>.ts`),
 * printing its rows; `bench/run.ts` imports the same file without running it.
 */
export function runIfMain(filename: string, part: () => Promise<string[][]>): void {
  if (!process.argv[1] || path.resolve(process.argv[1]) !== path.resolve(filename)) return;
  part().then(
    (rows) => {
      for (const r of rows) console.log(r.join(' | '));
    },
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
