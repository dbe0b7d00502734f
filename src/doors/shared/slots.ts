import { tooManyRequests, unavailable } from '../../errors.ts';

/**
 * Per-key concurrency for long-lived work a door holds open for a client (live-tail long polls,
 * OTLP/gRPC exports from metadata to answer): at most `perKey` for one key and `total` over all keys.
 * Taking never waits — long-lived work that queued would hold its connection anyway — so a key past
 * its share is refused (`too_many_requests`, 429 / RESOURCE_EXHAUSTED with a retry delay) and leaves
 * room for the others, and a full door is `unavailable` (503 / UNAVAILABLE, retried).
 */
export class KeySlots {
  private readonly held = new Map<string, number>();
  private used = 0;

  constructor(
    /** What the slots are for, and the settings that bound them, for the refusal's message. */
    private readonly what: string,
    readonly perKey: number,
    readonly total: number,
  ) {}

  get inUse(): number {
    return this.used;
  }

  /** Takes a slot for `key`; the returned function gives it back (once, however often it is called). */
  take(key: string): () => void {
    const mine = this.held.get(key) ?? 0;
    if (mine >= this.perKey) throw tooManyRequests(`this key already holds ${mine} ${this.what} (at most ${this.perKey} per key); retry later`, 1);
    if (this.used >= this.total) throw unavailable(`the service holds ${this.used} ${this.what} already (at most ${this.total}); retry`, 1);
    this.held.set(key, mine + 1);
    this.used++;
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.used--;
      const left = (this.held.get(key) ?? 1) - 1;
      if (left > 0) this.held.set(key, left);
      else this.held.delete(key);
    };
  }
}
