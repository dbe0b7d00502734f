import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs/promises';
import * as http from 'node:http';
import * as net from 'node:net';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError } from './helpers/assert.ts';
import { listFiles } from './helpers/files.ts';
import { sleep, waitFor } from './helpers/wait.ts';
import { s3Env, startS3Server, type S3TestServer } from './helpers/s3server.ts';
import { ADMIN_KEY, startServer, tempDir, type TestServer } from './helpers/server.ts';

/**
 * What no key (and no one without a key) can do to the service or learn from it (docs/security.md):
 * each case is an attack through the real process.
 */

const READER = 'reader-key-app-only-0123456789';
const as = (key: string) => ({ headers: { 'x-api-key': key } });

describe('saved filters are bounded', () => {
  let server: TestServer;
  let bigKey: string;
  const filter = (name: string, sql = 'select * from app') => ({ stream_name: 'app', filter_name: name, query: { filter_type: 'sql', filter_query: sql } });

  beforeAll(async () => {
    // A filter object far over the limit, saved before the limit existed: set aside at start-up.
    const dataDir = await tempDir();
    const dir = path.join(dataDir, 'store', '.filters');
    await fs.mkdir(dir, { recursive: true });
    bigKey = 'oversized-from-before';
    const big = { ...filter('huge', `select 1 -- ${'x'.repeat(2 * 1024 * 1024)}`), filter_id: bigKey, user_id: 'someone', version: 'v2' };
    await fs.writeFile(path.join(dir, `${bigKey}.json`), JSON.stringify(big));
    server = await startServer({ dataDir, env: { P_API_KEYS: `${ADMIN_KEY}:admin,${READER}:reader:app`, P_FILTERS_PER_KEY: '3' } });
    // A filter names a dataset that exists.
    expect((await server.request('/api/v1/logstream/app', { method: 'PUT' })).status).toBe(200);
  });
  afterAll(() => server?.stop());

  it('an object over the size limit found at start-up is moved aside, and the listing answers without it', async () => {
    const moved = path.join(server.dataDir, 'store', '.filters-set-aside', `${bigKey}.json`);
    const original = path.join(server.dataDir, 'store', '.filters', `${bigKey}.json`);
    const exists = (p: string) => fs.stat(p).then(() => true, () => false);
    const deadline = Date.now() + 30_000;
    while (!(await exists(moved)) || (await exists(original))) {
      if (Date.now() > deadline) throw new Error(`not set aside:\n${server.logs()}`);
      await sleep(100);
    }
    const res = await server.request('/api/v1/filters', as(READER));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual([]);
  });

  it('a filter over P_FILTER_MAX_BYTES is refused with 413, by POST and PUT', async () => {
    const huge = filter('huge', `select 1 -- ${'x'.repeat(300 * 1024)}`);
    await expectError(await server.request('/api/v1/filters', { method: 'POST', json: huge, ...as(READER) }), 413);
    const small = (await (await server.request('/api/v1/filters', { method: 'POST', json: filter('small'), ...as(READER) })).json()) as { filter_id: string };
    await expectError(await server.request(`/api/v1/filters/${small.filter_id}`, { method: 'PUT', json: huge, ...as(READER) }), 413);
    expect((await server.request(`/api/v1/filters/${small.filter_id}`, { method: 'DELETE', ...as(READER) })).status).toBe(200);
  });

  it('a key owns at most P_FILTERS_PER_KEY filters (409 past it, concurrent saves included); other keys are not affected', async () => {
    const saves = await Promise.all(
      Array.from({ length: 6 }, (_, i) => server.request('/api/v1/filters', { method: 'POST', json: filter(`f${i}`), ...as(READER) })),
    );
    const statuses = saves.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 200, 200, 409, 409, 409]);
    const listed = (await (await server.request('/api/v1/filters', as(READER))).json()) as { filter_name: string }[];
    expect(listed).toHaveLength(3);
    // The admin still saves; after a delete the reader saves again.
    expect((await server.request('/api/v1/filters', { method: 'POST', json: filter('admin') })).status).toBe(200);
    const mine = (await (await server.request('/api/v1/filters', as(READER))).json()) as { filter_id: string; filter_name: string }[];
    const own = mine.find((f) => f.filter_name !== 'admin')!;
    expect((await server.request(`/api/v1/filters/${own.filter_id}`, { method: 'DELETE', ...as(READER) })).status).toBe(200);
    expect((await server.request('/api/v1/filters', { method: 'POST', json: filter('again'), ...as(READER) })).status).toBe(200);
  });
});

