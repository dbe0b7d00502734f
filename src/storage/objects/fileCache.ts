import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { log } from '../../log.ts';
import { fileCacheLookups } from '../../metrics.ts';
import { replaceFile } from './objectStore.ts';

interface Entry {
  key: string;
  file: string;
  size: number;
  /** The file's inode and change time when it was downloaded or adopted (see fileStamp). */
  stamp: string;
  pins: number;
  /** Logical clock of the last use: strictly ordered, unlike Date.now() within one millisecond. */
  lastUsed: number;
}

interface Flight {
  /** Callers waiting for this download; each gets one pin on the finished entry. */
  waiters: number;
  done: Promise<Entry>;
}

export interface FileCacheStats {
  files: number;
  bytes: number;
  pinned: number;
  hits: number;
  downloads: number;
  evictions: number;
}

/** Temporary download names; matched at startup to sweep what a crash left behind. */
const PARTIAL = /\.partial-\d+-[0-9a-z]+$/;
/**
 * Suffix that makes each download's file name unique: a query worker keeps links by name across
 * queries, so a copy downloaded after a damaged one must never take the damaged one's name.
 */
const DOWNLOAD_TAG = /~r[0-9a-z]+(\.[^./]*)?$/;
/** `dir/x.parquet` → `dir/x~r<tag>.parquet` (the extension stays last: readers go by it). */
const tagged = (file: string, tag: string) => {
  const ext = path.extname(file);
  return `${file.slice(0, file.length - ext.length)}~r${tag}${ext}`;
};
let downloadSeq = 0;

/**
 * A file's inode and modification time (ns): any write to it, or a file put in its place, changes them.
 * Not the change time: the query workers' hard links to a cached file change that on every query.
 */
const stampOf = (st: { ino: bigint; mtimeNs: bigint }) => `${st.ino}:${st.mtimeNs}`;
export async function fileStamp(file: string): Promise<string> {
  return stampOf(await fs.stat(file, { bigint: true }));
}

/**
 * Why a cached file cannot stand for its object, or undefined when it can: it is gone, its size is not
 * the downloaded size, it was written since it was downloaded (its inode or modification time is not
 * the `stamp` taken then: a same-size change inside a page gave silently wrong answers, issue 30 A14),
 * or (Parquet) it lacks the magic at either end or its footer length points outside the file. Cheap:
 * one open, one stat and two small reads. A writer that sets the modification time back on purpose
 * (utimes) is not caught: the cache directory is the service's own (docs/storage.md).
 */
export async function cachedFileProblem(file: string, size: number, parquet: boolean, stamp?: string): Promise<string | undefined> {
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(file, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 'the cached file is gone';
    throw err;
  }
  try {
    const st = await handle.stat({ bigint: true });
    const actual = Number(st.size);
    if (actual !== size) return `the cached file has ${actual} bytes, ${size} were downloaded`;
    if (stamp !== undefined && stampOf(st) !== stamp) return 'the cached file was written after it was downloaded';
    if (!parquet) return undefined;
    if (size < 12) return 'the cached file is too short for Parquet';
    const head = Buffer.alloc(4);
    const tail = Buffer.alloc(8);
    await handle.read(head, 0, 4, 0);
    await handle.read(tail, 0, 8, size - 8);
    if (head.toString('latin1') !== 'PAR1' || tail.toString('latin1', 4) !== 'PAR1') return 'the cached file lacks the Parquet magic';
    if (tail.readUInt32LE(0) + 12 > size) return 'the cached file\'s Parquet footer length points outside it';
    return undefined;
  } finally {
    await handle.close();
  }
}

/** How many objects one acquire() downloads at once. */
const DOWNLOAD_CONCURRENCY = 4;

