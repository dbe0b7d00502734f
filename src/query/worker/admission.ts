import { tooManyRequests, unavailable } from '../../errors.ts';
import type { QueryPoolSettings } from './pool.ts';

/**
 * Who may run a query now (the query pool's admission, pool.ts): the total and per-key limits, the
 * reserve kept for keys with nothing running, and the queue of those that wait, each with its own
 * deadline (429 past a key's share, 503 when all is full).
 */
export class Admission {
  private running = new Map<string, number>();
  private waiting: { key: string; resume: () => void; fail: (e: Error) => void; timer: NodeJS.Timeout }[] = [];

  constructor(private readonly s: Pick<QueryPoolSettings, 'concurrency' | 'perKey' | 'reserve' | 'queue' | 'queueWaitMs'>) {}

  /** Queries waiting for a slot. */
  get waitingCount(): number {
    return this.waiting.length;
  }

  /** Fails every query still waiting (the service is shutting down). */
  failAll(err: Error): void {
    for (const w of this.waiting.splice(0)) {
      clearTimeout(w.timer);
      w.fail(err);
    }
  }

  private get total(): number {
    let n = 0;
    for (const v of this.running.values()) n += v;
    return n;
  }

  /**
   * Whether a query of `key` may take a slot now: a free slot, the key under its own limit, and — for a
   * key that already runs a query — a free slot beyond the reserve. Keys with nothing running may take
   * the reserve: so however many keys run heavy queries, another key's query finds a slot.
   */
  private mayRun(key: string): boolean {
    const mine = this.running.get(key) ?? 0;
    const total = this.total;
    if (total >= this.s.concurrency || mine >= this.s.perKey) return false;
    const reserve = Math.max(0, Math.min(this.s.reserve ?? 0, this.s.concurrency - 1));
    return mine === 0 || total < this.s.concurrency - reserve;
  }

  /** Waits for a slot under the limits: 429 when this key has too much in flight, 503 when all is full. */
  async admit(key: string): Promise<void> {
    const mine = () => this.running.get(key) ?? 0;
    // Waiters wait for a reason this request may not share (their key's limit or share); release()
    // wakes them as soon as they can run, so a request that may run need not queue behind them.
    if (this.mayRun(key)) {
      this.running.set(key, mine() + 1);
      return;
    }
    const queuedForKey = this.waiting.filter((w) => w.key === key).length;
    if (mine() + queuedForKey >= 2 * this.s.perKey) {
      throw tooManyRequests(`this API key already has ${mine()} queries running and ${queuedForKey} waiting (P_QUERY_CONCURRENCY_PER_KEY=${this.s.perKey})`, 1);
    }
    if (this.waiting.length >= this.s.queue) throw unavailable(`all ${this.s.concurrency} query slots are busy and ${this.waiting.length} queries wait (P_QUERY_QUEUE)`, 1);
    await new Promise<void>((resume, fail) => {
      const entry = {
        key,
        resume,
        fail,
        timer: setTimeout(() => {
          this.waiting = this.waiting.filter((w) => w !== entry);
          fail(unavailable(`no query slot became free within ${this.s.queueWaitMs} ms`, 2));
        }, this.s.queueWaitMs),
      };
      this.waiting.push(entry);
    });
  }

  release(key: string): void {
    const n = (this.running.get(key) ?? 1) - 1;
    if (n > 0) this.running.set(key, n);
    else this.running.delete(key);
    // Wake the first waiter of a key with nothing running, else the first that may run.
    if (this.total >= this.s.concurrency) return;
    let i = this.waiting.findIndex((w) => !this.running.has(w.key));
    if (i < 0) i = this.waiting.findIndex((w) => this.mayRun(w.key));
    if (i < 0) return;
    const [w] = this.waiting.splice(i, 1);
    clearTimeout(w.timer);
    this.running.set(w.key, (this.running.get(w.key) ?? 0) + 1);
    w.resume();
  }
}
