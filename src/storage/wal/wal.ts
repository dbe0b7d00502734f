import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { unavailable } from '../../errors.ts';
import { log } from '../../log.ts';
import type { TimeRange } from '../../model.ts';

/**
 * Write-ahead log of one dataset: NDJSON segment files, one flattened row per line, so DuckDB's
 * `read_json` turns them into Parquet (and queries read them) without any JavaScript in between.
 *
 * Group commit: appends that arrive while a write is in flight are gathered and written with one
 * write + one fdatasync, and all of them are acknowledged together. Every group write ends with the
 * commit marker line `{}`; on recovery a segment is cut back to its last marker, so a write torn by a
 * crash (never acknowledged) leaves no partial batch behind. The marker reads as an all-null row,
 * which every reader drops with `WHERE <time column> IS NOT NULL` (every real row has its time).
 */
export const COMMIT_MARKER = '{}\n';
const MARKER_BYTES = Buffer.from(COMMIT_MARKER);

export interface Segment {
  seq: number;
  path: string;
  bytes: number;
  rows: number;
  /** Raw request bytes that produced these rows (for the dataset's ingestion stats). */
  rawBytes: number;
  /** When its first and last batch were written (not known for a segment recovered at start). */
  firstAppendMs?: number;
  lastAppendMs?: number;
  /**
   * The range of its rows' times in the dataset's time column, as the batches' writers reported them:
   * ±Infinity once a batch reported none; not known for a segment recovered at start.
   */
  minTimeMs?: number;
  maxTimeMs?: number;
}

interface Pending {
  chunks: Uint8Array[];
  bytes: number;
  rows: number;
  rawBytes: number;
  minTimeMs: number;
  maxTimeMs: number;
  waiters: { resolve: () => void; reject: (e: Error) => void }[];
}

/** Retry-After for a full or failing local disk: space has to be freed, which takes a while. */
const DISK_RETRY_SEC = 10;

/** What `writeFully` needs of a file handle (a narrower type than FileHandle, for tests). */
export interface VectorWriter {
  writev(buffers: Uint8Array[], position: number): Promise<{ bytesWritten: number }>;
}

/**
 * Writes all of `chunks`, one after another, at `position` with `writev` (a group commit's batches go
 * to the disk as they came, without first being copied into one buffer). A write may take fewer bytes
 * without an error (a disk that fills up mid-write): the rest is written in further calls, and a call
 * that makes no progress is an error, so a batch is never taken as written when it is not.
 */
export async function writeFully(handle: VectorWriter, chunks: Uint8Array[], position: number): Promise<number> {
  const total = chunks.reduce((sum, c) => sum + c.byteLength, 0);
  let rest = chunks;
  let done = 0;
  while (done < total) {
    const { bytesWritten } = await handle.writev(rest, position + done);
    if (bytesWritten <= 0) throw Object.assign(new Error(`short write: ${done} of ${total} bytes`), { code: 'ENOSPC' });
    done += bytesWritten;
    rest = skipBytes(rest, bytesWritten);
  }
  return total;
}

/** `chunks` without their first `n` bytes (whole chunks dropped, a partly written one cut). */
function skipBytes(chunks: Uint8Array[], n: number): Uint8Array[] {
  let i = 0;
  while (i < chunks.length && n >= chunks[i].byteLength) n -= chunks[i++].byteLength;
  const rest = chunks.slice(i);
  if (n > 0 && rest.length) rest[0] = rest[0].subarray(n);
  return rest;
}

const segmentName = (seq: number) => `${String(seq).padStart(12, '0')}.ndjson`;

export class Wal {
  private sealed: Segment[] = [];
  private active?: Segment & { handle: fs.FileHandle };
  private pending?: Pending;
  private draining?: Promise<void>;
  private nextSeq = 1;
  private readers = new Map<number, number>();
  private doomed = new Set<number>();

