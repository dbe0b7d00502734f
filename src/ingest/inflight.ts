import { unavailable } from '../errors.ts';

/**
 * The in-flight byte budget of ingestion (P_MAX_INFLIGHT_BYTES): the bytes of request bodies being
 * received, decoded and stored at once, across every ingest route. Per-request limits alone bound
 * memory only per request; this bounds the sum, so memory stays bounded under any number of clients.
 *
 * A request reserves before it reads its body (the declared Content-Length, or P_MAX_BODY_BYTES when
 * the length is not declared), adjusts the reservation to the decoded size before decoding (known
 * exactly for identity and snappy; gzip's trailer gives it, and a body inflating past it is stopped
 * there and reserves the full decompressed limit) and releases it once the batch is acknowledged.
 * A request that does not fit waits up to `maxWaitMs` in arrival order, then fails with `unavailable`
 * (503 + Retry-After): every ingest client (OTel exporters, Prometheus remote write, Vector, Fluent
 * Bit) retries a 503 with back-off, and none of them expects to be held for long.
 */
export class InflightBudget {
  private used = 0;
  private highest = 0;
  private readonly waiting: { extra: number; own: number; grant: () => void }[] = [];

  constructor(
    readonly limit: number,
    private readonly maxWaitMs: number,
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

  /** Reserves `bytes` (waiting at most `maxWaitMs`); the lease must be released. */
  async acquire(bytes: number): Promise<InflightLease> {
    const lease = new InflightLease(this);
    await this.take(bytes);
    lease.bytes = bytes;
    return lease;
  }

  /**
   * @internal Takes `extra` bytes for a lease already holding `own`, waiting its turn. A lease that
   * already holds bytes (it is growing) goes ahead of new requests: it holds memory that only its
   * completion frees, and a new request waiting for that memory would otherwise wait on it in turn.
   */
  async take(extra: number, own = 0): Promise<void> {
    if (extra <= 0) return;
    // Arrival order otherwise: a request never overtakes one already waiting (a large body is not starved by small ones).
    const ahead = own > 0 ? this.waiting.filter((w) => w.own > 0).length : this.waiting.length;
    if (ahead === 0 && fits(this.used - own, own + extra, this.limit)) {
      this.used += extra;
      this.highest = Math.max(this.highest, this.used);
      return;
    }
    if (this.maxWaitMs <= 0) throw this.full(own + extra);
    await new Promise<void>((resolve, reject) => {
      const entry = {
        extra,
        own,
        grant: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      const timer = setTimeout(() => {
        const i = this.waiting.indexOf(entry);
        if (i >= 0) this.waiting.splice(i, 1);
        // The head leaving may let the next ones in.
        this.drain();
        reject(this.full(own + extra));
      }, this.maxWaitMs);
      this.waiting.splice(ahead, 0, entry);
    });
  }

  /** @internal Gives `bytes` back and lets waiting requests in. */
  give(bytes: number): void {
    if (bytes <= 0) return;
    this.used -= bytes;
    this.drain();
  }

  private drain(): void {
    while (this.waiting.length > 0 && fits(this.used - this.waiting[0].own, this.waiting[0].own + this.waiting[0].extra, this.limit)) {
      const next = this.waiting.shift()!;
      this.used += next.extra;
      this.highest = Math.max(this.highest, this.used);
      next.grant();
    }
  }

  private full(bytes: number) {
    return unavailable(
      `the service is receiving too much data at once (${this.used} bytes in flight, this request needs ${bytes}, limit ${this.limit}: P_MAX_INFLIGHT_BYTES); retry`,
      1,
    );
  }
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

  constructor(private readonly budget: InflightBudget) {}

  /** Makes the reservation `bytes`: gives back what is no longer needed, or waits for more. */
  async resize(bytes: number): Promise<void> {
    if (this.released) return;
    if (bytes < this.bytes) {
      this.budget.give(this.bytes - bytes);
      this.bytes = bytes;
    } else if (bytes > this.bytes) {
      await this.budget.take(bytes - this.bytes, this.bytes);
      this.bytes = bytes;
    }
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.budget.give(this.bytes);
    this.bytes = 0;
  }
}
