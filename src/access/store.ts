import { log } from '../log.ts';
import { unavailable } from '../errors.ts';
import type { ObjectStore } from '../storage/objects/objectStore.ts';
import { accessStateSchema, emptyState, type AccessState } from './state.ts';

/**
 * The access state in the bucket, shared by every worker. Each version is its own object,
 * `.access/state-<seq>.json`, written with the store's create-if-absent (S3 `If-None-Match: *`, an
 * exclusive link on disk) — the same conditional write the catalog relies on. A change reads the newest
 * version, applies its rule and writes version seq+1: of two admins racing for the same seq exactly one
 * wins; the other reloads and applies its rule again to the winner's state, so no update is lost and a
 * rule refused on the new state (the user now exists) is refused whole. Every worker polls the prefix
 * and adopts a newer version within `pollMs`; what is read back is validated with zod.
 */
/** Under a dot prefix: no dataset name can start with a dot, so a dataset named "access" never shares it. */
const PREFIX = '.access/';
const KEY_RE = /^\.access\/state-(\d{12})\.json$/;
const keyOf = (seq: number) => `${PREFIX}state-${String(seq).padStart(12, '0')}.json`;
/** Older versions kept (for a worker that polls late, and for an operator who looks back). */
const KEEP_VERSIONS = 20;
const MAX_ATTEMPTS = 50;

export class AccessStore {
  private state: AccessState = emptyState();
  private seq = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly listeners: ((s: AccessState) => void)[] = [];

  constructor(
    private readonly store: ObjectStore,
    private readonly pollMs: number,
  ) {}

  /** Loads the newest version and starts polling for newer ones. */
  async start(): Promise<void> {
    await this.reload();
    this.timer = setInterval(() => void this.reload().catch((err: Error) => log.warn('access state reload failed', { error: err.message })), this.pollMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  get current(): AccessState {
    return this.state;
  }

  get version(): number {
    return this.seq;
  }

  onChange(fn: (s: AccessState) => void): void {
    this.listeners.push(fn);
  }

  /** Adopts the newest stored version when it is newer than the one held; returns the versions seen. */
  async reload(): Promise<number[]> {
    const seqs = (await this.store.list(PREFIX)).map((o) => KEY_RE.exec(o.key)).filter((m) => m !== null).map((m) => Number(m[1])).sort((a, b) => a - b);
    const newest = seqs.at(-1) ?? 0;
    if (newest > this.seq) {
      const bytes = await this.store.getBytes(keyOf(newest));
      // Pruned between the list and the get: a newer one exists, the next poll finds it.
      // A change on this worker may have adopted a newer version while the object was read.
      if (bytes && newest > this.seq) this.adopt(newest, accessStateSchema.parse(JSON.parse(bytes.toString('utf8'))));
    }
    return seqs;
  }

  private adopt(seq: number, state: AccessState): void {
    this.seq = seq;
    this.state = state;
    for (const fn of this.listeners) fn(state);
  }

  /**
   * Applies `rule` to the newest state and stores the result as one new version. The rule may throw
   * (a 4xx): nothing is written. Returns what the rule returned beside the state.
   */
  async change<T>(rule: (s: AccessState) => { state: AccessState; result: T }): Promise<T> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const { state, result } = rule(this.state);
      const next = this.seq + 1;
      const body = JSON.stringify(accessStateSchema.parse(state));
      if (await this.store.putIfAbsent(keyOf(next), body)) {
        this.adopt(next, state);
        await this.prune(next);
        return result;
      }
      // Another worker (or admin) wrote `next` first: take its state and apply the rule again.
      await this.reload();
    }
    throw unavailable('the access state changed too often to apply this change; try again');
  }

  /** Deletes versions older than the kept ones (best effort: a leftover is only a stale object). */
  private async prune(newest: number): Promise<void> {
    const old = newest - KEEP_VERSIONS;
    if (old < 1) return;
    await this.store.delete([keyOf(old)]).catch((err: Error) => log.warn('could not delete an old access state version', { key: keyOf(old), error: err.message }));
  }
}
