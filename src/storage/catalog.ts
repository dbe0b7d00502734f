/**
 * The per-dataset catalog: which Parquet files hold the dataset's rows, with each file's time range,
 * row count, size and columns. It is the union of immutable manifest objects, one per flush (or
 * compaction), each naming the files it adds and removes. Manifests are never rewritten, so several
 * writers never conflict, and the catalog is (all added) − (all removed) whatever order manifests are
 * read in. Queries pick files from it by time range without listing any storage prefix.
 */
import type { DeletedFile, FileEntry, Manifest } from './codec.ts';

export type { DeletedFile, FileEntry, Manifest };

/** Totals of a set of files. */
export interface FileTotals {
  rows: number;
  /** Parquet bytes. */
  bytes: number;
  rawBytes: number;
  files: number;
}

export class Catalog {
  private files = new Map<string, FileEntry>();
  private removed = new Set<string>();
  private seen = new Set<string>();
  private flushedSegments = new Map<string, Set<number>>();
  /** Every file retention ever deleted, by key: several workers may delete the same file. */
  private deletedFiles = new Map<string, DeletedFile>();
  ingestedBytes = 0;

  /** Applies a manifest once (by its key); returns false when it was already applied. */
  apply(manifestKey: string, m: Manifest): boolean {
    if (this.seen.has(manifestKey)) return false;
    this.seen.add(manifestKey);
    for (const key of m.remove) {
      this.removed.add(key);
      this.files.delete(key);
    }
    for (const f of m.add) if (!this.removed.has(f.key)) this.files.set(f.key, f);
    let segs = this.flushedSegments.get(m.nodeId);
    if (!segs) this.flushedSegments.set(m.nodeId, (segs = new Set()));
    for (const s of m.walSegments) segs.add(s);
    this.ingestedBytes += m.ingestedBytes;
    for (const d of m.deleted ?? []) if (!this.deletedFiles.has(d.key)) this.deletedFiles.set(d.key, d);
    return true;
  }

  /** Whether a manifest removed this file (compaction merged it, or retention or a delete removed it). */
  isRemoved(key: string): boolean {
    return this.removed.has(key);
  }

  /** How many manifests were applied: it grows whenever the set of files may have changed. */
  get appliedManifests(): number {
    return this.seen.size;
  }

  hasManifest(manifestKey: string): boolean {
    return this.seen.has(manifestKey);
  }

  maxFlushedSegment(nodeId: string): number {
    let max = 0;
    for (const s of this.flushedSegments.get(nodeId) ?? []) if (s > max) max = s;
    return max;
  }

  isSegmentFlushed(nodeId: string, seq: number): boolean {
    return this.flushedSegments.get(nodeId)?.has(seq) ?? false;
  }

  /** Files whose time range may overlap [startMs, endMs). */
  select(startMs: number, endMs: number): FileEntry[] {
    const out: FileEntry[] = [];
    for (const f of this.files.values()) if (f.maxMs + 1 > startMs && f.minMs < endMs) out.push(f);
    return out.sort((a, b) => a.minMs - b.minMs || (a.key < b.key ? -1 : 1));
  }

  all(): FileEntry[] {
    return [...this.files.values()];
  }

  /** Totals of the current files, or of those in one `date=YYYY-MM-DD` partition. */
  totals(date?: string): FileTotals {
    const t: FileTotals = { rows: 0, bytes: 0, rawBytes: 0, files: 0 };
    const partition = date === undefined ? undefined : `/date=${date}/`;
    for (const f of this.files.values()) {
      if (partition && !f.key.includes(partition)) continue;
      t.rows += f.rows;
      t.bytes += f.bytes;
      t.rawBytes += f.rawBytes ?? 0;
      t.files++;
    }
    return t;
  }

  /** What retention has deleted so far. */
  deletedTotals(): FileTotals {
    const t: FileTotals = { rows: 0, bytes: 0, rawBytes: 0, files: 0 };
    for (const d of this.deletedFiles.values()) {
      t.rows += d.rows;
      t.bytes += d.bytes;
      t.rawBytes += d.rawBytes;
      t.files++;
    }
    return t;
  }

  /** Oldest and newest time of the stored rows (files' time-column ranges), or undefined when none. */
  timeRange(): { minMs: number; maxMs: number } | undefined {
    let minMs = Infinity;
    let maxMs = -Infinity;
    for (const f of this.files.values()) {
      minMs = Math.min(minMs, f.minMs);
      maxMs = Math.max(maxMs, f.maxMs);
    }
    return this.files.size ? { minMs, maxMs } : undefined;
  }
}
