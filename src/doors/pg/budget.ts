import { PgError } from './sqlstate.ts';

/**
 * Bounds on what PostgreSQL sessions keep between messages: prepared statements and portals. Each
 * counts one entry and its statement text's bytes, against its session (entries and bytes) and its
 * key (bytes, across every connection of the key), so neither many Parse messages on one connection
 * nor the same on many connections can grow the service's heap without bound.
 */

/** Bytes held per API key, over all its sessions. */
export class KeyState {
  private used = new Map<string, number>();

  constructor(readonly maxBytes: number) {}

  take(key: string, bytes: number): boolean {
    const now = this.used.get(key) ?? 0;
    if (now + bytes > this.maxBytes) return false;
    this.used.set(key, now + bytes);
    return true;
  }

  give(key: string, bytes: number): void {
    const left = (this.used.get(key) ?? 0) - bytes;
    if (left > 0) this.used.set(key, left);
    else this.used.delete(key);
  }

  held(key: string): number {
    return this.used.get(key) ?? 0;
  }
}

export interface SessionStateLimits {
  /** P_PG_MAX_PREPARED */
  maxEntries: number;
  /** P_PG_MAX_SESSION_STATE */
  maxBytes: number;
}

/** What one session holds; `close` gives it all back to the key. */
export class SessionState {
  private entries = 0;
  private bytes = 0;

  constructor(
    private readonly limits: SessionStateLimits,
    private readonly keys: KeyState,
    private readonly key: string,
  ) {}

  /** The cost of keeping a statement's text (JavaScript strings are two bytes a character), plus bookkeeping. */
  static cost(sql: string): number {
    return 2 * sql.length + 128;
  }

  /** Takes one entry of `bytes`, or throws 54000 (program_limit_exceeded) naming the limit. */
  take(bytes: number, what: string): void {
    if (this.entries + 1 > this.limits.maxEntries) {
      throw new PgError('too_large', `this connection already holds ${this.entries} prepared statements and portals (P_PG_MAX_PREPARED=${this.limits.maxEntries}): close some to ${what}`, '54000');
    }
    if (this.bytes + bytes > this.limits.maxBytes) {
      throw new PgError('too_large', `this connection's prepared statements and portals would exceed ${this.limits.maxBytes} bytes (P_PG_MAX_SESSION_STATE): close some to ${what}`, '54000');
    }
    if (!this.keys.take(this.key, bytes)) {
      throw new PgError('too_large', `this API key's connections hold prepared statements and portals of ${this.keys.maxBytes} bytes (P_PG_MAX_KEY_STATE): close some to ${what}`, '54000');
    }
    this.entries++;
    this.bytes += bytes;
  }

  give(bytes: number): void {
    this.entries--;
    this.bytes -= bytes;
    this.keys.give(this.key, bytes);
  }

  close(): void {
    this.keys.give(this.key, this.bytes);
    this.entries = 0;
    this.bytes = 0;
  }
}
