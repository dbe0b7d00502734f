import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CACHE_MS, LOGIN_TTL_MS, SessionStore } from '../../src/access/sessions.js';
import { LocalObjectStore } from '../../src/storage/objects/objectStore.ts';
import { parseSessionObjectKey, SESSION_PREFIX } from '../../src/storage/layout.js';

const who = { user: 'ann@example.com', sub: 'ann', issuer: 'https://idp.example.com', roles: ['reader'] };
const TTL = 3_600_000;

let dir: string;
let store: LocalObjectStore;
beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'sessions-'));
  store = new LocalObjectStore(dir);
});
afterAll(() => fs.rm(dir, { recursive: true, force: true }));

/** A clock the test moves. */
const clock = (start = Date.UTC(2026, 0, 1)) => {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms) };
};

describe('SessionStore', () => {
  it('a session opened on one worker is accepted by another on the same bucket, and ended on both', async () => {
    const c = clock();
    const a = new SessionStore(store, TTL, c.now);
    const b = new SessionStore(store, TTL, c.now);
    const { token, session } = await a.open(who);
    expect(session).toMatchObject({ ...who, expiresAt: c.now() + TTL });
    expect(await b.get(token)).toEqual(session);
    await a.end(token);
    expect(await a.get(token)).toBeUndefined();
    // b trusted its copy for CACHE_MS at most.
    c.advance(CACHE_MS + 1);
    expect(await b.get(token)).toBeUndefined();
  });

  it('the bucket holds no cookie: objects are named by a hash of it, with the expiry first', async () => {
    const c = clock();
    const s = new SessionStore(store, TTL, c.now);
    const { token } = await s.open(who);
    const keys = (await store.list(SESSION_PREFIX)).map((o) => o.key);
    expect(keys.some((k) => k.includes(token) || k.includes(token.split('.')[1]))).toBe(false);
    expect(keys.map(parseSessionObjectKey)).toContain(c.now() + TTL);
    for (const { key } of await store.list(SESSION_PREFIX)) {
      const body = (await store.getBytes(key))!.toString();
      expect(body.includes(token.split('.')[1])).toBe(false);
    }
  });

  it.each([
    ['empty', () => ''],
    ['not a token', () => 'session'],
    ['a changed random part', (t: string) => t.replace(/\.(.)/, (_m, ch: string) => `.${ch === 'A' ? 'B' : 'A'}`)],
    ['a changed expiry', (t: string) => `${(parseInt(t.split('.')[0], 36) + 1).toString(36)}.${t.split('.').slice(1).join('.')}`],
    ['a changed signature', (t: string) => `${t.slice(0, -1)}${t.endsWith('A') ? 'B' : 'A'}`],
  ])('a forged cookie (%s) is refused', async (_n, forge) => {
    const s = new SessionStore(store, TTL);
    const { token } = await s.open(who);
    expect(await s.get(forge(token))).toBeUndefined();
    expect(await s.get(token)).toBeDefined();
  });

  it('an expired session is refused, and swept by its key alone', async () => {
    const c = clock(Date.UTC(2026, 1, 1));
    const s = new SessionStore(store, 1000, c.now);
    const { token } = await s.open(who);
    c.advance(1001);
    expect(await s.get(token)).toBeUndefined();
    const before = (await store.list(SESSION_PREFIX)).length;
    const swept = await s.sweep(true);
    expect(swept).toBeGreaterThanOrEqual(1);
    expect((await store.list(SESSION_PREFIX)).length).toBe(before - swept);
    // The signing key is kept.
    expect(await store.getBytes('.sessions/key')).toBeDefined();
  });

  it('a sign-in under way is taken once, and expires', async () => {
    const c = clock();
    const s = new SessionStore(store, TTL, c.now);
    const tx = { state: 's', nonce: 'n', codeVerifier: 'v', redirect: '/#explore' };
    const token = await s.beginLogin(tx);
    expect(await s.takeLogin(token)).toEqual({ ...tx, expiresAt: c.now() + LOGIN_TTL_MS });
    expect(await s.takeLogin(token)).toBeUndefined();
    const late = await s.beginLogin(tx);
    c.advance(LOGIN_TTL_MS + 1);
    expect(await s.takeLogin(late)).toBeUndefined();
    // A session cookie is not a sign-in cookie, nor the reverse.
    const { token: session } = await s.open(who);
    expect(await s.takeLogin(session)).toBeUndefined();
  });

  it('refuses a flood of sign-ins (429) until the window has passed', async () => {
    const c = clock();
    const s = new SessionStore(store, TTL, c.now);
    const tx = { state: 's', nonce: 'n', codeVerifier: 'v', redirect: '/' };
    for (let i = 0; i < 3; i++) await s.beginLogin(tx, 3);
    await expect(s.beginLogin(tx, 3)).rejects.toMatchObject({ kind: 'too_many_requests' });
    c.advance(LOGIN_TTL_MS);
    await expect(s.beginLogin(tx, 3)).resolves.toMatch(/\./);
  });

  it('two workers starting together agree on one signing key', async () => {
    const fresh = new LocalObjectStore(await fs.mkdtemp(path.join(os.tmpdir(), 'sessions-key-')));
    const [a, b] = [new SessionStore(fresh, TTL), new SessionStore(fresh, TTL)];
    const [ta, tb] = await Promise.all([a.open(who), b.open(who)]);
    expect(await b.get(ta.token)).toBeDefined();
    expect(await a.get(tb.token)).toBeDefined();
  });
});
