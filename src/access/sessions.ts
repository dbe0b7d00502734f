import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { tooManyRequests } from '../errors.ts';
import { log } from '../log.ts';
import { LOGIN_PREFIX, parseSessionObjectKey, SESSION_KEY_KEY, SESSION_PREFIX, sessionObjectKey } from '../storage/layout.ts';
import type { ObjectStore } from '../storage/objects/objectStore.ts';

/**
 * Console sessions, kept in the object store so that every worker on the bucket accepts a session any
 * of them opened, and a sign-out on one ends it on all (within CACHE_MS). The cookie is opaque: an
 * expiry, 256 random bits and an HMAC over both with a key kept in the bucket (made once, by whichever
 * worker comes first), so a forged or guessed cookie is refused without a read of the bucket. What it
 * names is stored under a hash of the cookie (layout.ts), never the cookie itself.
 *
 * Sign-ins under way (state, nonce, PKCE verifier) are kept the same way for LOGIN_TTL_MS, and taken
 * once: the callback reads and deletes them, so a replayed callback finds nothing.
 */

export const StoredSession = z.object({
  v: z.literal(1),
  /** The name shown (email, preferred_username, name or sub, the first the provider sends). */
  user: z.string(),
  /** The provider's subject and issuer: who the user is, stably. */
  sub: z.string(),
  issuer: z.string(),
  roles: z.array(z.string()),
  createdAt: z.number(),
  expiresAt: z.number(),
});
export type StoredSession = z.infer<typeof StoredSession>;

export const LoginTransaction = z.object({
  state: z.string(),
  nonce: z.string(),
  codeVerifier: z.string(),
  /** Where to send the browser once signed in: a path on this origin. */
  redirect: z.string(),
  expiresAt: z.number(),
});
export type LoginTransaction = z.infer<typeof LoginTransaction>;

/** How long a sign-in may take at the provider (login form, consent). */
export const LOGIN_TTL_MS = 10 * 60_000;
/** How long a worker trusts a session it read from the bucket before reading it again. */
export const CACHE_MS = 5_000;
const CACHE_MAX = 10_000;
/**
 * Sign-ins one worker begins per LOGIN_TTL_MS at most: starting one needs no credential and writes an
 * object, so a flood of them is refused (429) rather than filling the bucket. A company signing in at
 * nine o'clock starts far fewer.
 */
export const MAX_LOGINS_PER_WINDOW = 10_000;
/** Expired objects are swept at most this often per worker (on sign-in). */
const SWEEP_EVERY_MS = 10 * 60_000;

const TOKEN = /^([0-9a-z]{1,11})\.([A-Za-z0-9_-]{43})\.([A-Za-z0-9_-]{43})$/;
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

export class SessionStore {
  private key?: Promise<Buffer>;
  private readonly cache = new Map<string, { session: StoredSession; until: number }>();
  private lastSweep = 0;
  private logins = { since: 0, count: 0 };

