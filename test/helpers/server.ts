import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs/promises';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { sleep } from './wait.ts';

const root = path.resolve(import.meta.dirname, '../..');

export const ADMIN_KEY = 'test-admin-key-0123456789';

/**
 * A port free at this instant, for a client that must bind its own listener (and cannot take port 0 and
 * say which it got). Never for the service: it binds port 0 and reports its ports (startServer), since
 * a port picked here and bound later can be taken in between.
 */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

/** Ask for a front door on any free port (startServer reports which): `env: { P_PG_ADDR: ANY_PORT }`. */
export const ANY_PORT = '127.0.0.1:0';

export async function tempDir(prefix = 'lakehouse-test-'): Promise<string> {
  return fs.mkdtemp(path.join(os.tmpdir(), prefix));
}

export interface TestServer {
  url: string;
  /** The ports the service bound (its `listening` log line); gRPC and PostgreSQL only when on. */
  port: number;
  grpcPort?: number;
  pgPort?: number;
  dataDir: string;
  apiKey: string;
  logs: () => string;
  /** Fetch with the admin key (unless headers override it). */
  request: (p: string, init?: RequestInit & { json?: unknown }) => Promise<Response>;
  /** SIGTERM and wait for exit (graceful: flushes). */
  stop: () => Promise<void>;
  /** SIGKILL and wait for exit. */
  kill: () => Promise<void>;
  /** Resolves when the process has exited by itself (e.g. at a P_FAILPOINT). */
  exited: Promise<void>;
  env: Record<string, string>;
}

/**
 * Starts the real service (`dist/main.js`, built by the global setup, as `npm start` runs it) as a child process and waits for liveness.
 * Every test talks to it over HTTP, exactly as a client would.
 */
export async function startServer(opts: { env?: Record<string, string>; dataDir?: string; wrap?: string[]; entry?: string } = {}): Promise<TestServer> {
  const dataDir = opts.dataDir ?? (await tempDir());
  const env: Record<string, string> = {
    // Port 0: the service binds a free port and reports it, so parallel servers never race for one.
    P_ADDR: ANY_PORT,
    P_DATA_DIR: dataDir,
    P_API_KEYS: `${ADMIN_KEY}:admin`,
    P_LOG_LEVEL: 'info',
    // One warm query worker per test server (the default is none, started on first use and let go after
    // P_QUERY_WORKER_IDLE): most tests query at once, and test/idleRelease.test.ts covers the default.
    P_QUERY_WARM_WORKERS: '1',
    // The extra front doors (OTLP/gRPC, PostgreSQL) have fixed default ports that parallel test servers
    // would fight over: off unless a test asks for one (ANY_PORT; its port is then grpcPort / pgPort).
    P_OTLP_GRPC_ADDR: 'off',
    P_PG_ADDR: 'off',
    ...opts.env,
  };
  // `entry`: the service of another tree (test/startup.test.ts: one without the PromQL engine).
  // `wrap`: a command the service is started through (e.g. one that enters a memory cgroup first).
  const [command, ...args] = [...(opts.wrap ?? []), process.execPath, opts.entry ?? path.join(root, 'dist/main.js')];
  const child: ChildProcess = spawn(command, args, {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d) => (output += d.toString()));
  child.stderr!.on('data', (d) => (output += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // Generous: a cold start (DuckDB, loading every dataset of a shared bucket) on a busy 2-core machine.
  const deadline = Date.now() + 60_000;
  let ports: ListeningLine | undefined;
  let url = '';
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server exited early (${child.exitCode}):\n${output}`);
    ports ??= listeningLine(output);
    url = ports ? `http://127.0.0.1:${ports.port}` : '';
    if (ports && (await live(url))) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`server did not become live:\n${output}`);
    }
    await sleep(100);
  }
  const apiKey = ADMIN_KEY;
  return {
    url,
    port: ports.port,
    ...(ports.grpcPort ? { grpcPort: ports.grpcPort } : {}),
    ...(ports.pgPort ? { pgPort: ports.pgPort } : {}),
    dataDir,
    apiKey,
    env,
    logs: () => output,
    request: (p, init = {}) => {
      const headers = new Headers(init.headers);
      if (!headers.has('x-api-key') && !headers.has('authorization')) headers.set('x-api-key', apiKey);
      let body = init.body;
      if (init.json !== undefined) {
        body = JSON.stringify(init.json);
        if (!headers.has('content-type')) headers.set('content-type', 'application/json');
      }
      return fetch(`${url}${p}`, { ...init, headers, body });
    },
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
    kill: async () => {
      if (child.exitCode === null) child.kill('SIGKILL');
      await exited;
    },
    exited,
  };
}

export interface ListeningLine {
  port: number;
  grpcPort: number | null;
  pgPort: number | null;
}

/** The service's `listening` log line (src/main.ts), once it is out: every port it bound. */
export function listeningLine(output: string): ListeningLine | undefined {
  // Whole lines only: the last piece may be a line still being written.
  for (const line of output.split('\n').slice(0, -1)) {
    if (line.includes('"msg":"listening"')) return JSON.parse(line) as ListeningLine;
  }
  return undefined;
}

async function live(url: string): Promise<boolean> {
  try {
    return (await fetch(`${url}/api/v1/liveness`)).ok;
  } catch {
    return false;
  }
}

/** Runs a query and returns the parsed JSON body, failing loudly on a non-200. */
export async function query(
  server: TestServer,
  sql: string,
  range: { startTime?: string; endTime?: string } = {},
  extra: Record<string, unknown> = {},
): Promise<Record<string, unknown>[]> {
  const res = await server.request('/api/v1/query', {
    method: 'POST',
    json: { query: sql, startTime: range.startTime ?? '1970-01-01T00:00:00Z', endTime: range.endTime ?? '2100-01-01T00:00:00Z', send_null: true, timeFormat: 'iso', ...extra },
  });
  const text = await res.text();
  if (res.status !== 200) {
    const tail = res.status >= 500 ? `\nserver log tail:\n${server.logs().split('\n').filter((l) => l.includes('"error"')).slice(-5).join('\n')}` : '';
    throw new Error(`query failed ${res.status}: ${text}${tail}`);
  }
  return JSON.parse(text) as Record<string, unknown>[];
}
