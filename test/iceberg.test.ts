import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { javaCounts, readerCounts, snapshotRows, sparkCounts, type ReaderArgs } from './helpers/iceberg.ts';
import { s3Env, startS3Server, type S3TestServer } from './helpers/s3server.ts';
import { query, startServer, type TestServer } from './helpers/server.ts';
import { remoteWriteV1 } from './helpers/wire.ts';

/**
 * The lake (docs/lake.md): every dataset is an Iceberg v2 table served by the service's read-only REST
 * catalog, read here by real readers — pyiceberg 0.12 and DuckDB 1.5.5's iceberg extension
 * (test/fixtures/iceberg/readers.py, provisioned by scripts/test-setup.d/70-iceberg-readers.sh). Each
 * reader's count, with and without a time filter, must equal the service's own SQL over the same range
 * and the count of the rows sent, for a JSON dataset, OTLP logs, traces and metrics and a remote-write
 * dataset, on local disk and on S3 (moto).
 */

const HOUR = 3_600_000;
const MIN = 60_000;
/** One row every 10 minutes over three hours, ending four hours ago (several hour partitions). */
const base = Math.floor((Date.now() - 4 * HOUR) / HOUR) * HOUR;
const times = Array.from({ length: 18 }, (_, i) => base + i * 10 * MIN + 7_123);
const range = { start: base + 35 * MIN, end: base + 95 * MIN };
const inRange = times.filter((t) => t >= range.start && t < range.end).length;
const nanos = (ms: number) => String(BigInt(ms) * 1_000_000n + 456_789n);
/** Readers' timestamps are zone-less UTC. */
const naive = (ms: number) => new Date(ms).toISOString().replace('Z', '');

const SENDERS: Record<string, { timeColumn: string; send: (s: TestServer, name: string) => Promise<Response> }> = {
  json: {
    timeColumn: 'event_time',
    send: async (s, name) => {
      const created = await s.request(`/api/v1/logstream/${name}`, { method: 'PUT', headers: { 'x-p-time-partition': 'event_time' } });
      expect(created.status, await created.text()).toBe(200);
      const events = times.map((t, i) => ({ event_time: new Date(t).toISOString(), n: i, 'http.route': `/r/${i % 3}` }));
      return s.request('/api/v1/ingest', { method: 'POST', headers: { 'x-p-stream': name }, json: events });
    },
  },
  'otel-logs': {
    timeColumn: 'p_time_us',
    send: (s, name) =>
      otlp(s, '/v1/logs', name, {
        resourceLogs: [{ resource: { attributes: [attr('service.name', 'lake')] }, scopeLogs: [{ logRecords: times.map((t, i) => ({ timeUnixNano: nanos(t), body: { stringValue: `line ${i}` }, attributes: [attr('http.method', 'GET')] })) }] }],
      }),
  },
  'otel-traces': {
    timeColumn: 'p_time_us',
    send: (s, name) =>
      otlp(s, '/v1/traces', name, {
        resourceSpans: [
          {
            resource: { attributes: [attr('service.name', 'lake')] },
            scopeSpans: [{ spans: times.map((t, i) => ({ traceId: 'ab'.repeat(15) + String(i).padStart(2, '0'), spanId: 'cd'.repeat(7) + String(i).padStart(2, '0'), name: 'op', kind: 2, startTimeUnixNano: nanos(t), endTimeUnixNano: nanos(t + 5) })) }],
          },
        ],
      }),
  },
  'otel-metrics': {
    timeColumn: 'p_time_us',
    send: (s, name) =>
      otlp(s, '/v1/metrics', name, {
        resourceMetrics: [{ resource: { attributes: [attr('service.name', 'lake')] }, scopeMetrics: [{ metrics: [{ name: 'queue.depth', gauge: { dataPoints: times.map((t, i) => ({ timeUnixNano: nanos(t), asDouble: i + 0.5 })) } }] }] }],
      }),
  },
  'remote-write': {
    timeColumn: 'p_time_us',
    send: (s, name) =>
      s.request(`/v1/prometheus/write?stream=${name}`, {
        method: 'POST',
        headers: { 'content-encoding': 'snappy', 'content-type': 'application/x-protobuf', 'x-prometheus-remote-write-version': '0.1.0' },
        body: new Uint8Array(remoteWriteV1([{ labels: [['__name__', 'up'], ['job', 'lake']], samples: times.map((t, i) => ({ value: i, timestampMs: t })) }])),
      }),
  },
};

function attr(key: string, value: string) {
  return { key, value: { stringValue: value } };
}

function otlp(s: TestServer, path: string, name: string, body: unknown): Promise<Response> {
  return s.request(path, { method: 'POST', headers: { 'x-p-stream': name }, json: body });
}