describe('connections are bounded', () => {
  let server: TestServer;
  const sockets: net.Socket[] = [];
  const port = () => Number(new URL(server.url).port);
  /** Opens a TCP connection and resolves once it is connected (or refused/reset). */
  const connect = () =>
    new Promise<net.Socket>((resolve) => {
      const s = net.connect(port(), '127.0.0.1');
      s.on('error', () => undefined);
      s.once('connect', () => resolve(s));
      s.once('close', () => resolve(s));
      sockets.push(s);
    });
  const allClosed = async (list: net.Socket[], what: string) => {
    const deadline = Date.now() + 30_000;
    while (list.some((s) => !s.destroyed)) {
      if (Date.now() > deadline) throw new Error(`${list.filter((s) => !s.destroyed).length} ${what} still open`);
      await sleep(100);
    }
  };

  beforeAll(async () => {
    server = await startServer({ env: { P_MAX_CONNECTIONS: '40', P_HEADERS_TIMEOUT: '1s' } });
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await server?.stop();
  });

  it('connections that never send a byte are closed after P_HEADERS_TIMEOUT, beyond the cap at once; the service stays reachable', async () => {
    const silent = await Promise.all(Array.from({ length: 60 }, connect));
    for (const s of silent) s.on('data', () => undefined);
    // Reachable while they are open: a probe may be dropped at the cap, but one gets through once the
    // silent ones have had their second.
    const deadline = Date.now() + 30_000;
    for (;;) {
      const ok = await fetch(`${server.url}/api/v1/liveness`).then((r) => r.ok, () => false);
      if (ok) break;
      if (Date.now() > deadline) throw new Error('liveness never answered');
      await sleep(200);
    }
    await allClosed(silent, 'silent connections');
  });

  it('idle keep-alive connections (a request without a key, then nothing) give way to new clients near the cap', async () => {
    const idle: net.Socket[] = [];
    for (let i = 0; i < 30; i++) {
      const s = await connect();
      await new Promise<void>((resolve) => {
        s.once('data', () => resolve());
        s.write(`GET /api/v1/about HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n`);
      });
      idle.push(s);
    }
    await sleep(1500); // longer than P_HEADERS_TIMEOUT: idle is not silent
    expect(idle.filter((s) => !s.destroyed)).toHaveLength(30);
    // Near the cap (nine tenths of 40), a new connection closes the idle ones; the new client is served.
    const more = await Promise.all(Array.from({ length: 8 }, connect));
    // A new connection (fetch's pool may hold one the server has just closed as idle).
    const status = await new Promise<number>((resolve, reject) => {
      http.get(`${server.url}/api/v1/about`, { agent: false, headers: { 'x-api-key': ADMIN_KEY } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      }).on('error', reject);
    });
    for (const s of more) s.destroy();
    expect(status).toBe(200);
    await allClosed(idle, 'idle keep-alive connections');
  });
});

