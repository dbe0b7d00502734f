import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { sleep } from './wait.ts';

const cache = process.env.LAKEHOUSE_TEST_CACHE ?? path.join(os.homedir(), '.cache/lakehouse-test');

/** A program the test setup (scripts/test-setup.d) provides; a missing one fails the test loudly. */
function provided(file: string, setup: string): string {
  if (!fs.existsSync(file)) throw new Error(`${file} is missing: run bash ${setup} (npm test runs it first)`);
  return file;
}

export const otelcolBinary = () => provided(path.join(cache, 'otelcol-0.162.0/otelcol'), 'scripts/test-setup.d/40-otelcol.sh');
/** A Collector with the OTLP receiver and the contrib `prometheus` exporter. */
export const otelcolPrometheusBinary = () => provided(path.join(cache, 'otelcol-prometheus-0.165.0/otelcol'), 'scripts/test-setup.d/41-otelcol-prometheus.sh');

export interface Process {
  logs: () => string;
  stop: () => Promise<void>;
}

function run(bin: string, args: string[], dir: string): Process {
  const child: ChildProcess = spawn(bin, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (d) => (output += d.toString()));
  child.stderr!.on('data', (d) => (output += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    logs: () => output,
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Resolves once something accepts TCP connections on 127.0.0.1:`port`. */
export async function listening(port: number, what: string, logs: () => string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1');
      s.once('connect', () => (s.destroy(), resolve(true)));
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`${what} did not listen on ${port}:\n${logs()}`);
    await sleep(100);
  }
}

/** Starts the Collector with `config` (YAML text) in `dir`; resolves once its OTLP/gRPC receiver on `receiverPort` listens. */
export async function startCollector(config: string, dir: string, receiverPort: number, binary = otelcolBinary): Promise<Process> {
  const file = path.join(dir, 'otelcol.yaml');
  await fsp.writeFile(file, config);
  const p = run(binary(), [`--config=${file}`], dir);
  await listening(receiverPort, 'the OpenTelemetry Collector', p.logs);
  return p;
}

/** Debian's nginx (installed by the test setup), run in the foreground from `dir` with `conf` as its http{} content. */
export async function startNginx(httpConf: string, dir: string, port: number): Promise<Process> {
  const bin = ['/usr/sbin/nginx', '/usr/bin/nginx'].find((b) => fs.existsSync(b));
  if (!bin) throw new Error('nginx is missing: run bash scripts/test-setup.d/50-nginx.sh (npm test runs it first)');
  const conf = `
daemon off;
master_process off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log info;
events { worker_connections 256; }
http {
  access_log ${dir}/access.log;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
${httpConf}
}
`;
  const file = path.join(dir, 'nginx.conf');
  await fsp.writeFile(file, conf);
  const p = run(bin, ['-p', dir, '-c', file], dir);
  const logs = () => `${p.logs()}\n${fs.existsSync(`${dir}/error.log`) ? fs.readFileSync(`${dir}/error.log`, 'utf8') : ''}`;
  await listening(port, 'nginx', logs);
  return { logs, stop: p.stop };
}
