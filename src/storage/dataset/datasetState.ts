import type { DatasetMeta, Schema } from '../codec.ts';
import { unionSchemas } from './schema.ts';

/**
 * The state a dataset generation carries on this worker, each part behind the one object that owns its
 * transitions (issue 35): flush.ts, schemaState.ts, engine.ts and datasetSet.ts call these methods and
 * read the getters; none of them assigns another module's fields. Pure: no I/O, no clock unless given.
 */

/** The longest wait before a failed flush is tried again. */
const MAX_RETRY_MS = 30_000;
/** Backoff doubles for this many failures, then stays. */
const MAX_DOUBLINGS = 6;

/** One piece of background work at a time (a flush, a compaction): the one running, if any. */
export class Running {
  #current?: Promise<void>;

  get current(): Promise<void> | undefined {
    return this.#current;
  }

  /** Marks `work` as the running one until it settles; returns it (settling the same way). */
  track(work: Promise<void>): Promise<void> {
    const tracked = work.finally(() => {
      if (this.#current === tracked) this.#current = undefined;
    });
    this.#current = tracked;
    return tracked;
  }
}

/**
 * A dataset's flush state: the flush running, since when rows wait for one (the flush interval counts
 * from the oldest), and the backoff after failures.
 */
export class FlushState {
  readonly run = new Running();
  #oldestUnflushedAt?: number;
  #retryAt = 0;
  #failures = 0;

  constructor(private readonly now: () => number = Date.now) {}

  get running(): Promise<void> | undefined {
    return this.run.current;
  }
  /** When the oldest row not yet in Parquet was appended; undefined: none waits. */
  get oldestUnflushedAt(): number | undefined {
    return this.#oldestUnflushedAt;
  }
  /** No new attempt before this time (0: at once). */
  get retryAt(): number {
    return this.#retryAt;
  }
  /** Failures since the last successful flush. */
  get failures(): number {
    return this.#failures;
  }

  /** Rows were appended (or found in the WAL at start): they wait from now, unless older ones already do. */
  appended(): void {
    this.#oldestUnflushedAt ??= this.now();
  }

  /** A flush sealed the WAL: what waited is its work; rows appended from now on wait anew. */
  sealed(): void {
    this.#oldestUnflushedAt = undefined;
  }

  /** A flush stored its rows: the backoff ends. */
  succeeded(): void {
    this.#failures = 0;
    this.#retryAt = 0;
  }

  /**
   * A flush failed: its rows are still waiting, and the next attempt waits `baseMs` doubled per failure
   * (up to 30 s) so a store that is down is not hammered. Returns that wait.
   */
  failed(baseMs: number): number {
    const now = this.now();
    this.#oldestUnflushedAt ??= now;
    this.#failures++;
    const wait = Math.min(MAX_RETRY_MS, baseMs * 2 ** Math.min(this.#failures, MAX_DOUBLINGS));
    this.#retryAt = now + wait;
    return wait;
  }

  /** Try again at once (damaged WAL bytes were cut, or disk space came back); the failure count stays. */
  retryNow(): void {
    this.#retryAt = 0;
  }

  /** Whether a flush may start now: none runs and no backoff holds it. */
  mayStart(): boolean {
    return !this.run.current && this.now() >= this.#retryAt;
  }

  /** Whether rows have waited `intervalMs` or longer. */
  overdue(intervalMs: number): boolean {
    return this.#oldestUnflushedAt !== undefined && this.now() - this.#oldestUnflushedAt >= intervalMs;
  }
}

/** What a schema refresh read: this worker's local copy, its store object, every worker's store object. */
export interface SchemaReadBack {
  local?: Schema;
  /** This worker's object in the store. */
  ownStored?: Schema;
  /** This worker's object in the store was damaged (set aside): it is rewritten whole at the next flush. */
  ownDamaged?: boolean;
  /** Every readable worker's object, this worker's included. */
  stored: Schema[];
}

/**
 * A dataset's schema on this worker: `schema` (the union of every worker's: what queries see) and `own`
 * (this worker's, whose durable copy is local and which the next flush uploads when `dirty`). Changes
 * are serialised, and memory follows the disk: `evolve` changes nothing unless `persist` succeeded.
 */
export class SchemaState {
  #schema: Schema = {};
  #own: Schema = {};
  #dirty = false;
  #lock: Promise<void> = Promise.resolve();

  get schema(): Readonly<Schema> {
    return this.#schema;
  }
  get own(): Readonly<Schema> {
    return this.#own;
  }
  /** The own schema has columns the store's copy lacks. */
  get dirty(): boolean {
    return this.#dirty;
  }

  /** Takes in what was read back from disk and store (refreshSchema). */
  refreshed(read: SchemaReadBack): void {
    if (read.local) {
      const local = read.local;
      if (Object.keys(local).some((k) => this.#own[k] !== local[k])) this.#dirty = true;
      this.#own = unionSchemas([this.#own, local]);
    }
    if (read.ownDamaged) this.#dirty = true;
    if (read.ownStored) this.#own = unionSchemas([this.#own, read.ownStored]);
    this.#schema = unionSchemas([this.#schema, this.#own, ...read.stored]);
  }

  /**
   * Adds `next`'s columns: when the own schema lacks some, `persist` must write the union durably first
   * (a throw changes nothing); then memory follows. One change at a time, each over the one before.
   */
  async evolve(next: Schema, persist: (own: Schema) => Promise<void>): Promise<void> {
    const previous = this.#lock;
    let unlock!: () => void;
    this.#lock = new Promise<void>((r) => (unlock = r));
    try {
      await previous;
      const own = unionSchemas([this.#own, next]);
      if (Object.keys(own).length === Object.keys(this.#own).length && Object.keys(own).every((k) => this.#own[k] === own[k])) {
        this.#schema = unionSchemas([this.#schema, next]);
        return; // an earlier batch already made these columns durable
      }
      await persist(own);
      this.#own = own;
      this.#schema = unionSchemas([this.#schema, own]);
      this.#dirty = true;
    } finally {
      unlock();
    }
  }

  /** A flush uploads the own schema: returns it when dirty (and clears the mark), else undefined. */
  takeDirty(): Readonly<Schema> | undefined {
    if (!this.#dirty) return undefined;
    this.#dirty = false;
    return this.#own;
  }

  /** The upload of `takeDirty()`'s schema failed: the next flush tries again. */
  uploadFailed(): void {
    this.#dirty = true;
  }
}

/** A dataset generation's life on this worker: loaded, its metadata updated (retention), then deleted. */
export class Lifecycle {
  readonly loadedAt: number;
  #meta: DatasetMeta;
  #deleted = false;

  constructor(meta: DatasetMeta, now: () => number = Date.now) {
    this.#meta = meta;
    this.loadedAt = now();
  }

  get meta(): DatasetMeta {
    return this.#meta;
  }
  get deleted(): boolean {
    return this.#deleted;
  }

  /** New metadata of the same generation (retention changed); another generation is another Dataset. */
  updated(meta: DatasetMeta): void {
    if (meta.name !== this.#meta.name || meta.generation !== this.#meta.generation) {
      throw new Error(`dataset metadata of ${meta.name}/${meta.generation} given to ${this.#meta.name}/${this.#meta.generation}`);
    }
    this.#meta = meta;
  }

  /** Deleted (here or by another worker): running work stops at its next check. Final. */
  markDeleted(): void {
    this.#deleted = true;
  }
}
