import { spawn } from 'node:child_process';
import { findBinary } from './binaries.ts';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { tempDir } from './server.ts';
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

/** Prometheus' log line with the address it listens on (port 0 made real). */
const LISTENING = /msg="Listening on" address=127\.0\.0\.1:(\d+)/;

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
  const config = path.join(dir, 'prometheus.yml');
  // Port 0, never a port picked here and bound later: Prometheus logs the address it got ("Listening
  // on"), and the configuration that names it (the self-scrape) is loaded after, with a SIGHUP.
  await fs.writeFile(config, 'global:\n  scrape_interval: 1s\n');
  const child = spawn(binary, [`--config.file=${config}`, `--storage.tsdb.path=${path.join(dir, 'data')}`, '--web.listen-address=127.0.0.1:0'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (d) => (output += d.toString()));
  child.stderr!.on('data', (d) => (output += d.toString()));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
    await fs.rm(dir, { recursive: true, force: true });
  };
  const gone = () => child.exitCode !== null || child.signalCode !== null;
  const until = async (what: string, done: () => boolean | Promise<boolean>) => {
    const deadline = Date.now() + 30_000;
    while (!(await done())) {
      if (gone() || Date.now() > deadline) {
        await stop();
        throw new Error(`prometheus: ${gone() ? 'exited' : 'timed out'} waiting for ${what}:\n${output.slice(-3000)}`);
      }
      await sleep(100);
    }
  };
  await until('its listening address', () => LISTENING.test(output));
  const port = Number(LISTENING.exec(output)![1]);
  const url = `http://127.0.0.1:${port}`;
  // Ready: its first configuration is loaded, so the next load counted is the one asked for here.
  await until('ready', () => fetch(`${url}/-/ready`).then((r) => r.ok, () => false));
  await fs.writeFile(config, prometheusConfig(port, opts));
  const loads = () => output.split('Completed loading of configuration file').length;
  const before = loads();
  child.kill('SIGHUP');
  await until('the configuration naming its port', () => loads() > before);
  return { url, stop, logs: () => output };
}
