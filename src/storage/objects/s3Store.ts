import { createReadStream, createWriteStream } from 'node:fs';
import * as fs from 'node:fs/promises';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadBucketCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { FileCache, type FileCacheStats } from './fileCache.ts';
import type { ObjectStore } from './objectStore.ts';
import { bodyRetries, isDeleteObjectsUnsupported, isNoSuchKey, mapped, statusOf, storeError } from './s3Errors.ts';
import { storeErrors } from '../../metrics.ts';

export interface S3Options {
  /** S3-compatible endpoint URL (MinIO, moto); omit for AWS. */
  endpoint?: string;
  bucket: string;
  region: string;
  /** Omit both to use the SDK's default credential chain (environment, profile, instance role). */
  accessKeyId?: string;
  secretAccessKey?: string;
  /** Path-style URLs (endpoint/bucket/key); default true, which MinIO and most S3 clones need. */
  forcePathStyle?: boolean;
  /** Directory of the local cache of downloaded objects (for DuckDB to read). */
  cacheDir: string;
  cacheBytes: number;
  /** Attempts per request, including the first (SDK standard retry mode, exponential backoff). Default 5. */
  maxAttempts?: number;
  /** ListObjectsV2 page size (S3 caps it at 1000); smaller only to exercise paging in tests. */
  listPageSize?: number;
}

/** Files at or above this size go up as multipart uploads. */
const MULTIPART_THRESHOLD = 16 * 1024 * 1024;
const PART_SIZE = 8 * 1024 * 1024;
/** DeleteObjects takes at most 1000 keys per request. */
const DELETE_BATCH = 1000;
/** Parallel single-object deletes when the server has no DeleteObjects. */
const DELETE_CONCURRENCY = 8;
const PING_TIMEOUT_MS = 2000;

