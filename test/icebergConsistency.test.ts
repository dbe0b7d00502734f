import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readerCounts, snapshotRows, startRestFixture, type ReaderArgs, type RestFixture } from './helpers/iceberg.ts';
import { HOUR, inRange, MIN, naive, range, serviceCounts, times } from './helpers/lakeData.ts';
import { s3Env, startS3Server, type S3TestServer } from './helpers/s3server.ts';
import { query, startServer, type TestServer } from './helpers/server.ts';

/**
 * The lake stays consistent (docs/lake.md): readers' counts never change while compaction rewrites
 * files, a widened column's files wait for compaction, retention and snapshot expiry never leave a
 * retained snapshot pointing at a missing file, three workers on one bucket commit every file once (and
 * push every version once to an external catalog, the Iceberg REST fixture), and a kill -9 between
 * manifest upload and commit leaves no partial snapshot.
 */

describe('snapshots while compaction rewrites files', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({ env: { P_FLUSH_INTERVAL: '1s', P_ICEBERG_INTERVAL: '1s', P_COMPACTION_INTERVAL: '3s' } });
  }, 60_000);
  afterAll(() => server?.stop());

  const hour = Math.floor((Date.now() - 2 * HOUR) / HOUR) * HOUR;
  const args = (table: string): ReaderArgs => ({ uri: `${server.url}/iceberg`, key: server.apiKey, table, timeColumn: 'event_time', start: naive(hour), end: naive(hour + HOUR) });
  const send = async (table: string, events: Record<string, unknown>[]) => {
    const res = await server.request('/api/v1/ingest', { method: 'POST', headers: { 'x-p-stream': table }, json: events });
    expect(res.status, await res.text()).toBe(200);
  };
  const table = async (name: string) => (await (await fetch(`${server.url}/iceberg/v1/namespaces/lakehouse/tables/${name}`, { headers: { authorization: `Bearer ${server.apiKey}` } })).json()) as {
    metadata: { snapshots: { summary: { operation: string } }[]; schemas: { fields: { name: string; type: unknown }[] }[] };
  };
  const operations = async (name: string) => (await table(name)).metadata.snapshots.map((s) => s.summary.operation);

  it('readers count the same rows before, during and after a compaction', async () => {
    expect((await server.request('/api/v1/logstream/merged', { method: 'PUT', headers: { 'x-p-time-partition': 'event_time' } })).status).toBe(200);
    let sent = 0;
    for (let i = 0; i < 3; i++) {
      await send('merged', [{ event_time: new Date(hour + i * MIN).toISOString(), i }]);
      sent++;
      // One flush (one file) per batch: wait until the service has stored it.
      await expect.poll(async () => Number((await query(server, 'SELECT count(*) AS c FROM merged'))[0].c), { timeout: 30_000 }).toBe(sent);
      await expect.poll(async () => (await readerCounts(args('merged'))).pyiceberg[0], { timeout: 30_000 }).toBe(sent);
    }
    // Until the compaction's overwrite snapshot is the current one, every read sees all rows, never more, never fewer.
    const seen: unknown[] = [];
    await expect
      .poll(
        async () => {
          seen.push(await readerCounts(args('merged')));
          return (await operations('merged')).includes('overwrite');
        },
        { timeout: 60_000, interval: 500 },
      )
      .toBe(true);
    seen.push(await readerCounts(args('merged')));
    for (const counts of seen) expect(counts).toEqual({ pyiceberg: [3, 3], duckdb: [3, 3] });
  }, 180_000);

  it("leaves a widened column's old files out (the lake lags, never lies) until compaction rewrites them", async () => {
    expect((await server.request('/api/v1/logstream/widened', { method: 'PUT', headers: { 'x-p-time-partition': 'event_time' } })).status).toBe(200);
    await send('widened', [{ event_time: new Date(hour + 5 * MIN).toISOString(), v: 1 }]);
    await expect.poll(async () => (await readerCounts(args('widened'))).pyiceberg[0], { timeout: 30_000 }).toBe(1);
    await send('widened', [{ event_time: new Date(hour + 6 * MIN).toISOString(), v: 1.5 }]);
    // Every count a reader gets is of rows it reads with the right type: at most 2, and 2 once compaction merged both files.
    await expect.poll(async () => (await readerCounts(args('widened'))).pyiceberg[0], { timeout: 90_000, interval: 1000 }).toBe(2);
    const { metadata } = await table('widened');
    expect(metadata.schemas.at(-1)!.fields.find((f) => f.name === 'v')!.type).toBe('double');
    // The old file leaves the table by a commit that removes files: the compaction's `overwrite` when the
    // publisher saw the widened file and the merge at once, or a `delete` then an `append` when a round ran
    // between them (a loaded machine) — either way never a version listing a file read with the wrong type.
    expect((await operations('widened')).some((op) => op === 'overwrite' || op === 'delete')).toBe(true);
  }, 180_000);
});