/**
 * A size-bounded local cache of downloaded objects, least recently used out. Objects in this system
 * are immutable once written, so a cached file is never revalidated.
 *
 * - Files pinned by a running query are never evicted, even when that leaves the cache over budget
 *   (a query needs its files more than the budget needs to hold).
 * - Concurrent requests for one key share one download, and the download hands each waiter its pin
 *   in the same tick it enters the index, so no eviction can slip in between.
 * - Downloads land under a temporary name, are fsynced, then renamed: a crash or power loss never
 *   leaves a partial file under a real name (which would be trusted forever after).
 * - On startup the index is rebuilt from the directory; stray temporary files are deleted.
 * - Each use checks the cached file first (size, inode and modification time as downloaded, and a Parquet
 *   file's magic and footer length): one truncated, deleted or written to on disk (even a same-size
 *   change inside a page) is dropped and downloaded again under a new name, so a
 *   query never reads a damaged copy (and never silently loses its rows) while the object is sound.
 */
export class FileCache {
  private readonly entries = new Map<string, Entry>();
  private readonly flights = new Map<string, Flight>();
  /** Unlinks of evicted files still in progress (settle() waits for them). */
  private readonly removals = new Map<string, Promise<void>>();
  private total = 0;
  private clock = 0;
  private counters = { hits: 0, downloads: 0, evictions: 0 };
  private ready?: Promise<void>;

  constructor(
    private readonly dir: string,
    private readonly maxBytes: number,
    /** Writes the object's full content to `target` (a temporary file), or throws. */
    private readonly fetch: (key: string, target: string) => Promise<void>,
  ) {}

  /** The cache file for a key. Keys are '/'-separated; anything that could escape the directory is refused. */
  fileFor(key: string): string {
    const parts = key.split('/');
    if (!key || parts.some((p) => p === '' || p === '.' || p === '..') || key.includes('\\') || key.includes('\0')) {
      throw new Error(`object key not cacheable: ${JSON.stringify(key)}`);
    }
    return path.join(this.dir, ...parts);
  }

  /** Adopts files already in the directory (after a restart); runs once, again only if it failed. */
  init(): Promise<void> {
    this.ready ??= this.adopt().catch((err) => {
      this.ready = undefined;
      throw err;
    });
    return this.ready;
  }

  private async adopt(): Promise<void> {
    await fs.mkdir(this.dir, { recursive: true });
    const found: { key: string; file: string; size: number; stamp: string; used: number }[] = [];
    const walk = async (d: string): Promise<void> => {
      for (const e of await fs.readdir(d, { withFileTypes: true })) {
        const p = path.join(d, e.name);
        if (e.isDirectory()) await walk(p);
        else if (PARTIAL.test(e.name)) await fs.rm(p, { force: true });
        else if (e.isFile()) {
          const stat = await fs.stat(p, { bigint: true });
          const key = path.relative(this.dir, p).split(path.sep).join('/').replace(DOWNLOAD_TAG, '$1');
          // atime is only as fresh as the mount's atime policy allows; mtime is the download time.
          found.push({ key, file: p, size: Number(stat.size), stamp: stampOf(stat), used: Number(stat.atimeMs > stat.mtimeMs ? stat.atimeMs : stat.mtimeMs) });
        }
      }
    };
    await walk(this.dir);
    found.sort((a, b) => a.used - b.used);
    for (const f of found) {
      // Two copies of one key (a refetch and the damaged original a crash left): the newer one stays.
      const older = this.entries.get(f.key);
      if (older) {
        this.total -= older.size;
        await fs.rm(older.file, { force: true });
      }
      this.entries.set(f.key, { key: f.key, file: f.file, size: f.size, stamp: f.stamp, pins: 0, lastUsed: ++this.clock });
      this.total += f.size;
    }
    if (found.length) log.info('file cache adopted', { dir: this.dir, files: found.length, bytes: this.total });
    this.evict();
  }

  get bytes(): number {
    return this.total;
  }

  has(key: string): boolean {
    return this.entries.has(key);
  }

  stats(): FileCacheStats {
    let pinned = 0;
    for (const e of this.entries.values()) if (e.pins > 0) pinned++;
    return { files: this.entries.size, bytes: this.total, pinned, ...this.counters };
  }

