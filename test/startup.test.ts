import { execFile } from 'node:child_process';
import * as fs from 'node:fs/promises';
import * as net from 'node:net';
import * as path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { RawOtlpClient } from './helpers/otlpGrpc.ts';
import { ANY_PORT, startServer, tempDir, type TestServer } from './helpers/server.ts';

/**
 * Start-up as an operator meets it: every listener on port 0 reports the port it got, a port already
 * taken stops the service with one line naming the setting, and an install without Go (no PromQL
 * engine built) starts and serves everything but PromQL, which answers 503 saying what to do.
 */

const root = path.resolve(import.meta.dirname, '..');
const run = promisify(execFile);
const servers: TestServer[] = [];
afterAll(async () => {
  for (const s of servers) await s.kill();
});

/** A listener holding a port on 127.0.0.1 (the kernel's choice) until closed. */
async function holdPort(): Promise<{ port: number; close: () => void }> {
  const taken = net.createServer();
  await new Promise<void>((r) => taken.listen(0, '127.0.0.1', () => r()));
  return { port: (taken.address() as net.AddressInfo).port, close: () => taken.close() };
}

describe('ports', () => {
  it('binds port 0 for all three listeners and reports the ports it got, each answering its protocol', async () => {
    const server = await startServer({ env: { P_OTLP_GRPC_ADDR: ANY_PORT, P_PG_ADDR: ANY_PORT } });
    servers.push(server);
    const line = server.logs().split('\n').find((l) => l.includes('"msg":"listening"'))!;
    const reported = JSON.parse(line) as { port: number; grpcPort: number; pgPort: number; console: string };
    expect(new Set([reported.port, reported.grpcPort, reported.pgPort]).size).toBe(3);
    expect(reported.console).toBe(`http://127.0.0.1:${reported.port}/`);
    // HTTP on the reported port (the helper found it there too).
    expect(server.url).toBe(`http://127.0.0.1:${reported.port}`);
    expect((await fetch(`${server.url}/api/v1/liveness`)).status).toBe(200);
    // gRPC's health service on its reported port.
    const grpc = new RawOtlpClient(`127.0.0.1:${reported.grpcPort}`);
    try {
      expect((await grpc.call('health', Buffer.alloc(0))).code).toBe(0);
    } finally {
      grpc.close();
    }
    // A PostgreSQL client on its reported port.
    const client = new pg.Client({ host: '127.0.0.1', port: reported.pgPort, user: 'u', password: server.apiKey, database: 'd' });
    await client.connect();
    try {
      expect((await client.query('SELECT 41 + 1 AS x')).rows).toEqual([{ x: 42 }]);
    } finally {
      await client.end();
    }
  });

  it.each([
    ['P_ADDR', 'HTTP', false],
    ['P_OTLP_GRPC_ADDR', 'OTLP/gRPC', true],
    ['P_PG_ADDR', 'PostgreSQL clients', true],
  ])('a taken port of %s stops the service with one line naming the setting', async (setting, door, canTurnOff) => {
    const taken = await holdPort();
    try {
      const failed = await startServer({ env: { [setting]: `127.0.0.1:${taken.port}` } }).then(
        (s) => (servers.push(s), ''),
        (err: Error) => err.message,
      );
      const errors = failed.split('\n').filter((l) => l.includes('"level":"error"'));
      expect(errors, failed).toHaveLength(1);
      const entry = JSON.parse(errors[0]) as Record<string, unknown>;
      expect(entry.msg).toBe(`cannot listen for ${door} on 127.0.0.1:${taken.port} (${setting}): EADDRINUSE: address already in use 127.0.0.1:${taken.port}; ${canTurnOff ? `set ${setting} to a free host:port (port 0: any), or ${setting}=off` : `set ${setting} to a free host:port (port 0: any)`}`);
      // No stack, no raw Node or gRPC wording.
      expect(entry.error).toBeUndefined();
      expect(failed).not.toMatch(/Unhandled 'error' event|No address added/);
    } finally {
      taken.close();
    }
  });
});

describe('an install without Go', () => {
  it('the build says PromQL is left out, in one line, and succeeds; a required build fails with the same words', async () => {
    // This checkout's build script and Go sources in a tree with no engine built, and no Go to be found.
    const tree = await tempDir('lakehouse-nogo-');
    await fs.mkdir(path.join(tree, 'scripts'));
    await fs.copyFile(path.join(root, 'scripts/build-promql.ts'), path.join(tree, 'scripts/build-promql.ts'));
    await fs.symlink(path.join(root, 'promql'), path.join(tree, 'promql'));
    const env = { ...process.env, GO: path.join(tree, 'no-go-here') };
    const script = path.join(tree, 'scripts/build-promql.ts');
    const optional = await run(process.execPath, ['--import', 'tsx', script, '--optional'], { cwd: root, env });
    expect(optional.stdout.trim().split('\n')).toEqual([expect.stringMatching(/^Go not found .*the service runs without PromQL \(its endpoints answer 503\); install Go .*npm run build:promql/)]);
    await expect(fs.stat(path.join(tree, 'promql-dist/promql'))).rejects.toThrow(/ENOENT/);
    await expect(run(process.execPath, ['--import', 'tsx', script], { cwd: root, env })).rejects.toMatchObject({ code: 1, stderr: expect.stringMatching(/^Go not found/) });
    await fs.rm(tree, { recursive: true, force: true });
  });

  it('the service starts and serves ingest and SQL; PromQL answers 503 saying how to add it', async () => {
    // The service as built (dist/) in a tree without promql-dist/: what `npm start` leaves without Go.
    const tree = await tempDir('lakehouse-nogo-');
    await fs.cp(path.join(root, 'dist'), path.join(tree, 'dist'), { recursive: true });
    for (const f of ['node_modules', 'package.json']) await fs.symlink(path.join(root, f), path.join(tree, f));
    const server = await startServer({ entry: path.join(tree, 'dist/main.js') });
    servers.push(server);
    expect((await server.request('/api/v1/logstream/app', { method: 'PUT' })).status).toBe(200);
    expect((await server.request('/api/v1/logstream/app', { method: 'POST', json: [{ msg: 'hello' }] })).status).toBe(200);
    const sql = await server.request('/api/v1/query', { method: 'POST', json: { query: 'SELECT msg FROM app', startTime: '1970-01-01T00:00:00Z', endTime: '2100-01-01T00:00:00Z' } });
    expect(await sql.json()).toEqual([{ msg: 'hello' }]);
    for (const p of ['/prometheus/app/api/v1/query?query=up', '/prometheus/app/api/v1/query_range?query=up&start=0&end=60&step=15', '/prometheus/app/api/v1/series?match[]=up']) {
      const res = await server.request(p);
      expect(res.status, p).toBe(503);
      expect(await res.json()).toEqual({ status: 'error', errorType: 'unavailable', error: expect.stringMatching(/^PromQL is not available on this install: .*Go.*npm run build:promql/) });
    }
    await fs.rm(tree, { recursive: true, force: true });
  });
});