describe('retention, snapshot expiry and the garbage collector', () => {
  it('never leave a retained snapshot pointing at a missing file', async () => {
    // A short delete grace (2 × P_QUERY_TIMEOUT + 2 × P_CATALOG_REFRESH + 5 s = 9 s), raised by the
    // snapshot retention (20 s) to 22 s: removed files outlive the snapshots that list them.
    const server = await startServer({
      env: { P_FLUSH_INTERVAL: '1s', P_ICEBERG_INTERVAL: '1s', P_COMPACTION_INTERVAL: '2s', P_QUERY_TIMEOUT: '1s', P_CATALOG_REFRESH: '1s', P_ICEBERG_SNAPSHOT_RETENTION: '20s' },
    });
    try {
      expect(server.logs()).toMatch(/delete grace period raised/);
      expect((await server.request('/api/v1/logstream/aging', { method: 'PUT', headers: { 'x-p-time-partition': 'event_time' } })).status).toBe(200);
      const old = Date.now() - 3 * 24 * HOUR;
      const events = [old, old + MIN, Date.now() - HOUR].map((t, i) => ({ event_time: new Date(t).toISOString(), i }));
      expect((await server.request('/api/v1/ingest', { method: 'POST', headers: { 'x-p-stream': 'aging' }, json: events })).status).toBe(200);
      const args = { uri: `${server.url}/iceberg`, key: server.apiKey, table: 'aging' };
      await expect.poll(async () => (await snapshotRows(args)).at(-1)?.[1], { timeout: 30_000 }).toBe(3);
      const rule = [{ description: 'two days', action: 'delete', duration: '2d' }];
      expect((await server.request('/api/v1/logstream/aging/retention', { method: 'PUT', json: rule })).status).toBe(200);
      // Retention deletes the old rows' files (a delete snapshot); until the older snapshots expire and
      // after, every retained snapshot reads whole (a scan of a snapshot whose file was deleted fails).
      const seen = new Set<number>();
      await expect
        .poll(
          async () => {
            const snaps = await snapshotRows(args);
            snaps.forEach(([, rows]) => seen.add(rows));
            return snaps.map(([, rows]) => rows);
          },
          { timeout: 60_000, interval: 1000 },
        )
        .toEqual([1]);
      expect(seen).toContain(3);
    } finally {
      await server.stop();
    }
  }, 180_000);
});

