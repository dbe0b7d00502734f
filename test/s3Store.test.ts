import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as net from 'node:net';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { S3ObjectStore, type S3Options } from '../src/storage/objects/s3Store.ts';
import { startS3Server, type S3TestServer } from './helpers/s3server.ts';
import { tempDir } from './helpers/server.ts';
import { sleep, waitFor } from './helpers/wait.ts';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** Whether the cache holds a copy of `file` (each download's name carries a unique `~r…` suffix). */
async function exists(file: string): Promise<boolean> {
  const names = await fs.readdir(path.dirname(file)).catch(() => [] as string[]);
  return names.some((n) => n === path.basename(file) || n.replace(/~r[0-9a-z]+(\.[^./]*)?$/, '$1') === path.basename(file));
}

/** A body shaped like a Parquet file (magic at both ends, a footer length inside it), as the cache checks. */
function parquetLike(inner: Buffer): Buffer {
  const len = Buffer.alloc(4);
  len.writeUInt32LE(Math.min(inner.length, 16));
  return Buffer.concat([Buffer.from('PAR1'), inner, len, Buffer.from('PAR1')]);
}

/** Evicted files are unlinked asynchronously; wait for the disk to agree. */
async function eventually(what: string, check: () => Promise<boolean>): Promise<void> {
  await waitFor(what, check);
}

async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string): Promise<void> => {
    for (const e of await fs.readdir(d, { withFileTypes: true })) {
      if (e.isDirectory()) await walk(path.join(d, e.name));
      else out.push(path.relative(dir, path.join(d, e.name)).split(path.sep).join('/').replace(/~r[0-9a-z]+(\.[^./]*)?$/, '$1'));
    }
  };
  await walk(dir);
  return out.sort();
}

