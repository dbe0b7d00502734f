import { execFile } from 'node:child_process';
import * as fs from 'node:fs/promises';
import * as net from 'node:net';
import * as path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { psql, startPgServer, type PgTestServer } from './helpers/pg.ts';
import { startServer, tempDir } from './helpers/server.ts';

/**
 * The PostgreSQL door's connection handling with the real service: TLS through SSLRequest and the
 * setting that refuses passwords over plain TCP, CancelRequest stopping a query running in a worker,
 * and a reader that stops reading mid-result.
 */

const run = promisify(execFile);
let server: PgTestServer;

beforeAll(async () => {
  const dir = await tempDir('lakehouse-pgtls-');
  const cert = path.join(dir, 'cert.pem');
  const key = path.join(dir, 'key.pem');
  await run('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=localhost']);
  server = await startPgServer({ P_PG_TLS_CERT: cert, P_PG_TLS_KEY: key, P_PG_REQUIRE_TLS: 'true' });
}, 120_000);

afterAll(async () => {
  await server?.stop();
});

const client = () => new pg.Client({ host: '127.0.0.1', port: server.pgPort, user: 'u', password: server.apiKey, database: 'd', ssl: { rejectUnauthorized: false } });

describe('start-up', () => {
  it('stops with an error naming P_PG_ADDR when the port is taken', async () => {
    const taken = net.createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', () => r()));
    const port = (taken.address() as net.AddressInfo).port;
    try {
      await expect(startServer({ env: { P_PG_ADDR: `127.0.0.1:${port}` } })).rejects.toThrow(/cannot listen for PostgreSQL clients on 127\.0\.0\.1:\d+ \(P_PG_ADDR\)/);
    } finally {
      taken.close();
    }
  });
});

describe('TLS', () => {
  it('serves psql over TLS and refuses passwords over plain TCP', async () => {
    const out = await psql(server, 'SELECT 1', { extra: ['-A', '-t'], env: { PGSSLMODE: 'require' } });
    expect(out.trim()).toBe('1');
    await expect(psql(server, 'SELECT 1', { env: { PGSSLMODE: 'disable' } })).rejects.toThrow(/only over TLS/);
  });
});

describe('CancelRequest', () => {
  it('stops the running query and leaves the connection usable', async () => {
    const c = client();
    await c.connect();
    try {
      const { processID, secretKey } = c as unknown as { processID: number; secretKey: number };
      const running = c.query('SELECT count(*) FROM range(100000000000) AS t(i) WHERE i % 7 = 3');
      const failed = running.then(
        () => undefined,
        (err: { code?: string; message: string }) => err,
      );
      // Cancel until the query has ended (a request that arrives before the query starts does nothing, as in PostgreSQL).
      for (let i = 0; i < 300; i++) {
        const packet = Buffer.alloc(16);
        packet.writeInt32BE(16, 0);
        packet.writeInt32BE(80877102, 4);
        packet.writeInt32BE(processID, 8);
        packet.writeInt32BE(secretKey, 12);
        await new Promise<void>((resolve) => {
          const s = net.connect(server.pgPort, '127.0.0.1', () => s.end(packet));
          s.on('close', () => resolve());
          s.on('error', () => resolve());
        });
        const done = await Promise.race([failed.then(() => true), new Promise((r) => setTimeout(() => r(false), 200))]);
        if (done) break;
      }
      const err = await failed;
      expect(err?.code).toBe('57014');
      expect(err?.message).toMatch(/user request/);
      expect((await c.query('SELECT 5 AS five')).rows).toEqual([{ five: 5 }]);
    } finally {
      await c.end();
    }
  });
});

// The connection limit (P_PG_MAX_CONNECTIONS) and the idle timeout (P_PG_IDLE_TIMEOUT) are the door's own:
// test/unit/pgInProcess.test.ts.

describe('a reader that stops reading', () => {
  it('gets every row once it reads again (the worker waited, nothing was cut)', async () => {
    const c = client();
    await c.connect();
    try {
      const stream = (c as unknown as { connection: { stream: net.Socket } }).connection.stream;
      const pending = c.query('SELECT range AS i, repeat(\'x\', 200) AS pad FROM range(300000)');
      stream.pause();
      await new Promise((r) => setTimeout(r, 1500));
      stream.resume();
      const r = await pending;
      expect(r.rows.length).toBe(300000);
      expect(r.rows.at(-1).i).toBe('299999');
    } finally {
      await c.end();
    }
  });
});
