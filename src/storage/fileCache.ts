import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { log } from '../log.ts';

interface Entry {
  file: string;
  size: number;
  pins: number;
  lastUsed: number;
}

/**
 * A size-bounded local cache of downloaded objects, least recently used out. Objects in this system
 * are immutable once written, so a cached file is never revalidated. Files pinned by a running query
 * are never evicted; concurrent requests for one key share one download; downloads land under a
 * temporary name and are renamed, so a crash never leaves a half file under a real name.
 */
export class FileCache {
  private entries = new Map<string, Entry>();
  private downloads = new Map<string, Promise<Entry>>();
  private total = 0;

  constructor(
    private readonly dir: string,
    private readonly maxBytes: number,
    private readonly download: (key: string, target: string) => Promise<void>,
  ) {}

  private fileFor(key: string): string {
    return path.join(this.dir, ...key.split('/'));
  }

  /** Adopts files already in the cache directory (after a restart); removes stray partial downloads. */
  async init(): Promise<void> {
    await fs.mkdir(this.dir, { recursive: true });
    const walk = async (d: string): Promise<void> => {
      for (const e of await fs.readdir(d, { withFileTypes: true })) {
        const p = path.join(d, e.name);
        if (e.isDirectory()) await walk(p);
        else if (e.name.includes('.partial-')) await fs.rm(p, { force: true });
        else {
          const stat = await fs.stat(p);
          const key = path.relative(this.dir, p).split(path.sep).join('/');
          this.entries.set(key, { file: p, size: stat.size, pins: 0, lastUsed: stat.atimeMs });
          this.total += stat.size;
        }
      }
    };
    await walk(this.dir);
    await this.evict();
  }

  get bytes(): number {
    return this.total;
  }

  has(key: string): boolean {
    return this.entries.has(key);
  }

  /** Pins the keys (downloading what is missing) and returns their local paths. */
  async acquire(keys: string[]): Promise<{ paths: string[]; release: () => void }> {
    const pinned: Entry[] = [];
    try {
      for (const key of keys) {
        let entry = await this.get(key);
        // An eviction may have run between the download and this line: take it again if so.
        while (this.entries.get(key) !== entry) entry = await this.get(key);
        entry.pins++;
        pinned.push(entry);
      }
    } catch (err) {
      for (const e of pinned) e.pins--;
      throw err;
    }
    await this.evict();
    let released = false;
    return {
      paths: pinned.map((e) => e.file),
      release: () => {
        if (released) return;
        released = true;
        for (const e of pinned) {
          e.pins--;
          e.lastUsed = Date.now();
        }
        void this.evict();
      },
    };
  }

  private async get(key: string): Promise<Entry> {
    const have = this.entries.get(key);
    if (have) {
      have.lastUsed = Date.now();
      return have;
    }
    let pending = this.downloads.get(key);
    if (!pending) {
      pending = (async () => {
        const file = this.fileFor(key);
        await fs.mkdir(path.dirname(file), { recursive: true });
        const tmp = `${file}.partial-${process.pid}-${Math.random().toString(36).slice(2)}`;
        try {
          await this.download(key, tmp);
          await fs.rename(tmp, file);
        } catch (err) {
          await fs.rm(tmp, { force: true });
          throw err;
        }
        const size = (await fs.stat(file)).size;
        const entry: Entry = { file, size, pins: 0, lastUsed: Date.now() };
        this.entries.set(key, entry);
        this.total += size;
        return entry;
      })().finally(() => this.downloads.delete(key));
      this.downloads.set(key, pending);
    }
    return pending;
  }

  private async evict(): Promise<void> {
    if (this.total <= this.maxBytes) return;
    const candidates = [...this.entries].filter(([, e]) => e.pins === 0).sort((a, b) => a[1].lastUsed - b[1].lastUsed);
    for (const [key, e] of candidates) {
      if (this.total <= this.maxBytes) break;
      if (e.pins > 0 || this.entries.get(key) !== e) continue;
      this.entries.delete(key);
      this.total -= e.size;
      await fs.rm(e.file, { force: true }).catch((err) => log.warn('cache eviction failed', { file: e.file, error: (err as Error).message }));
    }
  }
}
