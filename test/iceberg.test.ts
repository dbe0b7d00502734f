import * as fs from 'node:fs/promises';
import * as net from 'node:net';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readerCounts, type ReaderArgs } from './helpers/iceberg.ts';
import { inRange, naive, range, SENDERS, serviceCounts, times, LAKE_BACKENDS } from './helpers/lakeData.ts';
import type { S3TestServer } from './helpers/s3server.ts';
import { startServer, type TestServer } from './helpers/server.ts';

/**
 * The lake (docs/lake.md): every dataset is an Iceberg v2 table served by the service's read-only REST
 * catalog, read here by real readers — pyiceberg 0.12 and DuckDB 1.5.5's iceberg extension
 * (test/fixtures/iceberg/readers.py, provisioned by scripts/test-setup.d/70-iceberg-readers.sh). Each
 * reader's count, with and without a time filter, must equal the service's own SQL over the same range
 * and the count of the rows sent, for a JSON dataset, OTLP logs, traces and metrics and a remote-write
 * dataset, on local disk and on S3 (moto) — there the readers reach the bucket by another address than
 * the workers (P_ICEBERG_S3_PUBLIC_ENDPOINT: a relay on 127.0.0.2) —; and the catalog door's own contract. The JVM readers are in
 * icebergJvm.test.ts, consistency under compaction, retention, several workers and crashes in
 * icebergConsistency.test.ts.
 */


/**
 * The readers' address of the bucket: a TCP relay on another loopback address (127.0.0.2) to the S3
 * server the workers reach at 127.0.0.1, counting the connections it relays.
 */