describe('three workers on one S3 bucket', () => {
  let s3: S3TestServer;
  let fixture: RestFixture;
  const workers: TestServer[] = [];
  beforeAll(async () => {
    s3 = await startS3Server();
    // Every worker also pushes to the same external catalog (P_ICEBERG_PUSH_URI): they race there too.
    fixture = await startRestFixture(s3);
    for (const id of ['w1', 'w2', 'w3']) {
      workers.push(await startServer({ env: { ...s3Env(s3), P_NODE_ID: id, P_FLUSH_INTERVAL: '1s', P_ICEBERG_INTERVAL: '1s', P_CATALOG_REFRESH: '1s', P_ICEBERG_PUSH_URI: fixture.uri } }));
    }
  }, 120_000);
  afterAll(async () => {
    for (const w of workers) await w.stop();
    fixture?.stop();
    await s3?.close();
  });

  it('commit one table without losing or doubling a file', async () => {
    const created = await workers[0].request('/api/v1/logstream/shared', { method: 'PUT', headers: { 'x-p-time-partition': 'event_time' } });
    expect(created.status).toBe(200);
    // Each worker takes a third of the rows, in two requests (two flushes, two files each).
    let sent = 0;
    for (let round = 0; round < 2; round++) {
      for (const [w, worker] of workers.entries()) {
        const events = times.filter((_, i) => i % 3 === w).map((t) => ({ event_time: new Date(t + round).toISOString(), w, round }));
        await expect.poll(async () => (await worker.request('/api/v1/ingest', { method: 'POST', headers: { 'x-p-stream': 'shared' }, json: events })).status, { timeout: 30_000 }).toBe(200);
        sent += events.length;
      }
      // Flushed by every worker and read by worker 1 from the others' manifests: the next round makes new files.
      await expect.poll(async () => (await serviceCounts(workers[0], 'shared'))[0], { timeout: 30_000 }).toBe(sent);
    }
    const expected: [number, number] = [sent, 2 * inRange];
    await expect.poll(() => serviceCounts(workers[0], 'shared'), { timeout: 30_000 }).toEqual(expected);
    const args: ReaderArgs = {
      uri: `${workers[1].url}/iceberg`,
      key: workers[1].apiKey,
      table: 'shared',
      timeColumn: 'event_time',
      start: naive(range.start),
      end: naive(range.end),
      s3: { endpoint: s3.endpoint, accessKey: s3.accessKey, secretKey: s3.secretKey, region: 'us-east-1' },
    };
    await expect.poll(() => readerCounts(args), { timeout: 60_000, interval: 1000 }).toEqual({ pyiceberg: expected, duckdb: expected });
    // Every worker's catalog loads the same newest version, whichever worker committed it.
    const locations = await Promise.all(
      workers.map(async (w) => ((await (await fetch(`${w.url}/iceberg/v1/namespaces/lakehouse/tables/shared`, { headers: { authorization: `Bearer ${w.apiKey}` } })).json()) as { 'metadata-location': string })['metadata-location']),
    );
    expect(new Set(locations).size).toBe(1);
  }, 240_000);

  it('push every version to the external catalog exactly once: nothing doubled or lost there', async () => {
    type Snap = { 'snapshot-id': number; 'sequence-number': number };
    type Meta = { 'current-snapshot-id'?: number | null; snapshots?: Snap[]; 'snapshot-log'?: { 'snapshot-id': number }[] };
    const load = async (url: string, key?: string) =>
      ((await (await fetch(`${url}/namespaces/lakehouse/tables/shared`, { headers: key ? { authorization: `Bearer ${key}` } : {} })).json()) as { metadata: Meta }).metadata;
    const ours = () => load(`${workers[0].url}/iceberg/v1`, workers[0].apiKey);
    const theirs = () => load(`${fixture.uri}/v1`);
    // In step once the catalog's `main` is our current snapshot (after every worker's pushes of this table).
    await expect.poll(async () => (await theirs())['current-snapshot-id'], { timeout: 60_000, interval: 1000 }).toBe((await ours())['current-snapshot-id']);
    const [mine, there] = [await ours(), await theirs()];
    const ids = (m: Meta) => (m.snapshots ?? []).map((s) => s['snapshot-id']);
    // The same snapshots, each once, in the same order of sequence numbers.
    expect(new Set(ids(there)).size).toBe(ids(there).length);
    expect([...ids(there)].sort()).toEqual([...ids(mine)].sort());
    const sequences = (m: Meta) => (m.snapshots ?? []).map((s) => s['sequence-number']).sort((a, b) => a - b);
    expect(sequences(there)).toEqual(sequences(mine));
    const logged = (there['snapshot-log'] ?? []).map((e) => e['snapshot-id']);
    expect(new Set(logged).size).toBe(logged.length);
    // And its readers get what the service counts: pyiceberg through that catalog, on the same bucket.
    const through: ReaderArgs & { pyicebergOnly: boolean } = {
      uri: fixture.uri,
      key: '',
      table: 'shared',
      timeColumn: 'event_time',
      start: naive(range.start),
      end: naive(range.end),
      s3: { endpoint: s3.endpoint, accessKey: s3.accessKey, secretKey: s3.secretKey, region: 'us-east-1', endpointToPyiceberg: true },
      pyicebergOnly: true,
    };
    const expected = await serviceCounts(workers[0], 'shared');
    expect((await readerCounts(through)).pyiceberg).toEqual(expected);
    const pushed = await Promise.all(workers.map(async (w) => Number(/lakehouse_iceberg_pushes_total\{result="committed"\} (\d+)/.exec(await (await w.request('/metrics')).text())?.[1] ?? 0)));
    expect(pushed.reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
  }, 120_000);
});

describe('a crash between the manifest upload and the commit (kill -9 at a failpoint)', () => {
  it('leaves no partial snapshot, and the next start publishes every row once', async () => {
    const first = await startServer({ env: { P_FLUSH_INTERVAL: '1s', P_ICEBERG_INTERVAL: '1s', P_FAILPOINT: 'iceberg-before-commit' } });
    const res = await first.request('/api/v1/ingest', { method: 'POST', headers: { 'x-p-stream': 'crashy' }, json: [{ a: 1 }, { a: 2 }, { a: 3 }] });
    expect(res.status).toBe(200);
    await first.exited; // SIGKILLed by the failpoint: the flush's manifests uploaded, its snapshot not committed
    const dir = path.join(first.dataDir, 'store', 'crashy');
    const files = (await fs.readdir(dir, { recursive: true })).map(String);
    expect(files.filter((f) => f.endsWith('.avro')).length).toBeGreaterThan(0);
    // Whatever version was committed before (the table without a snapshot) is the newest: no partial snapshot.
    for (const f of files.filter((f) => f.endsWith('.metadata.json'))) {
      expect(JSON.parse(await fs.readFile(path.join(dir, f), 'utf8')).snapshots).toEqual([]);
    }
    const second = await startServer({ dataDir: first.dataDir, env: { P_FLUSH_INTERVAL: '1s', P_ICEBERG_INTERVAL: '1s' } });
    try {
      const args: ReaderArgs = { uri: `${second.url}/iceberg`, key: second.apiKey, table: 'crashy', timeColumn: 'p_timestamp', start: '1970-01-01T00:00:00', end: '2100-01-01T00:00:00' };
      await expect.poll(() => readerCounts(args), { timeout: 60_000, interval: 1000 }).toEqual({ pyiceberg: [3, 3], duckdb: [3, 3] });
    } finally {
      await second.stop();
    }
  }, 180_000);
});
