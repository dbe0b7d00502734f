import { createReadStream, createWriteStream } from 'node:fs';
import * as fs from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import type { Readable } from 'node:stream';
import {
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadBucketCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { FileCache } from './fileCache.ts';
import type { ObjectStore } from './objectStore.ts';

export interface S3Options {
  endpoint?: string;
  bucket: string;
  region: string;
  accessKeyId?: string;
  secretAccessKey?: string;
  forcePathStyle?: boolean;
  cacheDir: string;
  cacheBytes: number;
  maxAttempts?: number;
}

const MULTIPART_THRESHOLD = 16 * 1024 * 1024;

const isNotFound = (err: unknown) => {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e.name === 'NoSuchKey' || e.name === 'NotFound' || e.$metadata?.httpStatusCode === 404;
};

/**
 * The bucket as an ObjectStore (AWS S3 or MinIO): the SDK's standard retry mode with backoff, request
 * timeouts, multipart upload for large files, and a local LRU cache for the files queries read.
 */
export class S3ObjectStore implements ObjectStore {
  readonly kind = 's3' as const;
  private readonly client: S3Client;
  private readonly bucket: string;
  private readonly cache: FileCache;
  private ready?: Promise<void>;
  private deleteObjectsWorks = true;

  constructor(opts: S3Options) {
    this.bucket = opts.bucket;
    this.client = new S3Client({
      endpoint: opts.endpoint,
      region: opts.region,
      forcePathStyle: opts.forcePathStyle ?? true,
      credentials: opts.accessKeyId && opts.secretAccessKey ? { accessKeyId: opts.accessKeyId, secretAccessKey: opts.secretAccessKey } : undefined,
      maxAttempts: opts.maxAttempts ?? 5,
      retryMode: 'standard',
      // Only send checksums S3 requires: MinIO and other S3-compatible servers differ in what they accept.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      requestHandler: new NodeHttpHandler({ connectionTimeout: 3000, requestTimeout: 60_000 }),
    });
    this.cache = new FileCache(opts.cacheDir, opts.cacheBytes, (key, target) => this.download(key, target));
  }

  private init(): Promise<void> {
    return (this.ready ??= this.cache.init());
  }

  async putFile(key: string, localPath: string): Promise<void> {
    const size = (await fs.stat(localPath)).size;
    if (size < MULTIPART_THRESHOLD) {
      await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: await fs.readFile(localPath) }));
      return;
    }
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.bucket, Key: key, Body: createReadStream(localPath) },
      partSize: 8 * 1024 * 1024,
      queueSize: 2,
      leavePartsOnError: false,
    });
    await upload.done();
  }

  async putBytes(key: string, body: Buffer | string): Promise<void> {
    await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: typeof body === 'string' ? Buffer.from(body) : body }));
  }

  async getBytes(key: string): Promise<Buffer | undefined> {
    try {
      const res = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
      return Buffer.from(await res.Body!.transformToByteArray());
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async list(prefix: string): Promise<{ key: string; size: number }[]> {
    const out: { key: string; size: number }[] = [];
    let token: string | undefined;
    do {
      const res = await this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, ContinuationToken: token }));
      for (const o of res.Contents ?? []) if (o.Key) out.push({ key: o.Key, size: o.Size ?? 0 });
      token = res.IsTruncated ? res.NextContinuationToken : undefined;
    } while (token);
    return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  async delete(keys: string[]): Promise<void> {
    for (let i = 0; i < keys.length; i += 1000) {
      const chunk = keys.slice(i, i + 1000);
      if (this.deleteObjectsWorks) {
        try {
          const res = await this.client.send(
            new DeleteObjectsCommand({ Bucket: this.bucket, Delete: { Objects: chunk.map((Key) => ({ Key })), Quiet: true } }),
          );
          if (!res.Errors?.length) continue;
        } catch (err) {
          // Some S3-compatible servers insist on a Content-MD5 the SDK no longer sends; use single deletes.
          const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
          if (status !== 400 && status !== 501) throw err;
          this.deleteObjectsWorks = false;
        }
      }
      await Promise.all(chunk.map((Key) => this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key }))));
    }
  }

  async deletePrefix(prefix: string): Promise<void> {
    if (!prefix.replace(/\/+$/, '')) throw new Error('refusing to delete the whole bucket');
    await this.delete((await this.list(prefix)).map((o) => o.key));
  }

  private async download(key: string, target: string): Promise<void> {
    const res = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
    await pipeline(res.Body as Readable, createWriteStream(target));
  }

  async localPath(key: string): Promise<string> {
    const held = await this.acquire([key]);
    held.release();
    return held.paths[0];
  }

  async acquire(keys: string[]): Promise<{ paths: string[]; release: () => void }> {
    await this.init();
    return this.cache.acquire(keys);
  }

  async ping(): Promise<void> {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), 2000);
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }), { abortSignal: abort.signal });
    } finally {
      clearTimeout(timer);
    }
  }
}