  /**
   * @param segmentBytes the active segment is sealed once it holds this much (P_FLUSH_BYTES): a flush
   * converts at most about this much at a time, so its memory does not grow with a backlog.
   */
  private constructor(
    readonly dir: string,
    private readonly segmentBytes: number,
  ) {}

  /** Opens (and recovers) the WAL in `dir`: torn tails are cut, every surviving segment is sealed. */
  static async open(dir: string, firstSeq = 1, segmentBytes = Infinity): Promise<Wal> {
    const wal = new Wal(dir, segmentBytes);
    wal.nextSeq = firstSeq;
    await fs.mkdir(dir, { recursive: true });
    const names = (await fs.readdir(dir)).filter((n) => /^\d{12}\.ndjson$/.test(n)).sort();
    for (const name of names) {
      const seq = Number(name.slice(0, 12));
      wal.nextSeq = Math.max(wal.nextSeq, seq + 1);
      const file = path.join(dir, name);
      const segment = await recoverSegment(file, seq);
      if (segment) wal.sealed.push(segment);
    }
    return wal;
  }

  /** Bytes and rows acknowledged but not yet turned into Parquet. */
  get size(): { bytes: number; rows: number; rawBytes: number; segments: number } {
    const all = this.active ? [...this.sealed, this.active] : this.sealed;
    return {
      bytes: all.reduce((s, x) => s + x.bytes, 0),
      rows: all.reduce((s, x) => s + x.rows, 0),
      rawBytes: all.reduce((s, x) => s + x.rawBytes, 0),
      segments: all.length,
    };
  }

  /**
   * Appends rows (already-serialised lines, each ending in '\n'; as UTF-8 bytes, which are written as
   * they are, or as text); resolves once they are on disk. `times`: their range in the time column, if known.
   */
  append(lines: string | Uint8Array, rows: number, rawBytes: number, times?: TimeRange): Promise<void> {
    return new Promise((resolve, reject) => {
      const p = (this.pending ??= { chunks: [], bytes: 0, rows: 0, rawBytes: 0, minTimeMs: Infinity, maxTimeMs: -Infinity, waiters: [] });
      const bytes = typeof lines === 'string' ? Buffer.from(lines) : lines;
      p.chunks.push(bytes);
      p.bytes += bytes.byteLength;
      p.rows += rows;
      p.rawBytes += rawBytes;
      p.minTimeMs = Math.min(p.minTimeMs, times?.minMs ?? -Infinity);
      p.maxTimeMs = Math.max(p.maxTimeMs, times?.maxMs ?? Infinity);
      p.waiters.push({ resolve, reject });
      this.startDrain();
    });
  }

  /** Writes the pending group (and those that gather meanwhile) unless that already runs. */
  private startDrain(): void {
    this.draining ??= this.drain().finally(() => {
      this.draining = undefined;
      // An append made after the drain last looked for a pending group (in the microtasks that
      // acknowledged its last one, before this ran) found it running and started none: without this it
      // waited for the next append to the dataset, which might never come.
      if (this.pending) this.startDrain();
    });
  }

  private async drain(): Promise<void> {
    while (this.pending) {
      const batch = this.pending;
      this.pending = undefined;
      try {
        const seg = await this.activeSegment();
        batch.chunks.push(MARKER_BYTES);
        const written = await writeFully(seg.handle, batch.chunks, seg.bytes);
        await seg.handle.datasync();
        seg.bytes += written;
        seg.rows += batch.rows;
        seg.rawBytes += batch.rawBytes;
        seg.lastAppendMs = Date.now();
        seg.firstAppendMs ??= seg.lastAppendMs;
        seg.minTimeMs = Math.min(seg.minTimeMs ?? Infinity, batch.minTimeMs);
        seg.maxTimeMs = Math.max(seg.maxTimeMs ?? -Infinity, batch.maxTimeMs);
        for (const w of batch.waiters) w.resolve();
        // Sealed here, between commits; the next batch starts a new segment.
        if (seg.bytes >= this.segmentBytes) await this.closeActive().catch((err) => log.error('wal: closing a full segment failed', { file: seg.path, error: err as Error }));
      } catch (err) {
        log.error('wal write failed; the batch is not acknowledged', { dir: this.dir, error: err as Error });
        await this.rollBack();
        const e = err as NodeJS.ErrnoException;
        const cause = e.code === 'ENOSPC' || e.code === 'EDQUOT' ? 'the local disk is full' : `the local disk failed (${e.code ?? e.message})`;
        const reason = unavailable(`write-ahead log: ${cause}; nothing of this request was stored, retry later`, DISK_RETRY_SEC);
        for (const w of batch.waiters) w.reject(reason);
      }
    }
  }