describe('what a scoped key learns', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({ env: { P_API_KEYS: `${ADMIN_KEY}:admin,${READER}:reader:app` } });
    for (const name of ['app', 'secretstuff']) {
      expect((await server.request(`/api/v1/logstream/${name}`, { method: 'PUT' })).status).toBeLessThan(300);
      expect((await server.request(`/api/v1/logstream/${name}`, { method: 'POST', json: [{ msg: 'x' }] })).status).toBe(200);
    }
  });
  afterAll(() => server?.stop());

  it('/metrics: per-dataset series of its own datasets only (an admin: all)', async () => {
    const mine = await (await server.request('/metrics', as(READER))).text();
    expect(mine).toMatch(/lakehouse_ingested_rows_total\{dataset="app"\} 1/);
    expect(mine).not.toContain('secretstuff');
    expect(mine).toMatch(/lakehouse_http_requests_total/); // the service's own series stay
    const all = await (await server.request('/metrics')).text();
    expect(all).toMatch(/lakehouse_ingested_rows_total\{dataset="secretstuff"\} 1/);
  });

  it('readiness details and the data directory in /about are for admin keys only', async () => {
    expect(await (await server.request('/api/v1/readiness', as(READER))).json()).toEqual({ ready: true });
    expect(await (await server.request('/api/v1/readiness')).json()).toMatchObject({ ready: true, storage: 'reachable', quarantined: [] });
    const about = await (await server.request('/api/v1/about', as(READER))).text();
    expect(about).not.toContain(server.dataDir);
    expect(await (await server.request('/api/v1/about')).text()).toContain(server.dataDir);
  });

  it('counts answers 403 alike for a dataset it may not read, whether it exists or not (as queries do)', async () => {
    const range = { startTime: new Date(Date.now() - 3_600_000).toISOString(), endTime: new Date(Date.now() + 60_000).toISOString() };
    const counts = (stream: string, key = READER) => server.request('/api/v1/counts', { method: 'POST', json: { stream, ...range }, ...as(key) });
    const existing = await expectError(await counts('secretstuff'), 403);
    const missing = await expectError(await counts('nosuchdataset'), 403);
    expect(missing.replace('nosuchdataset', 'X')).toBe(existing.replace('secretstuff', 'X'));
    await expectError(await counts('nosuchdataset', ADMIN_KEY), 404);
    expect((await counts('app')).status).toBe(200);
  });
});

describe('query admission: no set of keys takes every slot', () => {
  let server: TestServer;
  const A = 'heavy-reader-a-0123456789';
  const B = 'heavy-reader-b-0123456789';
  const C = 'light-reader-c-0123456789';
  beforeAll(async () => {
    server = await startServer({
      env: {
        P_API_KEYS: `${ADMIN_KEY}:admin,${A}:reader,${B}:reader,${C}:reader`,
        P_QUERY_CONCURRENCY: '4',
        P_QUERY_CONCURRENCY_PER_KEY: '2',
        P_QUERY_THREADS: '1',
        P_QUERY_TIMEOUT: '60s',
      },
    });
  });
  afterAll(() => server?.stop());

  const ask = (key: string, sql: string, signal?: AbortSignal) =>
    fetch(`${server.url}/api/v1/query`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'content-type': 'application/json' },
      body: JSON.stringify({ query: sql, startTime: '10m', endTime: 'now' }),
      signal,
    });
  const gauge = async (name: string) => Number(new RegExp(`^${name} (\\d+)`, 'm').exec(await (await server.request('/metrics')).text())?.[1] ?? NaN);

  it('an admin\'s and a third key\'s small queries answer while two keys run heavy queries at their limit', async () => {
    const stop = new AbortController();
    // Two keys, each with as many heavy queries as its limit allows (they run until cancelled).
    const heavy = [A, A, B, B].map((key) => {
      let settled = false;
      const p = ask(key, 'SELECT sum(a.range * b.range) AS s FROM range(100000000) a, range(1000) b', stop.signal).then(
        (r) => r.text(),
        () => undefined,
      );
      void p.finally(() => (settled = true));
      return { isSettled: () => settled };
    });
    try {
      // Wait until the heavy queries hold what admission gives them (three running, one waiting).
      const deadline = Date.now() + 60_000;
      const held = async () => (await gauge('lakehouse_queries_waiting')) + (await gauge('lakehouse_query_workers{state="busy"}'));
      while ((await held()) < 4) {
        if (Date.now() > deadline) throw new Error(`heavy queries did not start:\n${await (await server.request('/metrics')).text()}`);
        await sleep(100);
      }
      for (const key of [ADMIN_KEY, C]) {
        const res = await ask(key, 'SELECT 42 AS answer');
        expect(res.status, await res.clone().text()).toBe(200);
        expect(await res.json()).toEqual([{ answer: 42 }]);
      }
      // Answered while every heavy query was still running or waiting.
      expect(heavy.filter((h) => h.isSettled())).toHaveLength(0);
    } finally {
      stop.abort();
    }
  });
});

