import { spawn } from 'node:child_process';
import { findBinary } from './binaries.ts';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { freePort, tempDir } from './server.ts';
import { sleep } from './wait.ts';

/**
 * Debian's Prometheus, as scripts/test-setup.d/30-prometheus.sh installed it; throws, saying what to run,
 * when it is absent. Tests install nothing themselves.
 */
export function prometheusBinary(): string {
  return findBinary('prometheus');
}

export interface PrometheusOptions {
  remoteWriteUrl: string;
  /** Sent as `Authorization: Bearer <bearer>`: the form Debian's 2.42 honours (it ignores remote_write.headers). */
  bearer: string;
  /** Also scrape the service's `/metrics` (job `lakehouse`) at this `host:port`, with the same key. */
  scrapeService?: string;
}

export interface RunningPrometheus {
  /** Where its own web UI/API listens (loopback, a free port); it scrapes itself there. */
  url: string;
  stop: () => Promise<void>;
  logs: () => string;
}

/**
 * The configuration the remote-write tests rely on. Everything runs every second so that the first
 * remote write arrives a few seconds after start instead of after the defaults' minute: scrape and
 * evaluation intervals, the queue's batch deadline (default 5s), the backoffs (a receiver that is not
 * up yet should not push retries out to 5s), and the metadata send interval (default 1m).
 */
export function prometheusConfig(port: number, opts: PrometheusOptions): string {
  return `
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: prometheus
    static_configs:
      - targets: ['127.0.0.1:${port}']
${
  opts.scrapeService
    ? `  - job_name: lakehouse
    metrics_path: /metrics
    authorization:
      credentials: ${JSON.stringify(opts.bearer)}
    static_configs:
      - targets: [${JSON.stringify(opts.scrapeService)}]
`
    : ''
}remote_write:
  - url: ${JSON.stringify(opts.remoteWriteUrl)}
    authorization:
      credentials: ${JSON.stringify(opts.bearer)}
    queue_config:
      batch_send_deadline: 1s
      min_backoff: 100ms
      max_backoff: 1s
    metadata_config:
      send_interval: 1s
`;
}

/**
 * A real Prometheus server on loopback that scrapes itself every second and remote-writes to
 * `remoteWriteUrl`; its config and TSDB live in a temp dir removed on stop. Resolves once
 * Prometheus reports ready. Without a binary argument it is found on the PATH (installed by
 * scripts/test-setup.d/30-prometheus.sh), and a missing one throws.
 */
export async function startPrometheus(opts: PrometheusOptions): Promise<RunningPrometheus>;
export async function startPrometheus(binary: string, opts: PrometheusOptions): Promise<RunningPrometheus>;
export async function startPrometheus(a: string | PrometheusOptions, b?: PrometheusOptions): Promise<RunningPrometheus> {
  const binary = typeof a === 'string' ? a : prometheusBinary();
  const opts = typeof a === 'string' ? b! : a;
  const dir = await tempDir('prometheus-');
  const port = await freePort();
  await fs.writeFile(path.join(dir, 'prometheus.yml'), prometheusConfig(port, opts));
  const child = spawn(
    binary,
    [`--config.file=${path.join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${path.join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout!.on('data', (d) => (output += d.toString()));
  child.stderr!.on('data', (d) => (output += d.toString()));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
    await fs.rm(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      await stop();
      throw new Error(`prometheus exited during startup:\n${output.slice(-3000)}`);
    }
    const ready = await fetch(`${url}/-/ready`).then((r) => r.ok, () => false);
    if (ready) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`prometheus was not ready within 30s:\n${output.slice(-3000)}`);
    }
    await sleep(100);
  }
  return { url, stop, logs: () => output };
}
