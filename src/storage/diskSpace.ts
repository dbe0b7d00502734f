import * as fs from 'node:fs/promises';
import { unavailable } from '../errors.ts';
import { log } from '../log.ts';
import { classifyFailure } from '../failures.ts';

/** Retry-After for appends refused for lack of disk: a flush or an operator has to make room. */
const DISK_RETRY_SEC = 10;

/**
 * The default reserve: room for one flush of data that does not compress (its Parquet about as large
 * as its WAL bytes), twice P_FLUSH_BYTES, for a segment is sealed only once it holds P_FLUSH_BYTES and
 * may end one request past it; at most a quarter of a small file system, so the WAL keeps the rest.
 * It was P_FLUSH_BYTES capped at 1/32 of the file system: 2 MiB on 64 MiB, smaller than one flush,
 * so a full small disk never recovered by itself (issue 30 A12).
 */
export function defaultReserve(flushBytes: number, fileSystemBytes: number): number {
  return Math.min(2 * flushBytes, Math.floor(fileSystemBytes / 4));
}

/**
 * Keeps the local disk able to flush (issue 19): the WAL stops taking appends while the free space is
 * under a reserve, so the flush, which needs room for its Parquet files before it can delete the WAL
 * segments they replace, always has some; and while a flush fails for lack of space, appends stop
 * altogether (they would only take the room the flush needs). When space comes back (an operator
 * frees some, or a flush deletes segments), the flush is retried at once, before its back-off ends.
 *
 * Free space is read with statfs once a second (`refresh`), and lowered in between by what the WAL
 * appended, so a burst cannot overshoot the reserve by more than one second of appends.
 */
export class DiskGuard {
  private free = Number.POSITIVE_INFINITY;
  private appendedSince = 0;
  private reserve: number;
  /** A flush failed for lack of space: the free space then, or undefined. */
  private blockedAt?: number;

  constructor(
    private readonly dir: string,
    /** Bytes to keep free; undefined: defaultReserve. */
    private readonly reserveSetting: number | undefined,
    private readonly flushBytes: number,
    /** Called when space came back while a flush was blocked: retry the flushes now. */
    private readonly onSpaceBack: () => void,
  ) {
    this.reserve = reserveSetting ?? 2 * flushBytes;
  }

  /** Reads the free space of the data directory's file system. */
  async refresh(): Promise<void> {
    const st = await fs.statfs(this.dir);
    this.free = st.bavail * st.bsize;
    this.appendedSince = 0;
    this.reserve = this.reserveSetting ?? defaultReserve(this.flushBytes, st.blocks * st.bsize);
    if (this.blockedAt !== undefined && this.free >= this.blockedAt + this.reserve) {
      log.info('disk: space came back; retrying the flushes before taking appends again', { freeBytes: this.free });
      this.blockedAt = this.free;
      this.onSpaceBack();
    }
  }

  /** Throws (503 + Retry-After) when `bytes` more in the WAL would leave less than the reserve, or a flush is blocked by the disk. */
  admit(bytes: number): void {
    if (this.blockedAt !== undefined) {
      throw unavailable('the local disk is full: a flush could not run for lack of space; nothing of this request was stored, retry later', DISK_RETRY_SEC);
    }
    if (this.free - this.appendedSince - bytes < this.reserve) {
      throw unavailable(`the local disk is almost full (the last ${this.reserve} bytes are kept for flushes); nothing of this request was stored, retry later`, DISK_RETRY_SEC);
    }
  }

  appended(bytes: number): void {
    this.appendedSince += bytes;
  }

  /** A flush failed: when for lack of space, appends stop until a flush succeeds. */
  flushFailed(err: unknown): void {
    if (classifyFailure(err) !== 'disk') return;
    if (this.blockedAt === undefined) log.warn('disk: a flush failed for lack of space; appends stop until a flush succeeds', { freeBytes: this.free });
    this.blockedAt = Number.isFinite(this.free) ? this.free : 0;
  }

  flushSucceeded(): void {
    if (this.blockedAt !== undefined) log.info('disk: a flush succeeded; taking appends again');
    this.blockedAt = undefined;
  }

  get blocked(): boolean {
    return this.blockedAt !== undefined;
  }
}
