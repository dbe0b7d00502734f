import { spawn } from 'node:child_process';
import * as fs from 'node:fs/promises';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { freePort } from '../test/helpers/server.ts';

export { listFiles } from '../test/helpers/files.ts';

export const root = path.resolve(import.meta.dirname, '..');
export const BENCH_KEY = 'bench-admin-key';

export interface BenchServer {
  port: number;
  dataDir: string;
  stop: () => Promise<void>;
}

export async function startService(env: Record<string, string> = {}): Promise<BenchServer> {
  const dataDir = env.P_DATA_DIR ?? (await fs.mkdtemp(path.join(os.tmpdir(), 'lakehouse-bench-')));
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'src/main.ts')], {
    cwd: root,
    env: { ...process.env, P_ADDR: `127.0.0.1:${port}`, P_DATA_DIR: dataDir, P_API_KEYS: BENCH_KEY, P_LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', process.env.BENCH_SERVICE_LOG ? 'inherit' : 'ignore', 'inherit'],
  });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) throw new Error(`service exited at start (code ${child.exitCode}); env ${JSON.stringify(env)}`);
    try {
      const res = await fetch(`http://127.0.0.1:${port}/api/v1/liveness`);
      if (res.ok) break;
    } catch {
      /* starting */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    port,
    dataDir,
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

/** A lean HTTP client (node:http with keep-alive) so the load generator steals little CPU. */
export function post(port: number, p: string, body: Buffer | string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: p, method: 'POST', agent, headers: { 'x-api-key': BENCH_KEY, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
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

/** Sends every body with `clients` concurrent senders; returns elapsed seconds. */
export async function sendAll(port: number, p: string, bodies: (Buffer | string)[], clients: number, headers: Record<string, string> = {}): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < bodies.length) {
        const body = bodies[next++];
        const res = await post(port, p, body, headers);
        if (res.status >= 300) throw new Error(`ingest failed ${res.status}: ${res.body}`);
      }
    }),
  );
  return (performance.now() - started) / 1000;
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
