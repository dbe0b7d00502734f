import { tooManyRequests, unavailable } from '../errors.ts';

/**
 * The in-flight byte budget of ingestion (P_MAX_INFLIGHT_BYTES): the bytes of request bodies being
 * received, decoded and stored at once, across every ingest route. Per-request limits alone bound
 * memory only per request; this bounds the sum, so memory stays bounded under any number of clients.
 *
 * A request reserves its body as it arrives (in steps, src/ingest/service.ts), so a slow client
 * holds only what it has sent; it adjusts the reservation to the decoded size before decoding (known
 * exactly for identity and snappy; gzip's trailer gives it, and a body inflating past it is stopped
 * there and reserves the full decompressed limit) and releases it once the batch is acknowledged.
 * A request that does not fit waits up to `maxWaitMs` in arrival order, then fails with `unavailable`
 * (503 + Retry-After): every ingest client (OTel exporters, Prometheus remote write, Vector, Fluent
 * Bit) retries a 503 with back-off, and none of them expects to be held for long.
 */
export class InflightBudget {
  private used = 0;
  private highest = 0;
  private readonly waiting: Waiter[] = [];
  /** Bytes held per key (P_INGEST_KEY_SHARE). */
  private readonly held = new Map<string, number>();

  constructor(
    readonly limit: number,
    private readonly maxWaitMs: number,
    /**
     * The fraction of the budget one key may hold while another key holds bytes or waits for room
     * (1: no per-key bound). Alone, a key may use the whole budget: the share only keeps one key from
     * holding it all against others.
     */
    readonly keyShare = 1,
  ) {}

  get inUse(): number {
    return this.used;
  }

  /** The most ever in use at once (what P_MAX_INFLIGHT_BYTES held memory to). */
  get peak(): number {
    return this.highest;
  }

  get queued(): number {
    return this.waiting.length;
  }

  /** Reserves `bytes` for `key` (waiting at most `maxWaitMs`); the lease must be released. */
  async acquire(bytes: number, key = ''): Promise<InflightLease> {
    const lease = new InflightLease(this, key);
    await this.take(bytes, 0, key);
    lease.bytes = bytes;
    return lease;
  }

  /**
   * @internal Takes `extra` bytes for a lease of `key` already holding `own`, waiting its turn. A lease
   * that already holds bytes (it is growing) goes ahead of new requests: it holds memory that only its
   * completion frees, and a new request waiting for that memory would otherwise wait on it in turn.
   * Arrival order otherwise: a request never overtakes one already waiting (a large body is not
   * starved by small ones), except one whose key has its share, which the others pass.
   */
  async take(extra: number, own = 0, key = ''): Promise<void> {
    if (extra <= 0) return;
    let granted = false;
    const entry: Waiter = { extra, own, key, grant: () => (granted = true) };
    const ahead = own > 0 ? this.waiting.filter((w) => w.own > 0).length : this.waiting.length;
    this.waiting.splice(ahead, 0, entry);
    this.drain();
    if (granted) return;
    const leave = () => {
      const i = this.waiting.indexOf(entry);
      if (i >= 0) this.waiting.splice(i, 1);
      const refusal = this.refusal(entry);
      // The head leaving may let the next ones in.
      this.drain();
      return refusal;
    };
    if (this.maxWaitMs <= 0) throw leave();
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(leave()), this.maxWaitMs);
      entry.grant = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  /** @internal Gives `bytes` of `key` back and lets waiting requests in. */
  give(bytes: number, key = ''): void {
    if (bytes <= 0) return;
    this.used -= bytes;
    const left = (this.held.get(key) ?? 0) - bytes;
    if (left > 0) this.held.set(key, left);
    else this.held.delete(key);
    this.drain();
  }

  private drain(): void {
    for (let i = 0; i < this.waiting.length; ) {
      const next = this.waiting[i];
      // Its key has its share while others want room: the requests behind it go first.
      if (this.overShare(next)) {
        i++;
        continue;
      }
      if (!fits(this.used - next.own, next.own + next.extra, this.limit)) break;
      this.waiting.splice(i, 1);
      this.used += next.extra;
      this.held.set(next.key, (this.held.get(next.key) ?? 0) + next.extra);
      this.highest = Math.max(this.highest, this.used);
      next.grant();
    }
  }

  /** Whether granting `w` would take its key past its share while another key holds bytes or waits. */
  private overShare(w: Waiter): boolean {
    if (this.keyShare >= 1 || (this.held.get(w.key) ?? 0) + w.extra <= this.keyShare * this.limit) return false;
    for (const [k, bytes] of this.held) if (k !== w.key && bytes > 0) return true;
    return this.waiting.some((x) => x.key !== w.key);
  }

  private refusal(w: Waiter) {
    if (this.overShare(w)) {
      return tooManyRequests(
        `this key has ${this.held.get(w.key) ?? 0} bytes of request bodies in flight and this request needs ${w.extra} more: one key may hold ${Math.floor(this.keyShare * this.limit)} bytes while others send (P_INGEST_KEY_SHARE of P_MAX_INFLIGHT_BYTES); retry`,
        1,
      );
    }
    return unavailable(
      `the service is receiving too much data at once (${this.used} bytes in flight, this request needs ${w.own + w.extra}, limit ${this.limit}: P_MAX_INFLIGHT_BYTES); retry`,
      1,
    );
  }
}

interface Waiter {
  extra: number;
  own: number;
  key: string;
  grant: () => void;
}

/**
 * Whether a request may hold `bytes` in all while other requests hold `others`. One that is larger
 * than the whole budget is admitted when nothing else is in flight (it runs alone), so the budget
 * never refuses outright a request the per-request limits allow.
 */
export function fits(others: number, bytes: number, limit: number): boolean {
  return others === 0 || others + bytes <= limit;
}

/** One request's share of the budget. */
export class InflightLease {
  bytes = 0;
  private released = false;

  constructor(
    private readonly budget: InflightBudget,
    private readonly key = '',
  ) {}

  /** Makes the reservation `bytes`: gives back what is no longer needed, or waits for more. */
  async resize(bytes: number): Promise<void> {
    if (this.released) return;
    if (bytes < this.bytes) {
      this.budget.give(this.bytes - bytes, this.key);
      this.bytes = bytes;
    } else if (bytes > this.bytes) {
      const extra = bytes - this.bytes;
      await this.budget.take(extra, this.bytes, this.key);
      // Released while it waited (a gRPC call cancelled mid-message): what was just granted goes back.
      if (this.released) return this.budget.give(extra, this.key);
      // Added, not set: another resize may have run meanwhile, and `bytes` must stay what is held.
      this.bytes += extra;
    }
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.budget.give(this.bytes, this.key);
    this.bytes = 0;
  }
}
