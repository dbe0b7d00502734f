import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { listFiles } from './helpers/files.ts';
import { sleep, waitFor } from './helpers/wait.ts';
import { query, startServer, tempDir, type TestServer } from './helpers/server.ts';

/**
 * A full disk recovers when space is freed (issue 19, point 4), on a real 64 MiB tmpfs (the suite runs
 * as root): a flush that failed for lack of space stops the WAL from taking what is freed, is retried
 * as soon as space comes back, and ingestion works again, without a restart and after one.
 */
describe('a full disk recovers when space is freed', () => {
  const servers: TestServer[] = [];
  const mounts: string[] = [];
  afterAll(async () => {
    for (const s of servers) await s.kill();
    for (const m of mounts) execFileSync('umount', ['-l', m]);
  });

  it('with a writer that never stops: the flush runs first, then ingestion resumes; after a restart on the full disk too', async () => {
    const mnt = await tempDir('lakehouse-tmpfs-');
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64m', 'tmpfs', mnt]);
    mounts.push(mnt);
    const env = { P_FLUSH_INTERVAL: '1s', P_INGEST_WORKERS: '1' };
    let server = await startServer({ dataDir: mnt, env });
    servers.push(server);
    expect((await server.request('/api/v1/logstream/refill', { method: 'PUT' })).status).toBe(200);
    const free = async () => {
      const st = await fs.statfs(mnt);
      return st.bavail * st.bsize;
    };

    let b = 0;
    let acked = 0;
    const batch = () => Array.from({ length: 500 }, (_, i) => ({ id: b * 1000 + i, msg: `event ${i} of batch ${b} `.padEnd(200, 'x') }));
    const send = async (s: TestServer) => {
      const res = await s.request('/api/v1/logstream/refill', { method: 'POST', json: batch() });
      b++;
      if (res.status === 200) acked += 500;
      else {
        expect(res.status).toBe(503);
        expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
      }
      return res.status;
    };
    // Some acknowledged rows in the WAL, not yet flushed...
    for (let i = 0; i < 5; i++) expect(await send(server)).toBe(200);
    // ...then the disk is filled to the last block (1 MiB files, so space can be given back in steps).
    const ballast: string[] = [];
    for (let i = 0; (await free()) > 0; i++) {
      const file = path.join(mnt, `ballast-${i}`);
      await fs.writeFile(file, Buffer.alloc(Math.min(1024 * 1024, await free()))).catch(() => undefined);
      ballast.push(file);
    }
    const stats = async (s: TestServer) => (await (await s.request('/api/v1/logstream/refill/stats')).json()) as { wal: { count: number } };
    // The flush fails for lack of space, and ingestion is refused meanwhile.
    await waitFor('the flush fails for lack of space', async () => server.logs().includes('appends stop until a flush succeeds'), 30_000);
    expect(await send(server)).toBe(503);
    expect((await stats(server)).wal.count).toBeGreaterThan(0);

    // A restart on the full disk: the service starts, serves what it acknowledged, refuses to ingest.
    await server.stop();
    server = await startServer({ dataDir: mnt, env });
    servers.push(server);
    expect(await query(server, 'SELECT count(*) AS n, count(DISTINCT id) AS d FROM refill')).toEqual([{ n: acked, d: acked }]);
    await waitFor('the flush fails again after the restart', async () => server.logs().includes('appends stop until a flush succeeds'), 30_000);

    // A writer that never stops, as real clients retry; then an operator frees 24 MiB (more than the
    // reserve, 2 × P_FLUSH_BYTES up to a quarter of the file system: 16 MiB here).
    let writing = true;
    const writer = (async () => {
      while (writing) if ((await send(server)) !== 200) await sleep(50);
    })();
    for (const file of ballast.splice(0, 24)) await fs.rm(file);
    // The flush gets the freed space first, although the writer keeps sending...
    await waitFor('a flush succeeded', async () => server.logs().includes('a flush succeeded; taking appends again'), 60_000);
    // ...and ingestion works again.
    const ackedBefore = acked;
    await waitFor('ingestion works again', async () => acked > ackedBefore, 30_000);
    writing = false;
    await writer;
    await waitFor('everything flushed', async () => (await stats(server)).wal.count === 0, 60_000);
    expect(await query(server, 'SELECT count(*) AS n, count(DISTINCT id) AS d FROM refill')).toEqual([{ n: acked, d: acked }]);

    // No leftovers of the failed flushes in the data directory's tmp/ (staging files, DuckDB's temp
    // files); the query workers' own directories are theirs.
    const tmp = path.join(mnt, 'tmp');
    expect((await listFiles(tmp, '')).filter((f) => !f.startsWith(path.join(tmp, 'query')))).toEqual([]);
    // Nothing set aside.
    expect(await listFiles(path.join(mnt, 'quarantine'), '')).toEqual([]);

    await server.stop();
    server = await startServer({ dataDir: mnt, env });
    servers.push(server);
    expect(await query(server, 'SELECT count(*) AS n, count(DISTINCT id) AS d FROM refill')).toEqual([{ n: acked, d: acked }]);
  }, 240_000);
});
