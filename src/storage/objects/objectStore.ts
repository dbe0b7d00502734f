
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { DomainError } from '../../errors.ts';
import { RecentSizes } from './recentSizes.ts';

/** An object a reader needs is not in the store (deleted with its dataset, or lost). */
export class MissingObjectError extends DomainError {
  constructor(readonly key: string) {
    super('not_found', `object ${key} does not exist`);
    this.name = 'MissingObjectError';
  }
}

export const isMissingObject = (err: unknown): err is MissingObjectError => err instanceof MissingObjectError;

/**
 * Where durable, shared state lives: dataset metadata, schemas, catalog manifests and Parquet files.
 * Keys are '/'-separated and identical on every backend, so the bucket layout equals the local layout.
 * The rest of the service talks only to this interface and never knows which backend it runs on.
 */
export interface ObjectStore {
  readonly kind: 'local' | 's3';
  /** Uploads a local file under `key` (the file is left in place; callers delete it). */
  putFile(key: string, localPath: string): Promise<void>;
  putBytes(key: string, body: Buffer | string): Promise<void>;
  /**
   * Writes the object only if no object has the key (S3 `If-None-Match: *`, an exclusive link on
   * disk); false when one exists. Of several concurrent callers exactly one gets true.
   */
  putIfAbsent(key: string, body: Buffer | string): Promise<boolean>;
  /** Returns the object's bytes, or undefined when it does not exist. */
  getBytes(key: string): Promise<Buffer | undefined>;
  /** Lists every key under a prefix (recursive), with sizes. */
  list(prefix: string): Promise<{ key: string; size: number }[]>;
  delete(keys: string[]): Promise<void>;
  /** Deletes every key under a prefix. */
  deletePrefix(prefix: string): Promise<void>;
  /**
   * A local file path with the object's content, for DuckDB to read: the file itself on local disk,
   * a cached download on S3.
   */
  localPath(key: string): Promise<string>;
  /**
   * Local paths for several objects, kept in any cache until released (while a query reads them).
   * Throws MissingObjectError naming the key when one does not exist, and an `unavailable` domain
   * error when the store cannot be reached. `sizes`, when given, are the local files' sizes in bytes
   * as found while acquiring them (saves the caller a second look at each file).
   */
  acquire(keys: string[]): Promise<{ paths: string[]; sizes?: number[]; release: () => void }>;
  /** Cheap reachability probe for readiness. */
  ping(): Promise<void>;
  /**
   * Forgets a local copy the reader found damaged, so the next acquire downloads the object again
   * (stores that cache; a local store has no copy to forget).
   */
  dropCached?(key: string): Promise<void>;
}

/** Up to this many files, acquire() looks at them synchronously (see there). */
const SYNC_STAT_MAX_FILES = 256;

/** How long a local file's size, once looked at, stands for acquire() (recentSizes.ts). */
export const SIZE_FRESH_MS = 1_000;

