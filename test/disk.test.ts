import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { expectError } from './helpers/assert.ts';
import { listFiles } from './helpers/files.ts';
import { query, startServer, tempDir, type TestServer } from './helpers/server.ts';
import { waitFor } from './helpers/wait.ts';

/**
 * The local disk failing under the WAL: a full file system (a real 64 MiB tmpfs, mounted by the test:
 * it runs as root, as CI does) and a schema file that cannot be written.
 */
describe('local disk faults', () => {
  const servers: TestServer[] = [];
  const mounts: string[] = [];
  afterAll(async () => {
    for (const s of servers) await s.kill();
    for (const m of mounts) execFileSync('umount', ['-l', m]);
  });

  const stats = async (s: TestServer, name: string) =>
    (await (await s.request(`/api/v1/logstream/${name}/stats`)).json()) as { wal: { count: number }; storage: { files: number } };

  it('a full disk: a write is complete or not acknowledged (503 + Retry-After), reads go on, and after space returns everything acknowledged is there', async () => {
    const mnt = await tempDir('lakehouse-tmpfs-');
    // Needs root, like the rest of the suite's system setup; a failure here is a failure, not a skip.
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64m', 'tmpfs', mnt]);
    mounts.push(mnt);
    let server = await startServer({ dataDir: mnt, env: { P_FLUSH_INTERVAL: '1s', P_INGEST_WORKERS: '1' } });
    servers.push(server);
    expect((await server.request('/api/v1/logstream/diskfull', { method: 'PUT' })).status).toBe(200);

    // Leave about 4 MiB free; the WAL and the flushes take the rest.
    const ballast = path.join(mnt, 'ballast');
    const free = async () => {
      const st = await fs.statfs(mnt);
      return st.bavail * st.bsize;
    };
    await fs.writeFile(ballast, Buffer.alloc(Math.max(0, (await free()) - 4 * 1024 * 1024)));

    const batch = (b: number) => Array.from({ length: 500 }, (_, i) => ({ id: b * 1000 + i, msg: `event ${i} of batch ${b} `.padEnd(120, 'x') }));
    let acked = 0;
    let refused: Response | undefined;
    let b = 0;
    for (; b < 400 && !refused; b++) {
      const res = await server.request('/api/v1/logstream/diskfull', { method: 'POST', json: batch(b) });
      if (res.status === 200) acked += 500;
      else refused = res;
    }
    expect(acked).toBeGreaterThan(0);
    expect(refused, 'the disk never filled up').toBeDefined();
    expect((await expectError(refused!, 503)).toLowerCase()).toContain('disk');
    expect(Number(refused!.headers.get('retry-after'))).toBeGreaterThan(0);

    // Reads keep working, and see exactly what was acknowledged.
    expect(await query(server, 'SELECT count(*) AS n, count(DISTINCT id) AS d FROM diskfull')).toEqual([{ n: acked, d: acked }]);
    // Nothing half-written stays in the WAL: no NUL hole, every line a JSON object.
    for (const file of await listFiles(path.join(mnt, 'wal'), '.ndjson')) {
      const content = await fs.readFile(file);
      expect(content.includes(0), `NUL bytes in ${file}`).toBe(false);
      for (const line of content.toString().split('\n').filter(Boolean)) expect(() => JSON.parse(line)).not.toThrow();
    }
    // More attempts while full are refused cleanly, and the service stays up.
    for (let i = 0; i < 3; i++, b++) {
      const res = await server.request('/api/v1/logstream/diskfull', { method: 'POST', json: batch(b) });
      if (res.status === 200) acked += 500;
      else expect(res.status).toBe(503);
    }
    expect((await server.request('/api/v1/liveness')).status).toBe(200);

    // Space returns: without a restart, ingestion and flushes work again.
    await fs.rm(ballast);
    await waitFor('ingest works again', async () => {
      const res = await server.request('/api/v1/logstream/diskfull', { method: 'POST', json: batch(b) });
      if (res.status !== 200) return false;
      acked += 500;
      b++;
      return true;
    });
    await waitFor('everything flushed', async () => (await stats(server, 'diskfull')).wal.count === 0, 60_000);
    expect(await query(server, 'SELECT count(*) AS n, count(DISTINCT id) AS d FROM diskfull')).toEqual([{ n: acked, d: acked }]);

    // And after a restart.
    await server.stop();
    server = await startServer({ dataDir: mnt, env: { P_FLUSH_INTERVAL: '1s' } });
    servers.push(server);
    expect(await query(server, 'SELECT count(*) AS n, count(DISTINCT id) AS d FROM diskfull')).toEqual([{ n: acked, d: acked }]);
  }, 180_000);

  it('a failed schema write is not remembered: the next append after the fault clears succeeds, and memory never runs ahead of the disk', async () => {
    const server = await startServer({ env: { P_FLUSH_INTERVAL: '1h' } });
    servers.push(server);
    expect((await server.request('/api/v1/logstream/sch', { method: 'PUT' })).status).toBe(200);
    expect((await server.request('/api/v1/logstream/sch', { method: 'POST', json: [{ a: 1 }] })).status).toBe(200);
    const [schemaFile] = await listFiles(path.join(server.dataDir, 'wal', 'sch'), 'schema.json');
    expect(schemaFile).toBeDefined();
    // The fault: the schema file's place is taken by a directory, so the atomic rename over it fails
    // (root ignores permission bits, so an unwritable directory would not do).
    await fs.rm(schemaFile);
    await fs.mkdir(path.join(schemaFile, 'blocker'), { recursive: true });

    const failed = await server.request('/api/v1/logstream/sch', { method: 'POST', json: [{ a: 2, b: 'new column' }] });
    await expectError(failed, 503);
    expect(failed.headers.get('retry-after')).toBeTruthy();
    const fields = async () => ((await (await server.request('/api/v1/logstream/sch/schema')).json()) as { fields: { name: string }[] }).fields.map((f) => f.name);
    expect(await fields()).not.toContain('b');
    // Rows with known columns do not depend on the failed write.
    expect((await server.request('/api/v1/logstream/sch', { method: 'POST', json: [{ a: 3 }] })).status).toBe(200);

    await fs.rm(schemaFile, { recursive: true });
    expect((await server.request('/api/v1/logstream/sch', { method: 'POST', json: [{ a: 4, b: 'after the fault' }] })).status).toBe(200);
    expect(await fields()).toContain('b');
    expect(await query(server, 'SELECT a, b FROM sch ORDER BY a')).toEqual([
      { a: 1, b: null },
      { a: 3, b: null },
      { a: 4, b: 'after the fault' },
    ]);
    await server.stop();
    const again = await startServer({ dataDir: server.dataDir, env: { P_FLUSH_INTERVAL: '1h' } });
    servers.push(again);
    expect(await query(again, 'SELECT a, b FROM sch ORDER BY a')).toEqual([
      { a: 1, b: null },
      { a: 3, b: null },
      { a: 4, b: 'after the fault' },
    ]);
  });
});