describe('S3ObjectStore against an S3 server (moto)', () => {
  let s3: S3TestServer;
  const temps: string[] = [];
  const temp = async (prefix: string) => {
    const dir = await tempDir(prefix);
    temps.push(dir);
    return dir;
  };

  const makeStore = async (extra: Partial<S3Options> = {}) => {
    const store = new S3ObjectStore({
      endpoint: s3.endpoint,
      bucket: s3.bucket,
      region: 'us-east-1',
      accessKeyId: s3.accessKey,
      secretAccessKey: s3.secretKey,
      cacheDir: await temp('s3cache-'),
      cacheBytes: 1 << 30,
      maxAttempts: 2,
      ...extra,
    });
    // Every command the store sends, by name: proves caching, multipart and the delete fallback.
    const sent: string[] = [];
    store.client.middlewareStack.add(
      (next, context) => async (args) => {
        sent.push(context.commandName ?? '?');
        return next(args);
      },
      { step: 'initialize', name: 'countCommands' },
    );
    const count = (name: string) => sent.filter((c) => c === name).length;
    return { store, sent, count };
  };

  beforeAll(async () => {
    s3 = await startS3Server();
  });
  afterAll(async () => {
    await s3?.close();
    for (const dir of temps) await fs.rm(dir, { recursive: true, force: true });
  });

  it('puts, gets and lists objects; a missing key is undefined, a missing bucket an error', async () => {
    const { store } = await makeStore();
    const binary = randomBytes(70_000);
    await store.putBytes('basic/one.json', '{"a":1}');
    await store.putBytes('basic/dir/two.bin', binary);
    await store.putBytes('basic-sibling/x', 'x');

    expect((await store.getBytes('basic/one.json'))?.toString()).toBe('{"a":1}');
    expect((await store.getBytes('basic/dir/two.bin'))?.equals(binary)).toBe(true);
    expect(await store.getBytes('basic/missing')).toBeUndefined();

    expect(await store.list('basic/')).toEqual([
      { key: 'basic/dir/two.bin', size: binary.length },
      { key: 'basic/one.json', size: 7 },
    ]);
    expect((await store.list('basic')).map((o) => o.key)).toEqual(['basic-sibling/x', 'basic/dir/two.bin', 'basic/one.json']);
    expect(await store.list('nothing-here/')).toEqual([]);

    const wrongBucket = new S3ObjectStore({
      endpoint: s3.endpoint,
      bucket: 'no-such-bucket',
      region: 'us-east-1',
      accessKeyId: s3.accessKey,
      secretAccessKey: s3.secretKey,
      cacheDir: await temp('s3cache-'),
      cacheBytes: 1 << 20,
      maxAttempts: 1,
    });
    await expect(wrongBucket.getBytes('basic/one.json')).rejects.toThrow();
    await expect(wrongBucket.ping()).rejects.toThrow();
  });

  it('pages through listings in key order, including over 1000 keys', async () => {
    // Keys whose directory order differs from S3's byte order ('-' and '.' sort before '/').
    const tricky = ['pg/a', 'pg/a-b', 'pg/a.b', 'pg/a/x', 'pg/a/y/z', 'pg/a_c', 'pg/b'];
    const { store: small } = await makeStore({ listPageSize: 2 });
    for (const k of tricky) await small.putBytes(k, k);
    expect((await small.list('pg/')).map((o) => o.key)).toEqual([...tricky].sort());

    const { store, count } = await makeStore();
    const many = Array.from({ length: 1105 }, (_, i) => `many/${String(i).padStart(5, '0')}`);
    const started = Date.now();
    for (let i = 0; i < many.length; i += 50) await Promise.all(many.slice(i, i + 50).map((k) => store.putBytes(k, 'v')));
    const listed = await store.list('many/');
    expect(listed.map((o) => o.key)).toEqual(many);
    expect(count('ListObjectsV2Command')).toBe(2);

    // Two DeleteObjects batches (1000 + 105).
    await store.deletePrefix('many/');
    expect(count('DeleteObjectsCommand')).toBe(2);
    expect(await store.list('many/')).toEqual([]);
    // A bound, not a benchmark: 1105 puts and two listings on a busy machine.
    expect(Date.now() - started).toBeLessThan(60_000);
  });

  it('deletes keys and directory prefixes, never the whole bucket', async () => {
    const { store } = await makeStore();
    for (const k of ['del/a', 'del/b', 'del/c', 'tree/x/1', 'tree/x/2', 'tree/x', 'tree/xy/3', 'tree/y/4']) await store.putBytes(k, k);

    await store.delete(['del/a', 'del/c', 'del/never-existed', 'del/a']);
    expect((await store.list('del/')).map((o) => o.key)).toEqual(['del/b']);
    await store.delete([]);

    // Like LocalObjectStore: "tree/x" is a directory (and a key), "tree/xy" is someone else's.
    await store.deletePrefix('tree/x/');
    expect((await store.list('tree/')).map((o) => o.key)).toEqual(['tree/xy/3', 'tree/y/4']);

    await expect(store.deletePrefix('')).rejects.toThrow(/whole bucket/);
    await expect(store.deletePrefix('///')).rejects.toThrow(/whole bucket/);
    expect((await store.list('tree/')).length).toBe(2);
  });

  it('falls back to single deletes when the server rejects DeleteObjects', async () => {
    const { store, count } = await makeStore();
    // A server without DeleteObjects (501), simulated before the request leaves.
    store.client.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === 'DeleteObjectsCommand') {
          throw Object.assign(new Error('not implemented'), { name: 'NotImplemented', $metadata: { httpStatusCode: 501 } });
        }
        return next(args);
      },
      { step: 'initialize', name: 'noDeleteObjects' },
    );
    for (const k of ['fb/1', 'fb/2', 'fb/3']) await store.putBytes(k, k);
    await store.delete(['fb/1', 'fb/2']);
    expect((await store.list('fb/')).map((o) => o.key)).toEqual(['fb/3']);
    await store.deletePrefix('fb');
    expect(await store.list('fb/')).toEqual([]);
    // Learned once, not retried per call.
    expect(count('DeleteObjectsCommand')).toBe(1);
    expect(count('DeleteObjectCommand')).toBe(3);
  });

  it('uploads a 40 MiB file as multipart and a small one as a single put, byte-exact', async () => {
    const { store, count } = await makeStore();
    const dir = await temp('s3src-');
    const big = randomBytes(40 * 1024 * 1024 + 12345);
    const small = randomBytes(3 * 1024 * 1024);
    await fs.writeFile(path.join(dir, 'big.parquet'), big);
    await fs.writeFile(path.join(dir, 'small.parquet'), small);

    await store.putFile('mp/big.parquet', path.join(dir, 'big.parquet'));
    expect(count('CreateMultipartUploadCommand')).toBe(1);
    expect(count('UploadPartCommand')).toBe(6);
    expect(count('CompleteMultipartUploadCommand')).toBe(1);
    await store.putFile('mp/small.parquet', path.join(dir, 'small.parquet'));
    expect(count('CreateMultipartUploadCommand')).toBe(1);

    expect(await store.list('mp/')).toEqual([
      { key: 'mp/big.parquet', size: big.length },
      { key: 'mp/small.parquet', size: small.length },
    ]);
    expect(sha((await store.getBytes('mp/big.parquet'))!)).toBe(sha(big));
    // Through the cache too (a streamed download).
    expect(sha(await fs.readFile(await store.localPath('mp/big.parquet')))).toBe(sha(big));
    expect(sha(await fs.readFile(await store.localPath('mp/small.parquet')))).toBe(sha(small));
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('serves localPath from the cache after one download, shared by concurrent callers', async () => {
    const { store, count } = await makeStore();
    const body = parquetLike(randomBytes(200_000));
    await store.putBytes('cache/a.parquet', body);
    await store.putBytes('cache/b.parquet', parquetLike(Buffer.from('bee')));

    const p1 = await store.localPath('cache/a.parquet');
    expect((await fs.readFile(p1)).equals(body)).toBe(true);
    expect(count('GetObjectCommand')).toBe(1);
    expect(await store.localPath('cache/a.parquet')).toBe(p1);
    expect(count('GetObjectCommand')).toBe(1);

    const all = await Promise.all(Array.from({ length: 8 }, () => store.localPath('cache/b.parquet')));
    expect(new Set(all).size).toBe(1);
    expect(count('GetObjectCommand')).toBe(2);
    expect((await fs.readFile(all[0])).equals(parquetLike(Buffer.from('bee')))).toBe(true);

    // acquire returns paths in order, and a failed acquire (a missing object) pins nothing and leaves no temp files.
    const held = await store.acquire(['cache/b.parquet', 'cache/a.parquet']);
    expect(held.paths).toEqual([all[0], p1]);
    held.release();
    held.release();
    await expect(store.acquire(['cache/a.parquet', 'cache/missing.parquet'])).rejects.toThrow();
    expect(store.cacheStats()).toMatchObject({ files: 2, pinned: 0, downloads: 2 });
    const cacheDir = path.dirname(path.dirname(p1));
    expect(await filesUnder(cacheDir)).toEqual(['cache/a.parquet', 'cache/b.parquet']);
    await expect(store.localPath('../escape')).rejects.toThrow(/not cacheable/);
  });

  it('a cached copy truncated, deleted, without its Parquet footer or changed inside is downloaded again under a new name', async () => {
    const { store, count } = await makeStore();
    const body = parquetLike(randomBytes(50_000));
    await store.putBytes('damage/x.parquet', body);
    let held = await store.acquire(['damage/x.parquet']);
    let file = held.paths[0];
    held.release();
    expect(count('GetObjectCommand')).toBe(1);
    const damages: [string, (f: string) => Promise<void>][] = [
      ['truncated', (f) => fs.truncate(f, 1000)],
      ['deleted', (f) => fs.rm(f)],
      ['footer overwritten', async (f) => {
        const h = await fs.open(f, 'r+');
        await h.write(Buffer.from('XXXX'), 0, 4, body.length - 4);
        await h.close();
      }],
      // Issue 30 A14: same size, magic and footer, a change inside a page (wrong answers, silently).
      ['same size, bytes changed inside', async (f) => {
        const h = await fs.open(f, 'r+');
        await h.write(Buffer.from('ZZZZ'), 0, 4, 1000);
        await h.close();
      }],
    ];
    for (const [i, [what, damage]] of damages.entries()) {
      await damage(file);
      held = await store.acquire(['damage/x.parquet']);
      expect(held.paths[0], what).not.toBe(file);
      expect((await fs.readFile(held.paths[0])).equals(body), what).toBe(true);
      expect(held.sizes, what).toEqual([body.length]);
      expect(count('GetObjectCommand'), what).toBe(i + 2);
      file = held.paths[0];
      held.release();
    }
    // A sound copy is used as it is.
    held = await store.acquire(['damage/x.parquet']);
    expect(held.paths[0]).toBe(file);
    held.release();
    expect(count('GetObjectCommand')).toBe(damages.length + 1);
  });

  it('evicts least recently used files beyond cacheBytes, never pinned ones, and adopts its directory on restart', async () => {
    const cacheDir = await temp('s3lru-');
    const { store } = await makeStore({ cacheDir, cacheBytes: 3000 });
    for (const k of ['a', 'b', 'c', 'd', 'e']) await store.putBytes(`lru/${k}`, Buffer.alloc(1000, k));
    const file = (k: string) => path.join(cacheDir, 'lru', k);

    for (const k of ['a', 'b', 'c']) await store.localPath(`lru/${k}`);
    await store.localPath('lru/a'); // a is now more recent than b and c
    await store.localPath('lru/d'); // over budget: b (least recent) goes
    await eventually('b evicted', async () => !(await exists(file('b'))));
    expect(await exists(file('a'))).toBe(true);
    expect(store.cacheStats()).toMatchObject({ files: 3, bytes: 3000 });

    // Pinned files stay even when that puts the cache over budget.
    const held = await store.acquire(['lru/a', 'lru/b', 'lru/c', 'lru/d']);
    const e = await store.localPath('lru/e');
    expect(await fs.readFile(e, 'utf8')).toBe('e'.repeat(1000));
    for (const k of ['a', 'b', 'c', 'd']) expect(await exists(file(k))).toBe(true);
    await eventually('e evicted', async () => !(await exists(e)));
    expect(store.cacheStats()).toMatchObject({ files: 4, bytes: 4000, pinned: 4 });
    held.release();
    // Released in order a, b, c, d, so a is now the least recently used.
    expect(store.cacheStats()).toMatchObject({ files: 3, bytes: 3000, pinned: 0 });
    await eventually('a evicted', async () => !(await exists(file('a'))));
    const onDisk = await filesUnder(cacheDir);
    expect(onDisk).toEqual(['lru/b', 'lru/c', 'lru/d']);

    // A new process on the same directory: adopts the files, drops a crash's temp file, no downloads.
    await fs.writeFile(`${file('b')}.partial-12345-abc123`, 'half');
    const { store: again, count: countAgain } = await makeStore({ cacheDir, cacheBytes: 3000 });
    for (const f of onDisk) expect((await again.localPath(f)).replace(/~r[0-9a-z]+(\.[^./]*)?$/, '$1')).toBe(path.join(cacheDir, f));
    expect(countAgain('GetObjectCommand')).toBe(0);
    expect(await filesUnder(cacheDir)).toEqual(onDisk);

    // Adopting more than the budget evicts down to it.
    const { store: tight } = await makeStore({ cacheDir, cacheBytes: 1500 });
    await tight.localPath(onDisk[0]);
    expect(tight.cacheStats()).toMatchObject({ files: 1, bytes: 1000 });
  });

  it('ping fails fast while S3 is down and works again after a restart on the same port and data', async () => {
    const { store } = await makeStore();
    await store.putBytes('outage/kept', 'still here');
    await store.ping();

    await s3.stop();
    const t0 = Date.now();
    await expect(store.ping()).rejects.toThrow();
    // Refused at once and not retried for long: well within a load balancer's health-check timeout.
    expect(Date.now() - t0).toBeLessThan(15_000);

    await s3.start();
    await store.ping();
    expect((await store.getBytes('outage/kept'))?.toString()).toBe('still here');
  });

  it('ping gives up within about 2 s on a server that accepts connections but never answers', async () => {
    // The outage that hurts readiness: no connection refused, just silence.
    const sockets = new Set<net.Socket>();
    const silent = net.createServer((sock) => {
      sockets.add(sock);
      sock.on('error', () => undefined);
    });
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const port = (silent.address() as net.AddressInfo).port;
    try {
      const hung = new S3ObjectStore({
        endpoint: `http://127.0.0.1:${port}`,
        bucket: s3.bucket,
        region: 'us-east-1',
        accessKeyId: s3.accessKey,
        secretAccessKey: s3.secretKey,
        cacheDir: await temp('s3cache-'),
        cacheBytes: 1 << 20,
      });
      const t0 = Date.now();
      await expect(hung.ping()).rejects.toThrow();
      const took = Date.now() - t0;
      // Its own ~2 s limit (a timer cannot fire early), not the SDK's default of waiting forever.
      expect(took).toBeGreaterThanOrEqual(1500);
      expect(took).toBeLessThan(20_000);
    } finally {
      for (const sock of sockets) sock.destroy();
      await new Promise((r) => silent.close(r));
    }
  });

  it('retries a put through a short outage', async () => {
    const { store } = await makeStore({ maxAttempts: 10 });
    await s3.stop();
    let settled = false;
    const put = store.putBytes('outage/retried', 'made it').finally(() => (settled = true));
    await sleep(1000);
    expect(settled).toBe(false);
    await s3.start();
    await put;
    expect((await store.getBytes('outage/retried'))?.toString()).toBe('made it');
  });
});