async function fsyncDir(dir: string): Promise<void> {
  const handle = await fs.open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Makes `target` appear whole or not at all: `fill` writes the temp file `tmp` beside it, which is
 * fsynced and renamed over `target`; if anything fails the temp file is removed (a full disk must keep
 * nothing: a half-written file would only take more space). With `syncDir` the directory is fsynced
 * too, so the rename itself survives a crash. Returns the file's size.
 */
export async function replaceFile(target: string, tmp: string, fill: (tmp: string) => Promise<void>, syncDir = true): Promise<number> {
  await fs.mkdir(path.dirname(target), { recursive: true });
  let size: number;
  try {
    await fill(tmp);
    const handle = await fs.open(tmp, 'r+');
    try {
      await handle.sync();
      size = (await handle.stat()).size;
    } finally {
      await handle.close();
    }
    await fs.rename(tmp, target);
  } catch (err) {
    await fs.rm(tmp, { force: true });
    throw err;
  }
  if (syncDir) await fsyncDir(path.dirname(target));
  return size;
}

/** A temp file name beside `file` that listings skip (`.tmp`). */
const tempBeside = (file: string) => `${file}.${process.pid}.${Date.now()}.${Math.random().toString(36).slice(2)}.tmp`;

/** Writes a file atomically and durably: temp file, fsync, rename, fsync of the directory. */
export async function writeFileDurable(file: string, body: Buffer | string): Promise<void> {
  await replaceFile(file, tempBeside(file), (tmp) => fs.writeFile(tmp, body));
}

async function writeSynced(file: string, body: Buffer | string): Promise<void> {
  const handle = await fs.open(file, 'w');
  try {
    await handle.writeFile(body);
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** The embedded default: objects are files under a root directory. */
export class LocalObjectStore implements ObjectStore {
  readonly kind = 'local' as const;
  /** Sizes acquire() saw lately; forgotten for each key this store writes or deletes. */
  private readonly recent = new RecentSizes(SIZE_FRESH_MS);
  /** Keys' paths (a query's snapshot asks for the same ~180 files panel after panel). */
  private paths = new Map<string, string>();

  constructor(readonly root: string) {}

  private file(key: string): string {
    let p = this.paths.get(key);
    if (p === undefined) {
      p = path.join(this.root, ...key.split('/'));
      if (this.paths.size >= 100_000) this.paths = new Map();
      this.paths.set(key, p);
    }
    return p;
  }

  async putFile(key: string, localPath: string): Promise<void> {
    const target = this.file(key);
    await replaceFile(target, tempBeside(target), (tmp) => fs.copyFile(localPath, tmp));
    this.recent.forget([target]);
  }

  /** An exclusive hard link of a complete temp file: it appears whole, and only if the key is free. */
  async putIfAbsent(key: string, body: Buffer | string): Promise<boolean> {
    const target = this.file(key);
    await fs.mkdir(path.dirname(target), { recursive: true });
    const tmp = tempBeside(target);
    try {
      await writeSynced(tmp, body);
      await fs.link(tmp, target);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
      throw err;
    } finally {
      await fs.rm(tmp, { force: true });
    }
    await fsyncDir(path.dirname(target));
    this.recent.forget([target]);
    return true;
  }

  async putBytes(key: string, body: Buffer | string): Promise<void> {
    await writeFileDurable(this.file(key), body);
    this.recent.forget([this.file(key)]);
  }

  async getBytes(key: string): Promise<Buffer | undefined> {
    try {
      return await fs.readFile(this.file(key));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  async list(prefix: string): Promise<{ key: string; size: number }[]> {
    const out: { key: string; size: number }[] = [];
    // A prefix may end inside a directory name; walk from the deepest complete directory.
    const slash = prefix.lastIndexOf('/');
    const baseKey = slash >= 0 ? prefix.slice(0, slash) : '';
    const walk = async (dirKey: string): Promise<void> => {
      let entries: import('node:fs').Dirent[];
      try {
        entries = await fs.readdir(this.file(dirKey), { withFileTypes: true });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ENOTDIR') return;
        throw err;
      }
      for (const entry of entries) {
        const key = dirKey ? `${dirKey}/${entry.name}` : entry.name;
        if (entry.isDirectory()) {
          if (key.startsWith(prefix) || prefix.startsWith(`${key}/`)) await walk(key);
        } else if (key.startsWith(prefix) && !entry.name.endsWith('.tmp')) {
          const stat = await fs.stat(this.file(key));
          out.push({ key, size: stat.size });
        }
      }
    };
    await walk(baseKey);
    return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  async delete(keys: string[]): Promise<void> {
    await Promise.all(keys.map((key) => fs.rm(this.file(key), { force: true })));
    this.recent.forget(keys.map((key) => this.file(key)));
  }

  async deletePrefix(prefix: string): Promise<void> {
    const trimmed = prefix.replace(/\/+$/, '');
    if (!trimmed) throw new Error('refusing to delete the whole store');
    await fs.rm(this.file(trimmed), { recursive: true, force: true });
    this.recent.forgetUnder(this.file(trimmed));
  }

  async localPath(key: string): Promise<string> {
    return this.file(key);
  }

  /** The files themselves: nothing is cached, so there is nothing to pin. */
  async acquire(keys: string[]): Promise<{ paths: string[]; sizes: number[]; release: () => void }> {
    const paths = keys.map((key) => this.file(key));
    // A query's files, looked at on the event loop: a stat of a local file is microseconds, while a
    // trip through libuv's thread pool waits behind the WAL's fsyncs when ingestion is busy. Many
    // files go through the pool instead, so the loop never stalls for long. A file looked at within
    // the last SIZE_FRESH_MS is not looked at again (recentSizes.ts: a dashboard's panels).
    if (paths.length <= SYNC_STAT_MAX_FILES) {
      const sizes = paths.map((p, i) => {
        try {
          return this.recent.size(p);
        } catch (err) {
          throw (err as NodeJS.ErrnoException).code === 'ENOENT' ? new MissingObjectError(keys[i]) : err;
        }
      });
      return { paths, sizes, release: () => undefined };
    }
    const sizes = await Promise.all(
      paths.map((p, i) =>
        fs.stat(p).then(
          (st) => st.size,
          (err: NodeJS.ErrnoException) => {
            throw err.code === 'ENOENT' ? new MissingObjectError(keys[i]) : err;
          },
        ),
      ),
    );
    return { paths, sizes, release: () => undefined };
  }

  async ping(): Promise<void> {
    await fs.mkdir(this.root, { recursive: true });
    await fs.access(this.root, fs.constants.W_OK);
  }
}

