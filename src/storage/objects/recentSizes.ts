import * as fsSync from 'node:fs';

/**
 * Sizes of local files as seen within the last `freshMs` (the local store's acquire; snapshot.ts
 * compares them with the catalog's). A dashboard refresh takes a snapshot per panel of the same files:
 * 20 panels over an hour of minute files are 20 × ~180 stats within ~100 ms, each ~3.5 µs, 0.5–0.6 ms
 * of every panel (docs/performance.md). Looked at once a window instead, a file damaged by something
 * else than this service (a disk, a person) is found by the next snapshot after the window, or sooner
 * by the query worker that reads it (SQL sets it aside and runs again; PromQL answers an error naming
 * it as damaged and sets it aside): never read as if sound for longer than the window.
 *
 * The store's own writes and deletes forget the keys they touch, so the cache never outlives a change
 * this process made.
 */
export class RecentSizes {
  private seen = new Map<string, { size: number; at: number }>();

  constructor(
    private readonly freshMs: number,
    private readonly now: () => number = () => performance.now(),
    /** Past it the whole map is dropped (a bound, not an LRU: a refresh re-stats what it uses). */
    private readonly maxEntries = 100_000,
  ) {}

  /** The file's size, looked at only when not seen within the window; throws the stat's error (ENOENT…). */
  size(file: string): number {
    const now = this.now();
    const hit = this.seen.get(file);
    if (hit && now - hit.at < this.freshMs) return hit.size;
    const size = fsSync.statSync(file).size;
    if (this.seen.size >= this.maxEntries) this.seen = new Map();
    this.seen.set(file, { size, at: now });
    return size;
  }

  /** Forgets files this process writes or deletes. */
  forget(files: Iterable<string>): void {
    for (const f of files) this.seen.delete(f);
  }

  /** Forgets every file under a directory (a prefix deleted). */
  forgetUnder(dir: string): void {
    for (const f of this.seen.keys()) if (f === dir || f.startsWith(`${dir}/`)) this.seen.delete(f);
  }
}