describe('S3: a damaged cached copy or a frozen bucket', () => {
  let s3: S3TestServer;
  const servers: TestServer[] = [];
  let env: Record<string, string>;
  const ROWS = 1000;
  const RANGE = { startTime: '2000-01-01T00:00:00Z', endTime: '2100-01-01T00:00:00Z' };
  const countOn = async (server: TestServer, range = RANGE) => {
    const res = await server.request('/api/v1/query', { method: 'POST', json: { query: 'SELECT count(*) AS n FROM (SELECT DISTINCT * FROM cached)', ...range } });
    return { status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.text() };
  };
  /** Every cached copy of a Parquet file under a worker's data directory. */
  const cachedCopies = async (server: TestServer) => {
    const out: string[] = [];
    const walk = async (d: string): Promise<void> => {
      for (const e of await fs.readdir(d, { withFileTypes: true }).catch(() => [])) {
        const p = path.join(d, e.name);
        if (e.isDirectory()) await walk(p);
        else if (e.name.endsWith('.parquet')) out.push(p);
      }
    };
    await walk(path.join(server.dataDir, 'cache'));
    return out;
  };

  beforeAll(async () => {
    s3 = await startS3Server();
    env = { ...s3Env(s3), P_FLUSH_INTERVAL: '300ms', P_CATALOG_REFRESH: '300ms', P_QUERY_TIMEOUT: '5s' };
    const a = await startServer({ env: { ...env, P_NODE_ID: 'sa' } });
    servers.push(a);
    expect((await a.request('/api/v1/logstream/cached', { method: 'PUT' })).status).toBe(200);
    const rows = Array.from({ length: ROWS }, (_, i) => ({ i, msg: `row ${i}` }));
    expect((await a.request('/api/v1/logstream/cached', { method: 'POST', json: rows })).status).toBe(200);
    // Every row in Parquet in the bucket (none left in the WAL).
    await waitFor('flushed', async () => {
      const s = (await (await a.request('/api/v1/logstream/cached/stats')).json()) as { storage: { files: number }; wal: { count: number } };
      return s.storage.files > 0 && s.wal.count === 0;
    });
  }, 120_000);
  afterAll(async () => {
    s3?.thaw();
    for (const s of servers) await s.kill();
    await s3?.close();
  });

  it('a cached copy truncated, deleted or changed (same size) on disk is downloaded again: every query answers every row', async () => {
    const a = servers[0];
    expect(JSON.parse((await countOn(a)).body)).toEqual([{ n: ROWS }]);
    const copies = await cachedCopies(a);
    expect(copies.length).toBeGreaterThan(0);
    for (const f of copies) await fs.truncate(f, 100);
    expect(JSON.parse((await countOn(a)).body)).toEqual([{ n: ROWS }]);
    for (const f of await cachedCopies(a)) await fs.rm(f);
    expect(JSON.parse((await countOn(a)).body)).toEqual([{ n: ROWS }]);
    // The same size, bytes of a page changed: DuckDB cannot decode it; the copy is fetched again.
    for (const f of await cachedCopies(a)) {
      const body = await fs.readFile(f);
      for (let k = 0; k < 8; k++) body[60 + k] ^= 0xff;
      await fs.writeFile(f, body);
    }
    const changed = await countOn(a);
    expect(changed.status, changed.body).toBe(200);
    expect(JSON.parse(changed.body)).toEqual([{ n: ROWS }]);
    // The intact objects in the bucket are not blamed.
    const ready = (await (await a.request('/api/v1/readiness')).json()) as { quarantined: unknown[] };
    expect(ready.quarantined).toEqual([]);
  });

  it('a query that must download from a frozen bucket answers 503 with Retry-After within the time limit', async () => {
    const b = await startServer({ env: { ...env, P_NODE_ID: 'sb' } });
    servers.push(b);
    // B knows the dataset and its files (from the catalog), and has downloaded none of them.
    await waitFor('B knows the files', async () => {
      const res = await b.request('/api/v1/logstream/cached/stats');
      return res.status === 200 && ((await res.json()) as { storage: { files: number } }).storage.files > 0;
    });
    expect((await countOn(b, { startTime: '2000-01-01T00:00:00Z', endTime: '2000-01-02T00:00:00Z' })).status).toBe(200);
    s3.freeze();
    try {
      const started = Date.now();
      const frozen = await countOn(b);
      const ms = Date.now() - started;
      expect(frozen.status, frozen.body).toBe(503);
      expect(Number(frozen.retryAfter)).toBeGreaterThan(0);
      // Within the 5 s limit, give or take a busy machine (the SDK alone waited 45-130 s).
      expect(ms).toBeLessThan(30_000);
    } finally {
      s3.thaw();
    }
    await waitFor('B answers again', async () => (await countOn(b)).body === JSON.stringify([{ n: ROWS }]), 60_000);
  }, 120_000);
});

