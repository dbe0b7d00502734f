import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { waitFor } from './wait.ts';

const cache = process.env.LAKEHOUSE_TEST_CACHE ?? path.join(os.homedir(), '.cache/lakehouse-test');
const DIR = path.join(cache, 'jaeger-1.76.0');

function provided(file: string): string {
  if (!fs.existsSync(file)) throw new Error(`${file} is missing: run bash scripts/test-setup.d/70-jaeger.sh (npm test runs it first)`);
  return file;
}
export const telemetrygenBinary = () => provided(path.join(DIR, 'telemetrygen'));

export interface Jaeger {
  /** Base URL of the query service (`/api/*`, `/api/v3/*`). */
  queryUrl: string;
  /** The OTLP/HTTP receiver's base URL (`/v1/traces`). */
  otlpUrl: string;
  logs: () => string;
  stop: () => Promise<void>;
}

/**
 * Jaeger v1.76 all-in-one with its in-memory store, every listener on port 0; the ports it bound are read
 * from its start log (the OTLP receiver's `endpoint`, the query server's `http_addr`), so no port is picked
 * and released before it binds. The query HTTP address is spelled `[::ffff:127.0.0.1]:0` because Jaeger
 * refuses its gRPC and HTTP query addresses being the same text (both `127.0.0.1:0`).
 */
export async function startJaeger(): Promise<Jaeger> {
  const any = '127.0.0.1:0';
  const args = [
    `--admin.http.host-port=${any}`,
    `--collector.grpc-server.host-port=${any}`,
    `--collector.http-server.host-port=${any}`,
    `--collector.otlp.grpc.host-port=${any}`,
    `--collector.otlp.http.host-port=${any}`,
    `--query.grpc-server.host-port=${any}`,
    '--query.http-server.host-port=[::ffff:127.0.0.1]:0',
  ];
  const child = spawn(provided(path.join(DIR, 'all-in-one')), args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, SPAN_STORAGE_TYPE: 'memory' } });
  let output = '';
  child.stdout.on('data', (d) => (output += d.toString()));
  child.stderr.on('data', (d) => (output += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const found = (re: RegExp) => re.exec(output)?.[1];
  const [otlp, query] = await waitFor(
    `Jaeger's listening log lines:\n${output}`,
    async () => {
      if (child.exitCode !== null) throw new Error(`Jaeger exited: ${output}`);
      const o = found(/"msg":"Starting HTTP server","endpoint":"(127\.0\.0\.1:\d+)"/);
      const q = found(/"msg":"Query server started","http_addr":"(127\.0\.0\.1:\d+)"/);
      return o && q ? [o, q] : undefined;
    },
    60_000,
  );
  const jaeger: Jaeger = {
    queryUrl: `http://${query}`,
    otlpUrl: `http://${otlp}`,
    logs: () => output,
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
  await waitFor('Jaeger query API', async () => (await fetch(`${jaeger.queryUrl}/api/services`)).ok, 60_000);
  return jaeger;
}

/**
 * An OTLP/HTTP endpoint on port 0 that sends every request's exact body to each target in turn, so both
 * stores get the same spans (same ids, same times). It answers 200 once every target answered 2xx.
 */
export async function startFanOut(targets: { url: string; headers?: Record<string, string> }[]): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const body = Buffer.concat(chunks);
      const pass: Record<string, string> = {};
      for (const h of ['content-type', 'content-encoding']) if (typeof req.headers[h] === 'string') pass[h] = req.headers[h];
      try {
        for (const t of targets) {
          const r = await fetch(`${t.url}${req.url}`, { method: 'POST', body, headers: { ...pass, ...t.headers } });
          if (!r.ok) throw new Error(`${t.url}${req.url}: ${r.status} ${await r.text()}`);
          await r.arrayBuffer();
        }
        res.writeHead(200, { 'content-type': pass['content-type'] ?? 'application/json' }).end(pass['content-type']?.includes('json') ? '{}' : '');
      } catch (err) {
        res.writeHead(502).end(String(err));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}