  /**
   * Pins the keys (downloading what is missing) and returns their local paths in the same order.
   * The files stay until `release` is called; on failure nothing stays pinned.
   */
  async acquire(keys: string[]): Promise<{ paths: string[]; sizes: number[]; release: () => void }> {
    await this.init();
    const pinned: (Entry | undefined)[] = new Array(keys.length);
    let failure: { err: unknown } | undefined;
    let next = 0;
    const worker = async () => {
      while (!failure && next < keys.length) {
        const i = next++;
        try {
          pinned[i] = await this.pin(keys[i]);
        } catch (err) {
          failure ??= { err };
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(DOWNLOAD_CONCURRENCY, keys.length) }, worker));
    if (failure) {
      this.unpin(pinned);
      throw failure.err;
    }
    const entries = pinned as Entry[];
    this.evict();
    let released = false;
    return {
      paths: entries.map((e) => e.file),
      sizes: entries.map((e) => e.size),
      release: () => {
        if (released) return;
        released = true;
        this.unpin(entries);
      },
    };
  }

  private unpin(entries: (Entry | undefined)[]): void {
    for (const e of entries) {
      if (!e) continue;
      e.pins--;
      e.lastUsed = ++this.clock;
    }
    this.evict();
  }

  /** Resolves to the key's entry with one pin taken for the caller. */
  private async pin(key: string): Promise<Entry> {
    const have = this.entries.get(key);
    if (have) {
      have.pins++;
      have.lastUsed = ++this.clock;
      const problem = await cachedFileProblem(have.file, have.size, key.endsWith('.parquet'), have.stamp);
      if (!problem) {
        this.counters.hits++;
        fileCacheLookups.inc({ result: 'hit' });
        return have;
      }
      have.pins--;
      fileCacheLookups.inc({ result: 'damaged' });
      if (this.entries.get(key) === have) {
        log.warn('cached copy damaged: downloading the object again', { key, file: have.file, problem });
        this.entries.delete(key);
        this.total -= have.size;
        // Queries holding it keep their links; the new download takes a new name.
        await fs.rm(have.file, { force: true });
      }
    } else fileCacheLookups.inc({ result: 'miss' });
    let flight = this.flights.get(key);
    if (!flight) {
      const f: Flight = { waiters: 0, done: undefined as unknown as Promise<Entry> };
      f.done = this.download(key, f).finally(() => this.flights.delete(key));
      this.flights.set(key, (flight = f));
    }
    flight.waiters++;
    return flight.done;
  }

  private async download(key: string, flight: Flight): Promise<Entry> {
    const file = tagged(this.fileFor(key), `${(++downloadSeq).toString(36)}${Date.now().toString(36)}`);
    // The cache can be fetched again, so its directory is not fsynced; a partial file never gets the real name.
    const size = await replaceFile(file, `${file}.partial-${process.pid}-${Math.random().toString(36).slice(2)}`, (tmp) => this.fetch(key, tmp), false);
    const stamp = await fileStamp(file);
    this.counters.downloads++;
    // Synchronously from here to the return: the waiters' pins exist before anything can evict.
    const entry: Entry = { key, file, size, stamp, pins: flight.waiters, lastUsed: ++this.clock };
    this.entries.set(key, entry);
    this.total += size;
    return entry;
  }

  /**
   * Forgets the key's copy (a reader found it damaged): the next pin downloads the object again, under
   * a new name. Queries holding the old copy keep their links to it.
   */
  async drop(key: string): Promise<void> {
    const e = this.entries.get(key);
    if (!e) return;
    this.entries.delete(key);
    this.total -= e.size;
    await fs.rm(e.file, { force: true });
  }

  /** Drops unpinned files, least recently used first, until the cache is within budget. */
  private evict(): void {
    if (this.total <= this.maxBytes) return;
    const victims = [...this.entries.values()].filter((e) => e.pins === 0).sort((a, b) => a.lastUsed - b.lastUsed);
    for (const e of victims) {
      if (this.total <= this.maxBytes) break;
      this.entries.delete(e.key);
      this.total -= e.size;
      this.counters.evictions++;
      const removal: Promise<void> = fs
        .rm(e.file, { force: true })
        .catch((err) => log.warn('cache eviction failed', { file: e.file, error: (err as Error).message }))
        .finally(() => {
          if (this.removals.get(e.key) === removal) this.removals.delete(e.key);
        });
      this.removals.set(e.key, removal);
    }
  }

  /** Waits for evicted files to be gone from disk (tests, shutdown). */
  async settle(): Promise<void> {
    await Promise.all(this.removals.values());
  }
}
