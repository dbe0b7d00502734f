import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { freePort, tempDir } from './server.ts';

const root = path.resolve(import.meta.dirname, '../..');

/** The Prometheus binary, installed by the project's script when missing; undefined if impossible. */
export function prometheusBinary(): string | undefined {
  try {
    return execFileSync('bash', [path.join(root, 'scripts/ensure-prometheus.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], timeout: 300_000 }).trim();
  } catch {
    return undefined;
  }
}

/**
 * A real Prometheus server on loopback that scrapes itself every second and remote-writes to
 * `remoteWriteUrl` with `Authorization: Bearer <bearer>`: the form Debian's 2.42 honours (it ignores
 * remote_write.headers).
 */
export async function startPrometheus(binary: string, opts: { remoteWriteUrl: string; bearer: string }): Promise<{ stop: () => Promise<void>; logs: () => string }> {
  const dir = await tempDir('prometheus-');
  const port = await freePort();
  const config = `
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: prometheus
    static_configs:
      - targets: ['127.0.0.1:${port}']
remote_write:
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
  await fs.writeFile(path.join(dir, 'prometheus.yml'), config);
  const child = spawn(
    binary,
    [`--config.file=${path.join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${path.join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout!.on('data', (d) => (output += d.toString()));
  child.stderr!.on('data', (d) => (output += d.toString()));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  return {
    logs: () => output,
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGKILL');
      await exited;
      await fs.rm(dir, { recursive: true, force: true });
    },
  };
}