describe('a data file damaged in place (same size) is set aside; the good rows stay readable', () => {
  let server: TestServer;
  type Stats = { storage: { files: number }; wal: { count: number }; quarantined: { key: string; kind: string; reason: string }[] };
  const stats = async (name: string) => (await (await server.request(`/api/v1/logstream/${name}/stats`)).json()) as Stats;
  /** Rows, every column of them read (a bare count(*) reads only the footers). */
  const count = async (name: string) => {
    const res = await server.request('/api/v1/query', { method: 'POST', json: { query: `SELECT count(*) AS n FROM (SELECT DISTINCT * FROM ${name})`, startTime: '2000-01-01T00:00:00Z', endTime: '2100-01-01T00:00:00Z' } });
    return { status: res.status, body: await res.text() };
  };
  /** Two batches of 500 rows in two Parquet files; returns the files. */
  const twoFiles = async (name: string) => {
    expect((await server.request(`/api/v1/logstream/${name}`, { method: 'PUT' })).status).toBe(200);
    for (let b = 0; b < 2; b++) {
      const rows = Array.from({ length: 500 }, (_, i) => ({ b, i, msg: `batch ${b} row ${i} ${Math.random().toString(36)}` }));
      expect((await server.request(`/api/v1/logstream/${name}`, { method: 'POST', json: rows })).status).toBe(200);
      await waitFor('flushed', async () => {
        const s = await stats(name);
        return s.wal.count === 0 && s.storage.files === b + 1;
      });
    }
    const files = await listFiles(path.join(server.dataDir, 'store', name), '.parquet');
    expect(files).toHaveLength(2);
    return files;
  };
  /** Flips bytes of a file in place: its size stays. */
  const flip = async (file: string, at: (size: number) => number) => {
    const body = await fs.readFile(file);
    const pos = at(body.length);
    for (let k = 0; k < 8; k++) body[pos + k] ^= 0xff;
    await fs.writeFile(file, body);
  };

  beforeAll(async () => {
    // Parquet read by every query: with file tables (P_QUERY_FILE_TABLE_BYTES) a small file's rows read
    // once are answered from the worker's copy, so page damage after that read is not seen by queries.
    server = await startServer({ env: { P_FLUSH_INTERVAL: '200ms', P_COMPACTION_INTERVAL: '1h', P_QUERY_FILE_TABLE_BYTES: '0' } });
  });
  afterAll(() => server?.stop());

  // A query worker caches footers it has read (DuckDB's parquet_metadata_cache): footer damage shows
  // on files it has not read yet, page damage on any.
  it.each([
    ['a page, after the file was read', 'pages', true, () => 60],
    ['the footer metadata, before the file was read', 'footer', false, (size: number) => size - 200],
  ])('damage in %s: 200 with the other file\'s rows, the file set aside and reported', async (_what, name, readFirst, at) => {
    const files = await twoFiles(name);
    if (readFirst) expect(JSON.parse((await count(name)).body)).toEqual([{ n: 1000 }]);
    await flip(files[1], at);
    const after = await count(name);
    expect(after.status, after.body).toBe(200);
    expect(JSON.parse(after.body)).toEqual([{ n: 500 }]);
    const key = path.relative(path.join(server.dataDir, 'store'), files[1]).split(path.sep).join('/');
    expect((await stats(name)).quarantined).toEqual([expect.objectContaining({ key, kind: 'parquet' })]);
    const ready = (await (await server.request('/api/v1/readiness')).json()) as { quarantined: { key: string }[] };
    expect(ready.quarantined.map((q) => q.key)).toContain(key);
    // And stays so: the next query does not trip over it again.
    expect(JSON.parse((await count(name)).body)).toEqual([{ n: 500 }]);
  });

  it('a query that raises a file-like error itself sets nothing aside', async () => {
    await twoFiles('raised');
    const res = await server.request('/api/v1/query', {
      method: 'POST',
      json: { query: `SELECT error('Failed to read file "x.parquet": ZSTD Decompression failure') FROM raised`, startTime: '2000-01-01T00:00:00Z', endTime: '2100-01-01T00:00:00Z' },
    });
    expect(res.status).not.toBe(200);
    expect((await stats('raised')).quarantined).toEqual([]);
    expect(JSON.parse((await count('raised')).body)).toEqual([{ n: 1000 }]);
  });
});

