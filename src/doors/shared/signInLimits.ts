import { log } from '../../log.ts';
import { tooManyRequests } from '../../errors.ts';

/**
 * Brute-force guard of sign-in (issue 34): failed attempts are counted per user name and per source
 * address over a sliding window; past `maxFailures` in `windowMs` further attempts of that user or from
 * that address are refused (429 with Retry-After, logged once per lock) before any password is checked,
 * until the oldest failure leaves the window. Per worker: several workers each allow the limit.
 */
export interface SignInLimitSettings {
  /** Failed sign-ins of one user name within the window before it is locked. */
  maxUserFailures: number;
  /** Failed sign-ins from one source address within the window before it is locked. */
  maxAddressFailures: number;
  windowMs: number;
}

/** Counters kept at most; the oldest are forgotten first (an attacker rotating names cannot grow memory). */
const MAX_TRACKED = 10_000;

export class SignInLimits {
  private readonly failures = new Map<string, number[]>();

  constructor(private readonly settings: SignInLimitSettings) {}

  private recent(id: string, now: number): number[] {
    const list = (this.failures.get(id) ?? []).filter((t) => t > now - this.settings.windowMs);
    if (list.length) this.failures.set(id, list);
    else this.failures.delete(id);
    return list;
  }

  /** Throws 429 when the user or the address is locked. */
  check(user: string | undefined, address: string | undefined, now = Date.now()): void {
    for (const [id, max] of this.ids(user, address)) {
      const list = this.recent(id, now);
      if (list.length < max) continue;
      const retry = Math.max(1, Math.ceil((list[0] + this.settings.windowMs - now) / 1000));
      throw tooManyRequests(`too many failed sign-ins for this ${id.startsWith('user:') ? 'user' : 'address'}; retry in ${retry} s`, retry);
    }
  }

  fail(user: string | undefined, address: string | undefined, now = Date.now()): void {
    for (const [id, max] of this.ids(user, address)) {
      const list = this.recent(id, now);
      list.push(now);
      this.failures.delete(id);
      this.failures.set(id, list);
      if (list.length === max) log.warn('sign-in locked after repeated failures', { [id.startsWith('user:') ? 'user' : 'address']: id.slice(id.indexOf(':') + 1), failures: max, windowSeconds: this.settings.windowMs / 1000 });
    }
    while (this.failures.size > MAX_TRACKED) this.failures.delete(this.failures.keys().next().value!);
  }

  /** A successful sign-in clears the user's failures (not the address's: one valid account must not unlock guessing others). */
  succeed(user: string | undefined): void {
    if (user !== undefined) this.failures.delete(`user:${user}`);
  }

  private ids(user: string | undefined, address: string | undefined): [string, number][] {
    const out: [string, number][] = [];
    if (user !== undefined) out.push([`user:${user}`, this.settings.maxUserFailures]);
    if (address !== undefined) out.push([`addr:${address}`, this.settings.maxAddressFailures]);
    return out;
  }
}