  /**
   * Puts the active segment back exactly as it was before a failed write: cut to its last committed
   * length (a short write or a failed fdatasync leaves bytes of an unacknowledged batch behind), so
   * the next write appends after the last commit and nothing half-written is ever read. When even
   * that fails, the segment is closed and recovered to its last commit marker, and a new one starts.
   */
  private async rollBack(): Promise<void> {
    const seg = this.active;
    if (!seg) return;
    try {
      await seg.handle.truncate(seg.bytes);
      await seg.handle.datasync();
    } catch (err) {
      log.error('wal: cutting back a failed write failed; starting a new segment', { file: seg.path, error: err as Error });
      await this.closeActive(true).catch(() => undefined);
    }
  }

  private async activeSegment(): Promise<Segment & { handle: fs.FileHandle }> {
    if (this.active) return this.active;
    const seq = this.nextSeq++;
    const file = path.join(this.dir, segmentName(seq));
    const handle = await fs.open(file, 'w');
    // The new file's directory entry must be durable before anything in it is acknowledged.
    const dirHandle = await fs.open(this.dir, 'r');
    await dirHandle.sync().finally(() => dirHandle.close());
    this.active = { seq, path: file, bytes: 0, rows: 0, rawBytes: 0, handle };
    return this.active;
  }

  private async closeActive(torn = false): Promise<void> {
    const seg = this.active;
    if (!seg) return;
    this.active = undefined;
    const sealed: Segment = {
      seq: seg.seq,
      path: seg.path,
      bytes: seg.bytes,
      rows: seg.rows,
      rawBytes: seg.rawBytes,
      firstAppendMs: seg.firstAppendMs,
      lastAppendMs: seg.lastAppendMs,
      minTimeMs: seg.minTimeMs,
      maxTimeMs: seg.maxTimeMs,
    };
    // Listed as sealed before any await: a concurrent seal() (a query, a flush) must never find an
    // acknowledged segment in neither list.
    if (!torn && seg.rows > 0) this.sealed.push(sealed);
    await seg.handle.close();
    if (torn) {
      const recovered = await recoverSegment(seg.path, seg.seq);
      if (recovered) this.sealed.push({ ...recovered, rawBytes: seg.rawBytes });
    } else if (seg.rows === 0) {
      await fs.rm(seg.path, { force: true });
    }
  }

  /**
   * Closes the active segment (after in-flight commits land) so every acknowledged row is in an
   * immutable sealed segment, and returns those segments. New appends go to a new segment.
   */
  async seal(): Promise<Segment[]> {
    while (this.draining) await this.draining;
    await this.closeActive();
    return [...this.sealed];
  }

  sealedSegments(): Segment[] {
    return [...this.sealed];
  }

  /** Marks segments as read by a query; they are not deleted until released. */
  retain(segments: Segment[]): () => void {
    for (const s of segments) this.readers.set(s.seq, (this.readers.get(s.seq) ?? 0) + 1);
    return () => {
      for (const s of segments) {
        const n = (this.readers.get(s.seq) ?? 1) - 1;
        if (n > 0) this.readers.set(s.seq, n);
        else {
          this.readers.delete(s.seq);
          if (this.doomed.delete(s.seq)) void fs.rm(s.path, { force: true });
        }
      }
    };
  }