describe('creating a dataset on a full disk', () => {
  let server: TestServer | undefined;
  let mnt: string | undefined;
  afterAll(async () => {
    await server?.kill();
    if (mnt) execFileSync('umount', ['-l', mnt]);
  });

  it('answers 503 with Retry-After (as ingestion does), and succeeds once there is room', async () => {
    mnt = await tempDir('lakehouse-tmpfs-');
    // A real full file system: a small tmpfs (the suite runs as root, as disk.test.ts does).
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=16m', 'tmpfs', mnt]);
    server = await startServer({ dataDir: mnt });
    const ballast = path.join(mnt, 'ballast');
    const st = await fs.statfs(mnt);
    await fs.writeFile(ballast, Buffer.alloc(st.bavail * st.bsize)).catch(() => undefined);
    const full = await server.request('/api/v1/logstream/newone', { method: 'PUT' });
    expect((await expectError(full, 503)).toLowerCase()).toContain('disk');
    expect(Number(full.headers.get('retry-after'))).toBeGreaterThan(0);
    await fs.rm(ballast);
    expect((await server.request('/api/v1/logstream/newone', { method: 'PUT' })).status).toBe(200);
    expect((await server.request('/api/v1/logstream/newone', { method: 'POST', json: [{ ok: true }] })).status).toBe(200);
  });
});

describe('numbers that cannot be stored as sent', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer();
    expect((await server.request('/api/v1/logstream/nums', { method: 'PUT' })).status).toBe(200);
  });
  afterAll(() => server?.stop());
  const post = (body: string) => server.request('/api/v1/logstream/nums', { method: 'POST', body, headers: { 'content-type': 'application/json' } });

  it('an integer beyond ±2^53 or a number beyond the double range is refused with 400, not rounded or dropped', async () => {
    for (const body of ['[{"id":9007199254740993}]', '[{"v":1e400}]', '[{"list":[1, -1e400]}]', '[{"ok":1},{"id":12345678901234567890}]']) {
      expect(await expectError(await post(body), 400), body).toMatch(/without loss.*send it as a string/);
    }
    // Nothing of a refused request is stored.
    const rows = await server.request('/api/v1/query', { method: 'POST', json: { query: 'SELECT count(*) AS n FROM nums', startTime: '2000-01-01T00:00:00Z', endTime: '2100-01-01T00:00:00Z' } });
    expect(await rows.json()).toEqual([{ n: 0 }]);
  });

  it('the same values as strings, the largest exact integer, and float literals are stored as sent', async () => {
    expect((await post('[{"id":"9007199254740993","big":9007199254740991,"f":1e20,"v":"1e400"}]')).status).toBe(200);
    const res = await server.request('/api/v1/query', {
      method: 'POST',
      json: { query: 'SELECT id, CAST(big AS VARCHAR) AS big, f, v FROM nums', startTime: '2000-01-01T00:00:00Z', endTime: '2100-01-01T00:00:00Z' },
    });
    expect(await res.json()).toEqual([{ id: '9007199254740993', big: '9007199254740991', f: 1e20, v: '1e400' }]);
  });
});
