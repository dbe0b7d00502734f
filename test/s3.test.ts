import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { s3Env, startS3Server } from './helpers/s3server.ts';
import { query, startServer, tempDir, type TestServer } from './helpers/server.ts';
import { sleep, waitFor } from './helpers/wait.ts';

async function count(server: TestServer, dataset: string): Promise<number> {
  const rows = await query(server, `SELECT count(*) AS n FROM ${dataset}`);
  return Number(rows[0].n);
}

describe('S3 storage and several stateless workers', () => {
  let s3: Awaited<ReturnType<typeof startS3Server>>;
  const servers: TestServer[] = [];
  let s3env: Record<string, string>;

  const worker = async (extra: Record<string, string> = {}, dataDir?: string) => {
    const s = await startServer({ dataDir: dataDir ?? (await tempDir()), env: { ...s3env, ...extra } });
    servers.push(s);
    return s;
  };

  beforeAll(async () => {
    s3 = await startS3Server();
    s3env = {
      ...s3Env(s3),
      P_FLUSH_INTERVAL: '300ms',
      P_CATALOG_REFRESH: '300ms',
      // Long enough for a query on a busy CI machine that downloads from moto; a hang still fails well inside the test timeout.
      P_QUERY_TIMEOUT: '20s',
    };
  });
  // A test's workers go with it: left running, each refreshed its catalog from moto every 300 ms until
  // the file ended, a load that slowed every later test.
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.kill();
  });
  afterAll(async () => {
    await s3?.close();
  });

  it('a query on worker B sees what worker A flushed; each sees its own data at once', async () => {
    const a = await worker({ P_NODE_ID: 'wa' });
    const b = await worker({ P_NODE_ID: 'wb', P_FLUSH_INTERVAL: '1h' });
    expect((await a.request('/api/v1/logstream/shared', { method: 'PUT' })).status).toBe(200);
    expect((await a.request('/api/v1/logstream/shared', { method: 'POST', json: [{ from: 'a', n: 1 }, { from: 'a', n: 2 }] })).status).toBe(200);
    // A sees its own acknowledged rows immediately.
    expect(await count(a, 'shared')).toBe(2);
    // B learns about the dataset and A's flushed rows within flush interval + catalog refresh.
    await waitFor('B sees A', async () => (await count(b, 'shared')) === 2);
    // B's own rows are visible on B at once (its flush interval is an hour: they are in its WAL).
    expect((await b.request('/api/v1/logstream/shared', { method: 'POST', json: [{ from: 'b', n: 3 }] })).status).toBe(200);
    expect(await count(b, 'shared')).toBe(3);
    // A new worker with an empty data dir serves everything that was flushed, from the bucket alone.
    const c = await worker({ P_NODE_ID: 'wc' });
    await waitFor('C sees A', async () => (await count(c, 'shared')) === 2);
    const schema = (await (await c.request('/api/v1/logstream/shared/schema')).json()) as { fields: { name: string }[] };
    expect(schema.fields.map((f) => f.name)).toEqual(expect.arrayContaining(['from', 'n', 'p_timestamp']));
  }, 150_000);

  it('three workers ingesting into one dataset at once: every row exactly once everywhere', async () => {
    const ws = [await worker({ P_NODE_ID: 'x1' }), await worker({ P_NODE_ID: 'x2' }), await worker({ P_NODE_ID: 'x3' })];
    expect((await ws[0].request('/api/v1/logstream/busy', { method: 'PUT' })).status).toBe(200);
    await waitFor('all know busy', async () => {
      for (const w of ws) if ((await w.request('/api/v1/logstream/busy/schema')).status !== 200) return false;
      return true;
    });
    let total = 0;
    await Promise.all(
      ws.map(async (w, wi) => {
        for (let b = 0; b < 10; b++) {
          const events = Array.from({ length: 30 }, (_, i) => ({ w: wi, b, i }));
          const res = await w.request('/api/v1/logstream/busy', { method: 'POST', json: events });
          expect(res.status).toBe(200);
          total += events.length;
          await sleep(40);
        }
      }),
    );
    for (const w of ws) {
      await waitFor('converged', async () => {
        const rows = await query(w, 'SELECT count(*) AS n, count(DISTINCT w * 100000 + b * 1000 + i) AS d FROM busy');
        return rows[0].n === total && rows[0].d === total;
      });
    }
  }, 150_000);

  it('deleting a dataset on one worker deletes it for all, and nothing old comes back', async () => {
    const a = await worker({ P_NODE_ID: 'da' });
    const b = await worker({ P_NODE_ID: 'db', P_FLUSH_INTERVAL: '2s' });
    await a.request('/api/v1/logstream/doomed', { method: 'PUT' });
    await a.request('/api/v1/logstream/doomed', { method: 'POST', json: [{ old: true }] });
    await waitFor('B sees doomed', async () => (await count(b, 'doomed')) === 1);
    // B buffers a row that it has not flushed yet when A deletes the dataset.
    expect((await b.request('/api/v1/logstream/doomed', { method: 'POST', json: [{ old: true, buffered: 'b' }] })).status).toBe(200);
    expect((await a.request('/api/v1/logstream/doomed', { method: 'DELETE' })).status).toBe(200);
    await waitFor('B drops doomed', async () => {
      const r = await b.request('/api/v1/query', { method: 'POST', json: { query: 'SELECT * FROM doomed', startTime: '1h', endTime: 'now' } });
      return r.status === 404;
    });
    // Re-created with the same name: empty everywhere, and stays empty after B's flush interval.
    expect((await a.request('/api/v1/logstream/doomed', { method: 'PUT' })).status).toBe(200);
    await waitFor('B sees new doomed', async () => (await b.request('/api/v1/logstream/doomed/schema')).status === 200);
    await sleep(2500);
    expect(await count(a, 'doomed')).toBe(0);
    expect(await count(b, 'doomed')).toBe(0);
    const schema = (await (await a.request('/api/v1/logstream/doomed/schema')).json()) as { fields: { name: string }[] };
    expect(schema.fields.map((f) => f.name)).not.toContain('old');
  }, 150_000);

  it('compaction on S3 under concurrent queries keeps every row exactly once', async () => {
    const a = await worker({ P_NODE_ID: 'ca', P_FLUSH_INTERVAL: '100ms', P_COMPACTION_INTERVAL: '1h' });
    await a.request('/api/v1/logstream/small', { method: 'PUT' });
    let total = 0;
    for (let b = 0; b < 6; b++) {
      const events = Array.from({ length: 40 }, (_, i) => ({ b, i }));
      expect((await a.request('/api/v1/logstream/small', { method: 'POST', json: events })).status).toBe(200);
      total += events.length;
      await waitFor('flushed', async () => ((await (await a.request('/api/v1/logstream/small/stats')).json()) as { wal: { count: number } }).wal.count === 0);
    }
    const files = async (w: TestServer) => ((await (await w.request('/api/v1/logstream/small/stats')).json()) as { storage: { files: number } }).storage.files;
    const before = await files(a);
    expect(before).toBeGreaterThanOrEqual(6);
    await a.stop();
    const compactor = await worker({ P_NODE_ID: 'ca', P_COMPACTION_INTERVAL: '300ms' });
    const reader = await worker({ P_NODE_ID: 'cr' });
    let done = false;
    const check = async (w: TestServer) => {
      while (!done) {
        const rows = await query(w, 'SELECT count(*) AS n, count(DISTINCT b * 1000 + i) AS d FROM small');
        expect(rows).toEqual([{ n: total, d: total }]);
      }
    };
    const checkers = [check(compactor), check(reader)];
    await waitFor('compacted', async () => (await files(compactor)) < before);
    await waitFor('reader sees compaction', async () => (await files(reader)) < before);
    done = true;
    await Promise.all(checkers);
  }, 150_000);

  it('kill -9 in the middle of a compaction on S3: no loss, no duplicates, and it completes after the restart', async () => {
    const dataDir = await tempDir();
    let w = await worker({ P_NODE_ID: 'kc', P_FLUSH_INTERVAL: '100ms', P_COMPACTION_INTERVAL: '1h' }, dataDir);
    await w.request('/api/v1/logstream/crashy', { method: 'PUT' });
    let total = 0;
    for (let b = 0; b < 4; b++) {
      expect((await w.request('/api/v1/logstream/crashy', { method: 'POST', json: Array.from({ length: 25 }, (_, i) => ({ b, i })) })).status).toBe(200);
      total += 25;
      await waitFor('flushed', async () => ((await (await w.request('/api/v1/logstream/crashy/stats')).json()) as { wal: { count: number } }).wal.count === 0);
    }
    await w.stop();
    for (const point of ['compaction-after-upload', 'compaction-after-manifest']) {
      w = await worker({ P_NODE_ID: 'kc', P_COMPACTION_INTERVAL: '1s', P_FAILPOINT: point }, dataDir);
      await Promise.race([w.exited, sleep(20_000).then(() => Promise.reject(new Error(`never reached ${point}`)))]);
      const reader = await worker({ P_NODE_ID: `kr-${point}` });
      await waitFor('reader converged', async () => {
        const [row] = await query(reader, 'SELECT count(*) AS n, count(DISTINCT b * 1000 + i) AS d FROM crashy');
        return row.n === total && row.d === total;
      });
      await reader.stop();
    }
    w = await worker({ P_NODE_ID: 'kc', P_COMPACTION_INTERVAL: '300ms' }, dataDir);
    await waitFor('compacted', async () => ((await (await w.request('/api/v1/logstream/crashy/stats')).json()) as { storage: { files: number } }).storage.files <= 2);
    expect(await query(w, 'SELECT count(*) AS n, count(DISTINCT b * 1000 + i) AS d FROM crashy')).toEqual([{ n: total, d: total }]);
  }, 150_000);

  it('S3 down: ingestion keeps acknowledging into the WAL, readiness says not ready, nothing is lost', async () => {
    const a = await worker({ P_NODE_ID: 'fa', P_FLUSH_INTERVAL: '200ms', P_WAL_MAX_BYTES: '20KiB' });
    await a.request('/api/v1/logstream/outage', { method: 'PUT' });
    expect((await a.request('/api/v1/readiness')).status).toBe(200);
    await s3.stop();
    await waitFor('not ready', async () => (await a.request('/api/v1/readiness')).status === 503);
    let acked = 0;
    let refused: Response | undefined;
    for (let b = 0; b < 200 && !refused; b++) {
      const res = await a.request('/api/v1/logstream/outage', { method: 'POST', json: Array.from({ length: 10 }, (_, i) => ({ b, i, pad: 'x'.repeat(20) })) });
      if (res.status === 200) acked += 10;
      else refused = res;
      await sleep(10);
    }
    expect(acked).toBeGreaterThan(0);
    // Past P_WAL_MAX_BYTES: 503 with Retry-After.
    expect(refused?.status).toBe(503);
    expect(refused?.headers.get('retry-after')).toBeTruthy();
    // Acknowledged rows are queryable while S3 is down (they are in the WAL).
    expect(await count(a, 'outage')).toBe(acked);
    await s3.start();
    await waitFor('ready again', async () => (await a.request('/api/v1/readiness')).status === 200);
    await waitFor('flushed after outage', async () => ((await (await a.request('/api/v1/logstream/outage/stats')).json()) as { wal: { count: number } }).wal.count === 0, 60_000);
    expect(await count(a, 'outage')).toBe(acked);
    const fresh = await worker({ P_NODE_ID: 'fb' });
    await waitFor('another worker sees it all', async () => (await count(fresh, 'outage')) === acked);
  }, 150_000);
});