/** The service's own count over the whole dataset and over the range. */
async function serviceCounts(s: TestServer, name: string): Promise<[number, number]> {
  const sql = `SELECT count(*) AS c FROM "${name}"`;
  const all = await query(s, sql);
  const part = await query(s, sql, { startTime: new Date(range.start).toISOString(), endTime: new Date(range.end).toISOString() });
  return [Number(all[0].c), Number(part[0].c)];
}

const BACKENDS: [string, () => Promise<{ env: Record<string, string>; s3?: S3TestServer }>][] = [
  ['local disk', async () => ({ env: {} })],
  [
    'S3 (moto)',
    async () => {
      const s3 = await startS3Server();
      return { env: s3Env(s3), s3 };
    },
  ],
];

describe.each(BACKENDS)('Iceberg readers over the REST catalog, %s', (_backend, backend) => {
  let server: TestServer;
  let s3: S3TestServer | undefined;

  beforeAll(async () => {
    const b = await backend();
    s3 = b.s3;
    server = await startServer({ env: { ...b.env, P_FLUSH_INTERVAL: '1s', P_ICEBERG_INTERVAL: '1s' } });
    for (const [kind, sender] of Object.entries(SENDERS)) {
      const res = await sender.send(server, name(kind));
      expect(res.status, await res.text()).toBeLessThan(300);
    }
  }, 120_000);

  afterAll(async () => {
    await server?.stop();
    await s3?.close();
  });

  const name = (kind: string) => `lake_${kind.replace('-', '_')}`;

  it.each(Object.keys(SENDERS))('%s: pyiceberg and DuckDB count what the service counts, with and without a time filter', async (kind) => {
    const args: ReaderArgs = {
      uri: `${server.url}/iceberg`,
      key: server.apiKey,
      table: name(kind),
      timeColumn: SENDERS[kind].timeColumn,
      start: naive(range.start),
      end: naive(range.end),
      s3: s3 && { endpoint: s3.endpoint, accessKey: s3.accessKey, secretKey: s3.secretKey, region: 'us-east-1' },
    };
    const expected: [number, number] = [times.length, inRange];
    // The service itself first: the reference the readers are compared with.
    await expect.poll(() => serviceCounts(server, name(kind)), { timeout: 30_000 }).toEqual(expected);
    // Flushed and published within P_FLUSH_INTERVAL + P_ICEBERG_INTERVAL.
    await expect.poll(() => readerCounts(args), { timeout: 60_000, interval: 1000 }).toEqual({ pyiceberg: expected, duckdb: expected });
  }, 120_000);
});

describe('Spark 4.0 local and Java iceberg-core (the JVM readers), local disk', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({ env: { P_FLUSH_INTERVAL: '1s', P_ICEBERG_INTERVAL: '1s' } });
  }, 60_000);
  afterAll(() => server?.stop());

  // Spark reads Iceberg `timestamp` as TIMESTAMP_NTZ: a nanosecond column registered as `timestamp` would
  // be read as microseconds here and the range count would be 0 (the trap docs/lake.md describes).
  it('count what the service counts for every kind of dataset, with and without a time filter (one JVM each)', async () => {
    const tables: Record<string, string> = {};
    for (const [kind, sender] of Object.entries(SENDERS)) {
      const name = `spark_${kind.replace('-', '_')}`;
      const res = await sender.send(server, name);
      expect(res.status, await res.text()).toBeLessThan(300);
      tables[name] = sender.timeColumn;
    }
    const expected: Record<string, [number, number]> = {};
    for (const name of Object.keys(tables)) {
      expected[name] = [times.length, inRange];
      await expect.poll(() => serviceCounts(server, name), { timeout: 30_000 }).toEqual(expected[name]);
      // Published (pyiceberg sees every row) before the one Spark run.
      const args = { uri: `${server.url}/iceberg`, key: server.apiKey, table: name, timeColumn: tables[name], start: naive(range.start), end: naive(range.end) };
      await expect.poll(async () => (await readerCounts(args)).pyiceberg[0], { timeout: 60_000, interval: 1000 }).toBe(times.length);
    }
    const jvm = { uri: `${server.url}/iceberg`, key: server.apiKey, start: naive(range.start), end: naive(range.end), tables };
    expect(await sparkCounts(jvm)).toEqual(expected);
    expect(await javaCounts(jvm)).toEqual(expected);
  }, 400_000);
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
    expect(await operations('widened')).toContain('overwrite');
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
  const workers: TestServer[] = [];
  beforeAll(async () => {
    s3 = await startS3Server();
    for (const id of ['w1', 'w2', 'w3']) {
      workers.push(await startServer({ env: { ...s3Env(s3), P_NODE_ID: id, P_FLUSH_INTERVAL: '1s', P_ICEBERG_INTERVAL: '1s', P_CATALOG_REFRESH: '1s' } }));
    }
  }, 120_000);
  afterAll(async () => {
    for (const w of workers) await w.stop();
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