async function forEachLimited<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failed = false;
  const worker = async () => {
    try {
      while (!failed && next < items.length) await fn(items[next++]);
    } catch (err) {
      failed = true;
      throw err;
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/**
 * The bucket as an ObjectStore (AWS S3, MinIO or another S3 clone): the SDK's standard retry mode with
 * backoff, connection and request timeouts, multipart upload for large files, and a local LRU cache
 * of the files queries read.
 */
export class S3ObjectStore implements ObjectStore {
  readonly kind = 's3' as const;
  /** Public so tests and metrics can add middleware (e.g. to count requests). */
  readonly client: S3Client;
  /** Readiness must answer fast, so the probe has its own client: one attempt, short timeouts. */
  private readonly pingClient: S3Client;
  private readonly bucket: string;
  private readonly cache: FileCache;
  private readonly listPageSize: number;
  private deleteObjectsWorks = true;

  constructor(opts: S3Options) {
    this.bucket = opts.bucket;
    this.listPageSize = Math.max(1, Math.min(1000, opts.listPageSize ?? 1000));
    const base: S3ClientConfig = {
      endpoint: opts.endpoint,
      region: opts.region,
      forcePathStyle: opts.forcePathStyle ?? true,
      credentials:
        opts.accessKeyId && opts.secretAccessKey ? { accessKeyId: opts.accessKeyId, secretAccessKey: opts.secretAccessKey } : undefined,
      // Recent SDKs add CRC32 checksums by default and, for stream bodies, send them as aws-chunked
      // trailers; S3 clones that do not decode aws-chunked (s3rver, older MinIO) store the framing as
      // content. Only send or check checksums where the operation requires one (DeleteObjects).
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    };
    this.client = new S3Client({
      ...base,
      maxAttempts: opts.maxAttempts ?? 5,
      retryMode: 'standard',
      requestHandler: new NodeHttpHandler({
        connectionTimeout: 3000,
        // Time to response headers, including sending the body (a part is 8 MiB).
        requestTimeout: 60_000,
        throwOnRequestTimeout: true,
        // A download that stalls mid-body.
        socketTimeout: 30_000,
      }),
    });
    // Every failed request (after the SDK's retries) is counted by operation, for /metrics.
    this.client.middlewareStack.add(
      (next, context) => async (args) => {
        try {
          return await next(args);
        } catch (err) {
          storeErrors.inc({ operation: String(context.commandName ?? 'unknown').replace(/Command$/, '') });
          throw err;
        }
      },
      { step: 'initialize', name: 'countErrors' },
    );
    this.pingClient = new S3Client({
      ...base,
      maxAttempts: 1,
      requestHandler: new NodeHttpHandler({ connectionTimeout: 1000, requestTimeout: PING_TIMEOUT_MS, throwOnRequestTimeout: true }),
    });
    this.cache = new FileCache(opts.cacheDir, opts.cacheBytes, (key, target) => this.download(key, target));
  }

  putFile(key: string, localPath: string): Promise<void> {
    return mapped('PutObject', key, () => this.upload(key, localPath));
  }

  private async upload(key: string, localPath: string): Promise<void> {
    const size = (await fs.stat(localPath)).size;
    if (size < MULTIPART_THRESHOLD) {
      // Read into memory rather than streamed: the SDK can resend a buffer on retry, not a consumed stream.
      await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: await fs.readFile(localPath) }));
      return;
    }
    // Upload reads the stream into part-sized buffers (queueSize of them in flight) and retries each
    // part on its own; on failure it aborts the multipart upload so no parts are left billed.
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.bucket, Key: key, Body: createReadStream(localPath) },
      partSize: PART_SIZE,
      queueSize: 2,
      leavePartsOnError: false,
    });
    await upload.done();
  }

  putBytes(key: string, body: Buffer | string): Promise<void> {
    return mapped('PutObject', key, async () => {
      await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: typeof body === 'string' ? Buffer.from(body) : body }));
    });
  }

  /**
   * PutObject with `If-None-Match: *` (AWS S3 and MinIO honour it): 412 means another writer got
   * there first. 409 (a conditional write racing another on AWS) is retried until one of them wins.
   */
  async putIfAbsent(key: string, body: Buffer | string): Promise<boolean> {
    const Body = typeof body === 'string' ? Buffer.from(body) : body;
    for (let attempt = 0; ; attempt++) {
      try {
        await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body, IfNoneMatch: '*' }));
        return true;
      } catch (err) {
        const status = statusOf(err);
        if (status === 412) return false;
        if (status === 409 && attempt < 10) {
          await new Promise((r) => setTimeout(r, 50 * (attempt + 1)));
          continue;
        }
        throw storeError(err, 'PutObject', key);
      }
    }
  }

  async getBytes(key: string): Promise<Buffer | undefined> {
    return bodyRetries(async () => {
      try {
        const res = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
        if (!res.Body) throw new Error(`GetObject ${key}: response has no body`);
        const bytes = Buffer.from(await res.Body.transformToByteArray());
        if (res.ContentLength !== undefined && bytes.length !== res.ContentLength) {
          throw new Error(`GetObject ${key}: got ${bytes.length} of ${res.ContentLength} bytes`);
        }
        return bytes;
      } catch (err) {
        if (isNoSuchKey(err)) return undefined;
        throw storeError(err, 'GetObject', key);
      }
    });
  }

  list(prefix: string): Promise<{ key: string; size: number }[]> {
    return mapped('ListObjectsV2', prefix, () => this.listAll(prefix));
  }

  private async listAll(prefix: string): Promise<{ key: string; size: number }[]> {
    const out: { key: string; size: number }[] = [];
    let token: string | undefined;
    do {
      const res = await this.client.send(
        new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix || undefined, ContinuationToken: token, MaxKeys: this.listPageSize }),
      );
      for (const o of res.Contents ?? []) if (o.Key !== undefined) out.push({ key: o.Key, size: o.Size ?? 0 });
      token = res.IsTruncated ? res.NextContinuationToken : undefined;
      if (res.IsTruncated && !token) throw new Error('ListObjectsV2: truncated listing without a continuation token');
    } while (token);
    // S3 returns UTF-8 byte order; LocalObjectStore sorts by code unit. Same order for ASCII keys, but
    // callers should see one order whatever the backend.
    return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  delete(keys: string[]): Promise<void> {
    return mapped('DeleteObjects', keys[0] ?? '', () => this.deleteAll(keys));
  }

  private async deleteAll(keys: string[]): Promise<void> {
    const unique = [...new Set(keys)];
    for (let i = 0; i < unique.length; i += DELETE_BATCH) {
      const chunk = unique.slice(i, i + DELETE_BATCH);
      let remaining = chunk;
      if (this.deleteObjectsWorks) {
        try {
          const res = await this.client.send(
            new DeleteObjectsCommand({ Bucket: this.bucket, Delete: { Objects: chunk.map((Key) => ({ Key })), Quiet: true } }),
          );
          // Per-key failures (e.g. a transient InternalError for one key) get one more try singly.
          remaining = (res.Errors ?? []).map((e) => e.Key).filter((k): k is string => k !== undefined);
        } catch (err) {
          // Servers without DeleteObjects, or ones insisting on a Content-MD5 the SDK no longer sends.
          if (!isDeleteObjectsUnsupported(err)) throw err;
          this.deleteObjectsWorks = false;
        }
      }
      await forEachLimited(remaining, DELETE_CONCURRENCY, async (Key) => {
        await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key }));
      });
    }
  }

  /**
   * Deletes `prefix` as a directory, like LocalObjectStore: every key under `prefix/` and the key
   * `prefix` itself, but not siblings sharing the prefix ("a/b" does not delete "a/bc").
   */
  async deletePrefix(prefix: string): Promise<void> {
    const dir = prefix.replace(/\/+$/, '');
    if (!dir) throw new Error('refusing to delete the whole bucket');
    const keys = (await this.list(dir)).map((o) => o.key).filter((k) => k === dir || k.startsWith(`${dir}/`));
    await this.delete(keys);
  }

  private async download(key: string, target: string): Promise<void> {
    await bodyRetries(async () => {
      try {
        await this.fetchTo(key, target);
      } catch (err) {
        await fs.rm(target, { force: true });
        throw storeError(err, 'GetObject', key);
      }
    });
  }

  private async fetchTo(key: string, target: string): Promise<void> {
    const res = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
    if (!res.Body) throw new Error(`GetObject ${key}: response has no body`);
    let received = 0;
    const count = new Transform({
      transform(chunk: Buffer, _enc, done) {
        received += chunk.length;
        done(null, chunk);
      },
    });
    await pipeline(res.Body as Readable, count, createWriteStream(target));
    // A connection cut mid-body can end the stream without an error; never cache a short file.
    if (res.ContentLength !== undefined && received !== res.ContentLength) {
      throw new Error(`GetObject ${key}: got ${received} of ${res.ContentLength} bytes`);
    }
  }

  /**
   * A cached local copy. The file is not pinned once this returns, so a concurrent eviction can
   * remove it: readers that need the file to stay put (queries) use acquire().
   */
  async localPath(key: string): Promise<string> {
    const held = await this.cache.acquire([key]);
    held.release();
    return held.paths[0];
  }

  /** Cached local copies (each checked before use), pinned against eviction until `release` is called. */
  async acquire(keys: string[]): Promise<{ paths: string[]; sizes: number[]; release: () => void }> {
    try {
      return await this.cache.acquire(keys);
    } catch (err) {
      // The cache reports the SDK's error; which key failed is in its message only when it is ours.
      throw storeError(err, 'GetObject', (err as { key?: string }).key ?? keys.join(', '));
    }
  }

  async dropCached(key: string): Promise<void> {
    await this.cache.drop(key);
  }

  cacheStats(): FileCacheStats {
    return this.cache.stats();
  }

  async ping(): Promise<void> {
    // The handler's timeouts cover connect and response; the signal also bounds credential resolution
    // and anything else before the request leaves.
    const signal = AbortSignal.timeout(PING_TIMEOUT_MS);
    await this.pingClient.send(new HeadBucketCommand({ Bucket: this.bucket }), { abortSignal: signal });
  }
}
