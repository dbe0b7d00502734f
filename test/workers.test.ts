import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError } from './helpers/assert.ts';
import { s3Env, startS3Server, type S3TestServer } from './helpers/s3server.ts';
import { query, startServer, tempDir, type TestServer } from './helpers/server.ts';
import { sleep, waitFor } from './helpers/wait.ts';
import { remoteWriteV1 } from './helpers/wire.ts';

/**
 * Several workers on one bucket (moto, which honours conditional writes as AWS S3 and MinIO do):
 * concurrent creation of a new dataset, a worker that has not seen a dataset yet, delete on one
 * worker while another ingests or queries, and a bucket outage during a query.
 */
describe('several workers on one bucket', () => {
  let s3: S3TestServer;
  let s3env: Record<string, string>;
  let client: S3Client;
  const servers: TestServer[] = [];

  const worker = async (extra: Record<string, string> = {}) => {
    const s = await startServer({ dataDir: await tempDir(), env: { ...s3env, ...extra } });
    servers.push(s);
    return s;
  };
  // Workers with the default settings are shared by the tests (each test uses datasets of its own): a
  // worker's cold start is the cost here, and the dataset under test is new to every worker either way.
  let sharedWorkers: Promise<TestServer[]> | undefined;
  const shared = () => (sharedWorkers ??= (async () => [await worker({ P_NODE_ID: 'w0' }), await worker({ P_NODE_ID: 'w1' }), await worker({ P_NODE_ID: 'w2' })])());
  // Workers whose catalog refresh is an hour away, to be the ones that have not heard of a dataset.
  let coldWorkers: Promise<TestServer[]> | undefined;
  const cold = () =>
    (coldWorkers ??= (async () => {
      const out: TestServer[] = [];
      // One after the other: several cold starts at once take longer than a test should on 2 busy cores.
      for (let i = 0; i < 4; i++) out.push(await worker({ P_NODE_ID: `cold-${i}`, P_CATALOG_REFRESH: '1h' }));
      return out;
    })());

  /** Every key in the bucket under a prefix. */
  const keys = async (prefix: string): Promise<string[]> => {
    const out: string[] = [];
    let token: string | undefined;
    do {
      const res = await client.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: prefix, ContinuationToken: token }));
      for (const o of res.Contents ?? []) out.push(o.Key!);
      token = res.NextContinuationToken;
    } while (token);
    return out;
  };

  const stats = async (w: TestServer, name: string) =>
    (await (await w.request(`/api/v1/logstream/${name}/stats`)).json()) as { wal: { count: number }; ingestion: { count: number }; storage: { files: number } };

  beforeAll(async () => {
    s3 = await startS3Server();
    s3env = {
      ...s3Env(s3),
      P_FLUSH_INTERVAL: '500ms',
      // Longer than each test's burst: a worker learns of other workers' datasets only through the
      // store lookups under test, not through a refresh in between.
      P_CATALOG_REFRESH: '4s',
      P_QUERY_TIMEOUT: '5s',
    };
    client = new S3Client({
      endpoint: s3.endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: s3.accessKey, secretAccessKey: s3.secretKey },
    });
  });
  afterAll(async () => {
    for (const s of servers) await s.kill();
    client?.destroy();
    await s3?.close();
  });

  /** Sends `n` single-event requests to a new dataset round-robin over the workers, all at once. */
  async function burst(ws: TestServer[], n: number, send: (w: TestServer, i: number) => Promise<Response>): Promise<void> {
    const results = await Promise.all(Array.from({ length: n }, (_, i) => send(ws[i % ws.length], i).then(async (r) => [r.status, await r.text()] as const)));
    for (const [status, body] of results) expect(status, body).toBe(200);
  }

  /** Every worker ends up with exactly the `n` acknowledged events, each once. */
  async function expectExactlyOnce(ws: TestServer[], sql: string, n: number): Promise<void> {
    for (const w of ws) {
      await waitFor(
        `worker sees ${n} events once each`,
        async () => {
          const [row] = await query(w, sql);
          // Thrown, not returned: `until` keeps waiting and names what it saw last if it times out.
          if (row.n !== n || row.d !== n) throw new Error(`${w.url} saw n=${row.n}, d=${row.d}`);
          return true;
        },
        40_000,
      );
    }
    // And it stays so after every flush and refresh (a lost generation used to vanish at a refresh).
    await sleep(5000);
    for (const w of ws) expect(await query(w, sql)).toEqual([{ n, d: n }]);
  }

  for (const count of [2, 3]) {
    it(`${count} workers creating one dataset at once through X-P-Stream: every acknowledged event stored exactly once`, async () => {
      const ws = (await shared()).slice(0, count);
      const name = `race_json_${count}`;
      await burst(ws, 30, (w, i) => w.request('/api/v1/ingest', { method: 'POST', headers: { 'X-P-Stream': name }, json: { i, from: w.url } }));
      await expectExactlyOnce(ws, `SELECT count(*) AS n, count(DISTINCT i) AS d FROM ${name}`, 30);
      // One generation: one metadata object and manifests under a single generation directory.
      const gens = new Set((await keys(`${name}/.manifests/`)).map((k) => k.split('/')[2]));
      expect(gens.size).toBe(1);
    }, 120_000);

    it(`${count} workers creating one dataset at once through OTLP /v1/logs: every acknowledged record stored exactly once`, async () => {
      const ws = (await shared()).slice(0, count);
      const name = `race_otlp_${count}`;
      const now = BigInt(Date.now()) * 1_000_000n;
      await burst(ws, 30, (w, i) =>
        w.request('/v1/logs', {
          method: 'POST',
          headers: { 'X-P-Stream': name },
          json: {
            resourceLogs: [
              {
                resource: { attributes: [{ key: 'service.name', value: { stringValue: 'race' } }] },
                scopeLogs: [{ logRecords: [{ timeUnixNano: String(now + BigInt(i)), body: { stringValue: `event ${i}` }, attributes: [{ key: 'seq', value: { intValue: String(i) } }] }] }],
              },
            ],
          },
        }),
      );
      await expectExactlyOnce(ws, `SELECT count(*) AS n, count(DISTINCT seq) AS d FROM ${name}`, 30);
    }, 120_000);
  }

  it('a worker that has not seen a dataset yet looks in the store before answering 404', async () => {
    // B–E know of no dataset yet, and their refresh is an hour away.
    const [a] = await shared();
    const [b, c, d, e] = await cold();
    expect((await a.request('/api/v1/logstream/fresh', { method: 'PUT' })).status).toBe(200);
    expect((await a.request('/api/v1/logstream/fresh', { method: 'POST', json: [{ n: 1 }] })).status).toBe(200);
    expect((await b.request('/api/v1/logstream/fresh', { method: 'POST', json: [{ n: 2 }] })).status).toBe(200);
    expect((await c.request('/api/v1/logstream/fresh/schema')).status).toBe(200);
    expect((await d.request('/api/v1/logstream/fresh/stats')).status).toBe(200);
    // PUT on yet another worker finds it too: 200 "already exists", not a second generation.
    const put = await e.request('/api/v1/logstream/fresh', { method: 'PUT' });
    expect(put.status).toBe(200);
    // A dataset that exists nowhere is still 404.
    await expectError(await b.request('/api/v1/logstream/nowhere', { method: 'POST', json: [{ n: 1 }] }), 404);
    await expectError(await b.request('/api/v1/logstream/nowhere/stats'), 404);
    await waitFor('A sees both rows', async () => Number((await query(a, 'SELECT count(*) AS n FROM fresh'))[0].n) === 2);
  }, 240_000);

  it('delete, then ingest on a worker that has not heard of it: those events go with the dataset, and no object of the old generation stays behind', async () => {
    const [a] = await shared();
    const b = await worker({ P_NODE_ID: 'del-b', P_FLUSH_INTERVAL: '300ms', P_CATALOG_REFRESH: '3s' });
    expect((await a.request('/api/v1/logstream/gone', { method: 'PUT' })).status).toBe(200);
    expect((await b.request('/api/v1/logstream/gone', { method: 'POST', json: [{ before: true }] })).status).toBe(200);
    await waitFor('flushed on B', async () => (await stats(b, 'gone')).wal.count === 0);
    const generation = (await keys('gone/.manifests/'))[0].split('/')[2];
    expect((await a.request('/api/v1/logstream/gone', { method: 'DELETE' })).status).toBe(200);
    // B has not refreshed yet: it still acknowledges into the deleted generation, and flushes it.
    let late = 0; // how many were acknowledged before B heard of the delete (timing-dependent)
    for (let i = 0; i < 5; i++) {
      const res = await b.request('/api/v1/logstream/gone', { method: 'POST', json: [{ late: i }] });
      if (res.status !== 200) break;
      late++;
      await sleep(200);
    }
    // Once B learns of the delete: 404, and nothing of the old generation is left in the bucket.
    await waitFor('B drops the dataset', async () => (await b.request('/api/v1/logstream/gone/stats')).status === 404);
    await waitFor(
      'no object of the deleted generation',
      async () => (await keys('gone/')).filter((k) => k.includes(generation)).length === 0 && (await keys('.streams/gone.json')).length === 0,
    );
    // A re-created dataset starts empty on every worker: none of the late events reappear in it.
    expect((await a.request('/api/v1/logstream/gone', { method: 'PUT' })).status).toBe(200);
    await waitFor('B sees the new one', async () => (await b.request('/api/v1/logstream/gone/stats')).status === 200);
    await sleep(1500);
    expect(await query(a, 'SELECT count(*) AS n FROM gone')).toEqual([{ n: 0 }]);
    expect(await query(b, 'SELECT count(*) AS n FROM gone')).toEqual([{ n: 0 }]);
  }, 90_000);

  it('a query on another worker after a delete is 404, not 500', async () => {
    const [a] = await shared();
    const [b] = await cold(); // has not heard of `vanish`
    expect((await a.request('/api/v1/logstream/vanish', { method: 'PUT' })).status).toBe(200);
    expect((await a.request('/api/v1/logstream/vanish', { method: 'POST', json: [{ n: 1 }] })).status).toBe(200);
    await waitFor('flushed on A', async () => (await stats(a, 'vanish')).storage.files > 0);
    // B loads the dataset and its catalog (no file downloaded yet), then A deletes it.
    expect((await stats(b, 'vanish')).storage.files).toBeGreaterThan(0);
    expect((await a.request('/api/v1/logstream/vanish', { method: 'DELETE' })).status).toBe(200);
    const res = await b.request('/api/v1/query', { method: 'POST', json: { query: 'SELECT count(*) AS n FROM vanish', startTime: '1h', endTime: 'now' } });
    await expectError(res, 404);
  }, 120_000);

  it('a bucket outage while a query must download a file: 503 with Retry-After, and the query works once the bucket is back', async () => {
    const [a] = await shared();
    const [, b] = await cold(); // has not heard of `dark`
    expect((await a.request('/api/v1/logstream/dark', { method: 'PUT' })).status).toBe(200);
    expect((await a.request('/api/v1/logstream/dark', { method: 'POST', json: [{ n: 1 }, { n: 2 }] })).status).toBe(200);
    await waitFor('flushed on A', async () => (await stats(a, 'dark')).storage.files > 0);
    expect((await stats(b, 'dark')).storage.files).toBeGreaterThan(0);
    await s3.stop();
    try {
      const res = await b.request('/api/v1/query', { method: 'POST', json: { query: 'SELECT count(*) AS n FROM dark', startTime: '1h', endTime: 'now' } });
      await expectError(res, 503);
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    } finally {
      await s3.start();
    }
    expect(await query(b, 'SELECT count(*) AS n FROM dark')).toEqual([{ n: 2 }]);
  }, 120_000);

  it('remote-write metric metadata sent to either worker is seen by both; concurrent requests lose none; it goes with the dataset', async () => {
    const [a, b] = await shared();
    const send = (w: TestServer, metadata: Parameters<typeof remoteWriteV1>[1]) =>
      w.request('/v1/prometheus/write?stream=shared_meta', {
        method: 'POST',
        body: new Uint8Array(remoteWriteV1([], metadata)),
        headers: { 'content-encoding': 'snappy', 'content-type': 'application/x-protobuf' },
      });
    const typesOn = async (w: TestServer) => {
      const res = await w.request('/api/v1/logstream/shared_meta/metric-metadata');
      expect(res.status).toBe(200);
      const body = (await res.json()) as Record<string, { type: string }[]>;
      return Object.fromEntries(Object.entries(body).map(([k, v]) => [k, v[0].type]));
    };
    expect((await send(a, [{ type: 1, family: 'x_total' }, { type: 2, family: 'y' }])).status).toBe(200);
    // B learns of the dataset from the store; its later metadata for x_total wins everywhere.
    expect((await send(b, [{ type: 3, family: 'z' }, { type: 2, family: 'x_total' }])).status).toBe(200);
    // Many requests at once over both workers, each with a family of its own.
    await burst([a, b], 20, (w, i) => send(w, [{ type: 2, family: `burst_${i}` }]));
    const want: Record<string, string> = { x_total: 'gauge', y: 'gauge', z: 'histogram', ...Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`burst_${i}`, 'gauge'])) };
    // Read from the store at each request: no refresh to wait for.
    expect(await typesOn(a)).toEqual(want);
    expect(await typesOn(b)).toEqual(want);
    // The bucket is down: a metadata-only request is not acknowledged (Prometheus sends it again), and
    // once the bucket is back the same request is, and both workers see it.
    const late = [{ type: 5, family: 'late_summary' }];
    await s3.stop();
    try {
      const res = await send(a, late);
      await expectError(res, 503);
    } finally {
      await s3.start();
    }
    expect((await send(a, late)).status).toBe(200);
    Object.assign(want, { late_summary: 'summary' });
    expect(await typesOn(b)).toEqual(want);
    // One object per worker, under the dataset's generation.
    const objects = await keys('shared_meta/.metric-metadata/');
    expect(objects.map((k) => k.split('/').pop()).sort()).toEqual(['w0.json', 'w1.json']);
    expect((await a.request('/api/v1/logstream/shared_meta', { method: 'DELETE' })).status).toBe(200);
    expect(await keys('shared_meta/.metric-metadata/')).toEqual([]);
  }, 120_000);
});