  constructor(
    private readonly store: ObjectStore,
    readonly ttlMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Opens a session; the answer is the cookie's value. */
  async open(data: Omit<StoredSession, 'v' | 'createdAt' | 'expiresAt'>): Promise<{ token: string; session: StoredSession }> {
    const createdAt = this.now();
    const session: StoredSession = { v: 1, ...data, createdAt, expiresAt: createdAt + this.ttlMs };
    const token = await this.mint(session.expiresAt);
    await this.store.putBytes(sessionObjectKey(SESSION_PREFIX, session.expiresAt, sha256(token)), JSON.stringify(session));
    return { token, session };
  }

  /** The session a cookie names, or undefined (malformed, forged, expired, ended). */
  async get(token: string): Promise<StoredSession | undefined> {
    const expiresAt = await this.verify(token);
    if (expiresAt === undefined) return undefined;
    const digest = sha256(token);
    const cached = this.cache.get(digest);
    if (cached && cached.until > this.now()) return cached.session;
    const bytes = await this.store.getBytes(sessionObjectKey(SESSION_PREFIX, expiresAt, digest));
    const parsed = bytes ? StoredSession.safeParse(JSON.parse(bytes.toString('utf8'))) : undefined;
    if (!parsed?.success) {
      this.cache.delete(digest);
      return undefined;
    }
    if (this.cache.size >= CACHE_MAX) this.cache.clear();
    this.cache.set(digest, { session: parsed.data, until: this.now() + CACHE_MS });
    return parsed.data;
  }

  /** Ends a session (sign-out): deleted from the bucket, so every worker refuses it within CACHE_MS. */
  async end(token: string): Promise<void> {
    const expiresAt = await this.verify(token);
    if (expiresAt === undefined) return;
    const digest = sha256(token);
    this.cache.delete(digest);
    await this.store.delete([sessionObjectKey(SESSION_PREFIX, expiresAt, digest)]);
  }

  /** Keeps a sign-in under way; the answer is its cookie's value. */
  async beginLogin(tx: Omit<LoginTransaction, 'expiresAt'>, maxPerWindow = MAX_LOGINS_PER_WINDOW): Promise<string> {
    const now = this.now();
    if (now - this.logins.since >= LOGIN_TTL_MS) this.logins = { since: now, count: 0 };
    if (++this.logins.count > maxPerWindow) throw tooManyRequests(`more than ${maxPerWindow} sign-ins begun on this worker in ${LOGIN_TTL_MS / 60_000} minutes: try again later`, Math.ceil((this.logins.since + LOGIN_TTL_MS - now) / 1000));
    const expiresAt = now + LOGIN_TTL_MS;
    const token = await this.mint(expiresAt);
    await this.store.putBytes(sessionObjectKey(LOGIN_PREFIX, expiresAt, sha256(token)), JSON.stringify({ ...tx, expiresAt }));
    void this.sweep().catch((err: unknown) => log.warn('could not sweep expired sessions', { error: err }));
    return token;
  }

  /** The sign-in a cookie names, taken once: a second call with the same cookie finds nothing. */
  async takeLogin(token: string): Promise<LoginTransaction | undefined> {
    const expiresAt = await this.verify(token);
    if (expiresAt === undefined) return undefined;
    const key = sessionObjectKey(LOGIN_PREFIX, expiresAt, sha256(token));
    const bytes = await this.store.getBytes(key);
    if (!bytes) return undefined;
    await this.store.delete([key]);
    const parsed = LoginTransaction.safeParse(JSON.parse(bytes.toString('utf8')));
    return parsed.success ? parsed.data : undefined;
  }

  /** Deletes expired sessions and sign-ins (found by their keys alone), at most every SWEEP_EVERY_MS. */
  async sweep(force = false): Promise<number> {
    const now = this.now();
    if (!force && now - this.lastSweep < SWEEP_EVERY_MS) return 0;
    this.lastSweep = now;
    const expired = (await this.store.list(SESSION_PREFIX)).map((o) => o.key).filter((k) => (parseSessionObjectKey(k) ?? Infinity) <= now);
    if (expired.length) await this.store.delete(expired);
    return expired.length;
  }

  private async mint(expiresAt: number): Promise<string> {
    const head = `${expiresAt.toString(36)}.${randomBytes(32).toString('base64url')}`;
    return `${head}.${this.mac(await this.signingKey(), head)}`;
  }

  /** The expiry of a well-formed, correctly signed, unexpired token; else undefined. */
  private async verify(token: string): Promise<number | undefined> {
    const m = TOKEN.exec(token);
    if (!m) return undefined;
    const expected = Buffer.from(this.mac(await this.signingKey(), `${m[1]}.${m[2]}`));
    const given = Buffer.from(m[3]);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
    const expiresAt = parseInt(m[1], 36);
    return expiresAt > this.now() ? expiresAt : undefined;
  }

  private mac(key: Buffer, text: string): string {
    return createHmac('sha256', key).update(text).digest('base64url');
  }

  /** The bucket's signing key: read, or made by the first worker (a conditional write, so all agree). */
  private signingKey(): Promise<Buffer> {
    this.key ??= (async () => {
      await this.store.putIfAbsent(SESSION_KEY_KEY, randomBytes(32).toString('base64'));
      const stored = await this.store.getBytes(SESSION_KEY_KEY);
      const key = stored && Buffer.from(stored.toString('utf8').trim(), 'base64');
      if (!key || key.length < 32) throw new Error(`${SESSION_KEY_KEY} in the object store is not a 32-byte key`);
      return key;
    })();
    this.key.catch(() => (this.key = undefined));
    return this.key;
  }
}