  /** Forgets segments whose rows are now in Parquet; files still read by a query go when released. */
  async remove(seqs: number[]): Promise<void> {
    const gone = new Set(seqs);
    const removed = this.sealed.filter((s) => gone.has(s.seq));
    this.sealed = this.sealed.filter((s) => !gone.has(s.seq));
    for (const s of removed) {
      if (this.readers.has(s.seq)) this.doomed.add(s.seq);
      else await fs.rm(s.path, { force: true });
    }
  }

  /**
   * Replaces a sealed segment's content with `content` (its readable lines, commit markers kept),
   * atomically: a query holding the segment reads the old file or the new one, never a mix.
   */
  async rewriteSealed(seq: number, content: Buffer): Promise<void> {
    const seg = this.sealed.find((s) => s.seq === seq);
    if (!seg) return;
    const tmp = `${seg.path}.rewrite`;
    await fs.writeFile(tmp, content);
    const handle = await fs.open(tmp, 'r+');
    await handle.sync().finally(() => handle.close());
    await fs.rename(tmp, seg.path);
    seg.bytes = content.length;
    seg.rows = countRows(content, content.length);
  }

  /** Moves a sealed segment out of the log (to `target`), for one that cannot be stored at all. */
  async setAside(seq: number, target: string): Promise<void> {
    const seg = this.sealed.find((s) => s.seq === seq);
    if (!seg) return;
    this.sealed = this.sealed.filter((s) => s !== seg);
    await fs.mkdir(path.dirname(target), { recursive: true });
    // A copy, not a rename: a running query may still hold the segment; it goes when released.
    await fs.copyFile(seg.path, target);
    if (this.readers.has(seq)) this.doomed.add(seq);
    else await fs.rm(seg.path, { force: true });
  }

  /** Stops writing and closes files (graceful shutdown). */
  async close(): Promise<void> {
    while (this.draining) await this.draining;
    await this.closeActive();
  }

  /** Deletes the whole log (dataset deletion). */
  async destroy(): Promise<void> {
    while (this.draining) await this.draining.catch(() => undefined);
    if (this.active) await this.active.handle.close().catch(() => undefined);
    this.active = undefined;
    this.sealed = [];
    await fs.rm(this.dir, { recursive: true, force: true });
  }
}

/** Cuts a segment back to its last commit marker; deletes it when nothing in it was committed. */
async function recoverSegment(file: string, seq: number): Promise<Segment | undefined> {
  const content = await fs.readFile(file);
  let end = content.length;
  // Find the last "{}\n" that starts a line.
  for (;;) {
    const at = content.lastIndexOf(COMMIT_MARKER, end - 1);
    if (at < 0) {
      end = 0;
      break;
    }
    if (at === 0 || content[at - 1] === 0x0a) {
      end = at + COMMIT_MARKER.length;
      break;
    }
    end = at;
  }
  if (end === 0) {
    await fs.rm(file, { force: true });
    return undefined;
  }
  if (end < content.length) {
    log.warn('wal: cut torn tail of segment', { file, keptBytes: end, droppedBytes: content.length - end });
    await fs.truncate(file, end);
  }
  const rows = countRows(content, end);
  return { seq, path: file, bytes: end, rows, rawBytes: end };
}

/** Rows in the first `end` bytes of a segment: lines that are not commit markers. */
function countRows(content: Buffer, end: number): number {
  let rows = 0;
  let markers = 0;
  for (let i = 0; i < end; i++) if (content[i] === 0x0a) rows++;
  for (let at = content.indexOf(COMMIT_MARKER); at >= 0 && at < end; at = content.indexOf(COMMIT_MARKER, at + 1)) {
    if (at === 0 || content[at - 1] === 0x0a) markers++;
  }
  return rows - markers;
}