async function readersAddress(target: string): Promise<{ endpoint: string; connections: () => number; close: () => Promise<void> }> {
  const { hostname, port } = new URL(target);
  let connections = 0;
  const relay = net.createServer((client) => {
    connections++;
    const upstream = net.connect(Number(port), hostname);
    client.on('error', () => upstream.destroy()).pipe(upstream).on('error', () => client.destroy()).pipe(client);
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.2', resolve));
  return {
    endpoint: `http://127.0.0.2:${(relay.address() as net.AddressInfo).port}`,
    connections: () => connections,
    close: () => new Promise<void>((r) => relay.close(() => r())),
  };
}

describe.each(LAKE_BACKENDS)('Iceberg readers over the REST catalog, %s', (_backend, backend) => {
  let server: TestServer;
  let s3: S3TestServer | undefined;
  let readers: Awaited<ReturnType<typeof readersAddress>> | undefined;

  beforeAll(async () => {
    const b = await backend();
    s3 = b.s3;
    readers = s3 && (await readersAddress(s3.endpoint));
    const publicEndpoint: Record<string, string> = readers ? { P_ICEBERG_S3_PUBLIC_ENDPOINT: readers.endpoint } : {};
    server = await startServer({ env: { ...b.env, ...publicEndpoint, P_FLUSH_INTERVAL: '1s', P_ICEBERG_INTERVAL: '1s' } });
    for (const [kind, sender] of Object.entries(SENDERS)) {
      const res = await sender.send(server, name(kind));
      expect(res.status, await res.text()).toBeLessThan(300);
    }
  }, 120_000);

  afterAll(async () => {
    await server?.stop();
    await readers?.close();
    await s3?.close();
  });

  const name = (kind: string) => `lake_${kind.replace('-', '_')}`;
  // pyiceberg takes the endpoint from LoadTable (P_ICEBERG_S3_PUBLIC_ENDPOINT); DuckDB, which vends none, is given the same.
  const s3Args = () => s3 && { endpoint: readers!.endpoint, accessKey: s3.accessKey, secretKey: s3.secretKey, region: 'us-east-1' };

  it.each(Object.keys(SENDERS))('%s: pyiceberg and DuckDB count what the service counts, with and without a time filter', async (kind) => {
    const args: ReaderArgs = {
      uri: `${server.url}/iceberg`,
      key: server.apiKey,
      table: name(kind),
      timeColumn: SENDERS[kind].timeColumn,
      start: naive(range.start),
      end: naive(range.end),
      s3: s3Args(),
    };
    const expected: [number, number] = [times.length, inRange];
    // The service itself first: the reference the readers are compared with.
    await expect.poll(() => serviceCounts(server, name(kind)), { timeout: 30_000 }).toEqual(expected);
    // Flushed and published within P_FLUSH_INTERVAL + P_ICEBERG_INTERVAL.
    await expect.poll(() => readerCounts(args), { timeout: 60_000, interval: 1000 }).toEqual({ pyiceberg: expected, duckdb: expected });
  }, 120_000);

  it('hands readers where the files are: P_ICEBERG_S3_PUBLIC_ENDPOINT on S3 (the workers never use it), file:// on local disk', async () => {
    const load = async () =>
      (await (await fetch(`${server.url}/iceberg/v1/namespaces/lakehouse/tables/lake_json`, { headers: { authorization: `Bearer ${server.apiKey}` } })).json()) as {
        'metadata-location': string;
        config: Record<string, string>;
      };
    const before = await load();
    if (!s3) {
      // Local disk: locations on this machine's file system, no object-store settings to hand out.
      expect(before['metadata-location']).toMatch(/^file:\/\//);
      expect(before.config?.['s3.endpoint']).toBeUndefined();
      return;
    }
    expect(before.config['s3.endpoint']).toBe(readers!.endpoint);
    // The workers flush and commit a new version (PUTs to the bucket), all by P_S3_URL: none through the readers' address.
    const relayed = readers!.connections();
    const more = await server.request('/api/v1/ingest', { method: 'POST', headers: { 'x-p-stream': 'lake_json' }, json: [{ event_time: naive(range.start) + 'Z', n: -1 }] });
    expect(more.status, await more.text()).toBe(200);
    await expect.poll(async () => (await load())['metadata-location'], { timeout: 30_000 }).not.toBe(before['metadata-location']);
    expect(readers!.connections()).toBe(relayed);
    // pyiceberg, given no endpoint, reads the new snapshot's files through the one LoadTable handed it.
    const counts = await readerCounts({ uri: `${server.url}/iceberg`, key: server.apiKey, table: 'lake_json', timeColumn: 'event_time', start: naive(range.start), end: naive(range.end), s3: s3Args(), pyicebergOnly: true });
    expect(counts.pyiceberg).toEqual(await serviceCounts(server, 'lake_json'));
    expect(readers!.connections()).toBeGreaterThan(relayed);
  }, 120_000);
});

describe('the REST catalog door', () => {
  let server: TestServer;
  const SCOPED = 'scoped-reader-key-0123456789';
  const get = (path: string, key = server.apiKey, method = 'GET') => fetch(`${server.url}/iceberg/v1${path}`, { method, headers: { authorization: `Bearer ${key}` } });

  beforeAll(async () => {
    server = await startServer({ env: { P_API_KEYS: `test-admin-key-0123456789:admin,${SCOPED}:reader:seen`, P_FLUSH_INTERVAL: '1s', P_ICEBERG_INTERVAL: '1s' } });
    for (const name of ['seen', 'hidden', 'doomed']) {
      const res = await server.request('/api/v1/ingest', { method: 'POST', headers: { 'x-p-stream': name }, json: [{ a: 1 }] });
      expect(res.status).toBe(200);
    }
  }, 60_000);
  afterAll(() => server?.stop());

  it('answers config, namespaces and tables; a scoped key sees only its datasets', async () => {
    expect(await (await get('/config')).json()).toEqual({ defaults: {}, overrides: {} });
    expect(await (await get('/namespaces')).json()).toEqual({ namespaces: [['lakehouse']] });
    expect((await get('/namespaces/lakehouse')).status).toBe(200);
    expect((await get('/namespaces/other')).status).toBe(404);
    const names = async (key: string) => ((await (await get('/namespaces/lakehouse/tables', key)).json()) as { identifiers: { name: string }[] }).identifiers.map((i) => i.name).sort();
    expect(await names(server.apiKey)).toEqual(['doomed', 'hidden', 'seen']);
    expect(await names(SCOPED)).toEqual(['seen']);
    await expect.poll(async () => (await get('/namespaces/lakehouse/tables/seen', SCOPED)).status, { timeout: 30_000 }).toBe(200);
    expect((await get('/namespaces/lakehouse/tables/seen', SCOPED, 'HEAD')).status).toBe(204);
    const hidden = await get('/namespaces/lakehouse/tables/hidden', SCOPED);
    expect(hidden.status).toBe(404);
    expect(await hidden.json()).toMatchObject({ error: { type: 'NoSuchTableException', code: 404 } });
  });

  it('exchanges a key for a token (OAuth2 client_credentials) and refuses a bad one', async () => {
    const token = async (secret: string) =>
      fetch(`${server.url}/iceberg/v1/oauth/tokens`, { method: 'POST', body: new URLSearchParams({ grant_type: 'client_credentials', client_id: 'x', client_secret: secret, scope: 'catalog' }) });
    const ok = await token(SCOPED);
    expect(ok.status).toBe(200);
    const { access_token } = (await ok.json()) as { access_token: string };
    expect((await get('/namespaces/lakehouse/tables', access_token)).status).toBe(200);
    expect((await token('wrong')).status).toBe(401);
    const noKey = await fetch(`${server.url}/iceberg/v1/namespaces`);
    expect(noKey.status).toBe(401);
    expect(await noKey.json()).toMatchObject({ error: { type: 'NotAuthorizedException', code: 401 } });
  });

  it.each([
    ['POST', '/namespaces'],
    ['POST', '/namespaces/lakehouse/tables'],
    ['POST', '/namespaces/lakehouse/tables/seen'],
    ['DELETE', '/namespaces/lakehouse/tables/seen'],
    ['POST', '/tables/rename'],
    ['POST', '/transactions/commit'],
  ])('refuses %s %s with 403 in the spec error model', async (method, path) => {
    const res = await fetch(`${server.url}/iceberg/v1${path}`, { method, headers: { authorization: `Bearer ${server.apiKey}`, 'content-type': 'application/json' }, body: '{}' });
    expect(res.status).toBe(403);
    expect(await res.json()).toMatchObject({ error: { type: 'ForbiddenException', code: 403 } });
  });

  it("answers 404 for a deleted dataset's table, and its metadata goes with it", async () => {
    await expect.poll(async () => (await get('/namespaces/lakehouse/tables/doomed')).status, { timeout: 30_000 }).toBe(200);
    expect((await server.request('/api/v1/logstream/doomed', { method: 'DELETE' })).status).toBe(200);
    expect((await get('/namespaces/lakehouse/tables/doomed')).status).toBe(404);
    const left = () => fs.readdir(path.join(server.dataDir, 'store', 'doomed'), { recursive: true }).catch(() => [] as string[]);
    await expect.poll(async () => (await left()).filter((f) => /\.(json|avro)$/.test(String(f)) && String(f).includes('.iceberg')), { timeout: 30_000 }).toEqual([]);
  });

  it('counts commits in /metrics', async () => {
    const text = await (await server.request('/metrics')).text();
    expect(Number(/lakehouse_iceberg_commits_total\{result="committed"\} (\d+)/.exec(text)?.[1])).toBeGreaterThan(0);
    expect(text).toMatch(/lakehouse_iceberg_lag_seconds\{dataset="seen"\} /);
  });
});

describe('P_ICEBERG=off', () => {
  it('publishes nothing and the catalog answers 404', async () => {
    const server = await startServer({ env: { P_ICEBERG: 'off' } });
    try {
      const res = await fetch(`${server.url}/iceberg/v1/config`, { headers: { authorization: `Bearer ${server.apiKey}` } });
      expect(res.status).toBe(404);
    } finally {
      await server.stop();
    }
  }, 60_000);
});

