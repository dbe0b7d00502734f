import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Hono } from 'hono';
import { loadConfig } from '../src/config.ts';
import { createApp } from '../src/doors/http/app.ts';
import { ApiKeys } from '../src/doors/shared/auth.ts';
import { ConnectionBudget } from '../src/doors/shared/connections.ts';
import type { AppEnv, Services } from '../src/doors/shared/context.ts';
import { createSignIn } from '../src/doors/shared/sessionAuth.ts';
import { LocalObjectStore } from '../src/storage/objects/objectStore.ts';
import { tempDir } from './helpers/server.ts';
import { startOidcProvider, type TestProvider } from './helpers/oidcProvider.ts';

/**
 * Single sign-on's checks, in process: the service's HTTP app (`app.request`) behind the public origin
 * https://console.test, a real OpenID provider (oidc-provider) on 127.0.0.1, and a small "browser" that
 * follows redirects, keeps each host's cookies and fills in the provider's login and consent forms. The
 * attacks are made by changing what a browser would carry: the state, the nonce, the PKCE challenge,
 * the code (replayed), the login cookie (another browser), the Origin of a request.
 */
const ORIGIN = 'https://console.test';
const GROUPS = { alice: ['lakehouse-admins'], rita: ['lakehouse-readers', 'other'], mallory: ['unknown'] };

let provider: TestProvider;
let app: Hono<AppEnv>;
/** A second worker on the same object store: the one a load balancer may send the next request to. */
let other: Hono<AppEnv>;

beforeAll(async () => {
  provider = await startOidcProvider(GROUPS);
  provider.register([`${ORIGIN}/api/v1/o/code`]);
  const dir = await tempDir('sso-flow-');
  const config = loadConfig({
    P_DATA_DIR: dir,
    P_OIDC_ISSUER: provider.issuer,
    P_OIDC_CLIENT_ID: provider.clientId,
    P_OIDC_CLIENT_SECRET: provider.clientSecret,
    P_ORIGIN_URI: ORIGIN,
    P_OIDC_SCOPE: 'openid email groups',
    P_OIDC_ROLE_MAP: 'lakehouse-admins=admin,lakehouse-readers=reader',
  });
  const keys = await ApiKeys.load('k:admin', dir);
  const storage = { store: { list: async () => [] }, list: () => [] };
  const worker = () =>
    createApp({
      config,
      keys,
      connections: new ConnectionBudget({ maxConnections: 64, headersTimeoutMs: 10_000 }),
      storage,
      signIn: createSignIn(config.sso, new LocalObjectStore(dir)),
      isReady: async () => ({ ready: true }),
    } as unknown as Services);
  app = worker();
  other = worker();
});
afterAll(() => provider?.close());

/** One browser: its cookies per host, requests to the console's origin answered by the app in process. */
class Browser {
  readonly jar = new Map<string, Map<string, string>>();

  async fetch(url: string, init: RequestInit = {}): Promise<Response> {
    const u = new URL(url);
    const headers = new Headers(init.headers);
    const cookies = this.jar.get(u.host);
    if (cookies?.size) headers.set('cookie', [...cookies].map(([k, v]) => `${k}=${v}`).join('; '));
    const res = u.origin === ORIGIN ? await app.request(`${u.pathname}${u.search}`, { ...init, headers }) : await fetch(u, { ...init, headers, redirect: 'manual' });
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const eq = pair.indexOf('=');
      const jar = this.jar.get(u.host) ?? new Map<string, string>();
      const [name, value] = [pair.slice(0, eq).trim(), pair.slice(eq + 1).trim()];
      if (value === '' || /max-age=0\b/i.test(line)) jar.delete(name);
      else jar.set(name, value);
      this.jar.set(u.host, jar);
    }
    return res;
  }

  /** Starts a sign-in: the provider's authorization URL and the Set-Cookie the console answered with. */
  async startLogin(redirect = '/#explore'): Promise<{ authorize: URL; setCookie: string[] }> {
    const res = await this.fetch(`${ORIGIN}/api/v1/o/login?redirect=${encodeURIComponent(redirect)}`);
    expect(res.status).toBe(302);
    return { authorize: new URL(res.headers.get('location')!), setCookie: res.headers.getSetCookie() };
  }

  /** Through the provider's login and consent forms as `login`, up to the redirect back to the console. */
  async atProvider(authorize: URL, login: string): Promise<URL> {
    let url = authorize.href;
    for (let step = 0; step < 20; step++) {
      const res = await this.fetch(url);
      const location = res.headers.get('location');
      if (location) {
        url = new URL(location, url).href;
        if (url.startsWith(ORIGIN)) return new URL(url);
        continue;
      }
      const html = await res.text();
      const form = /<form[^>]*action="([^"]+)"[^>]*method="post">[\s\S]*?name="prompt" value="(\w+)"/.exec(html);
      if (!form) throw new Error(`the provider answered ${res.status} without a form: ${html.slice(0, 500)}`);
      const action = new URL(form[1].replace(/&#x2F;/g, '/').replace(/&amp;/g, '&'), url).href;
      const body = new URLSearchParams(form[2] === 'login' ? { prompt: 'login', login, password: 'any password' } : { prompt: form[2] });
      const posted = await this.fetch(action, { method: 'POST', body, headers: { 'content-type': 'application/x-www-form-urlencoded' } });
      url = new URL(posted.headers.get('location')!, action).href;
    }
    throw new Error('too many steps at the provider');
  }

  /** The console's answer to the provider's redirect. */
  callback(url: URL): Promise<Response> {
    return this.fetch(url.href);
  }

  whoami(headers: Record<string, string> = {}): Promise<Response> {
    return this.fetch(`${ORIGIN}/api/v1/whoami`, { headers });
  }
}

async function signedIn(login: string): Promise<Browser> {
  const b = new Browser();
  const { authorize } = await b.startLogin();
  const res = await b.callback(await b.atProvider(authorize, login));
  expect(res.status).toBe(303);
  return b;
}

const errorOf = async (res: Response) => ((await res.json()) as { error: string }).error;

describe('single sign-on (OpenID Connect, code + PKCE)', () => {
  it('signs in: the authorization request, the cookies, the session, whoami', async () => {
    const b = new Browser();
    const { authorize, setCookie } = await b.startLogin();
    expect(authorize.origin).toBe(provider.issuer);
    const params = Object.fromEntries(authorize.searchParams);
    expect(params).toMatchObject({ response_type: 'code', client_id: provider.clientId, redirect_uri: `${ORIGIN}/api/v1/o/code`, code_challenge_method: 'S256' });
    expect(params.scope.split(' ')).toEqual(expect.arrayContaining(['openid', 'groups']));
    for (const p of ['state', 'nonce', 'code_challenge']) expect(params[p]?.length).toBeGreaterThanOrEqual(43);
    // The sign-in cookie: opaque (it holds none of the request's secrets), HttpOnly, Lax, only for /api/v1/o/.
    expect(setCookie).toHaveLength(1);
    expect(setCookie[0]).toMatch(/^p_oidc_login=[^;]+; Max-Age=600; Path=\/api\/v1\/o\/; HttpOnly; Secure; SameSite=Lax$/);
    for (const p of ['state', 'nonce', 'code_challenge']) expect(setCookie[0]).not.toContain(params[p]);

    const back = await b.atProvider(authorize, 'alice');
    expect(back.searchParams.get('state')).toBe(params.state);
    const res = await b.callback(back);
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/#explore');
    const cookie = res.headers.getSetCookie().find((c) => c.startsWith('__Host-session='));
    expect(cookie).toMatch(/^__Host-session=[^;]+; Max-Age=43200; Path=\/; HttpOnly; Secure; SameSite=Lax$/);
    expect(b.jar.get('console.test')?.has('p_oidc_login')).toBe(false);

    const who = await b.whoami();
    expect(who.status).toBe(200);
    expect(await who.json()).toMatchObject({ user: 'alice@example.com', roles: ['admin'], role: 'admin', datasets: null });
    // Signed in already: login goes straight back.
    const again = await b.fetch(`${ORIGIN}/api/v1/o/login?redirect=/`);
    expect([again.status, again.headers.get('location')]).toEqual([303, '/']);
  });

  it('maps a reader group to the reader role: whoami shows what it may do', async () => {
    const b = await signedIn('rita');
    const who = (await (await b.whoami()).json()) as { user: string; roles: string[]; actions: string[] };
    expect(who).toMatchObject({ user: 'rita@example.com', roles: ['reader'] });
    expect(who.actions).toEqual(['read']);
  });

  it('refuses a user none of whose groups maps to a role (no default role): 403, no session', async () => {
    const b = new Browser();
    const { authorize } = await b.startLogin();
    const res = await b.callback(await b.atProvider(authorize, 'mallory'));
    expect(res.status).toBe(403);
    expect(await errorOf(res)).toMatch(/mallory@example.com has no role here/);
    expect((await b.whoami()).status).toBe(401);
  });

  it('refuses a changed state (and the sign-in is used up)', async () => {
    const b = new Browser();
    const { authorize } = await b.startLogin();
    const back = await b.atProvider(authorize, 'alice');
    const forged = new URL(back);
    forged.searchParams.set('state', 'attacker-state');
    const res = await b.callback(forged);
    expect(res.status).toBe(401);
    expect(await errorOf(res)).toMatch(/state/);
    expect((await b.callback(back)).status).toBe(400);
    expect((await b.whoami()).status).toBe(401);
  });

  it('refuses a replayed code: with the same browser, and injected into another sign-in', async () => {
    const victim = new Browser();
    const { authorize } = await victim.startLogin();
    const back = await victim.atProvider(authorize, 'alice');
    // The code is replayed before and after its first use, by an attacker with a sign-in of their own.
    const attacker = new Browser();
    await attacker.startLogin();
    const injected = await attacker.callback(back);
    expect(injected.status).toBe(401);
    expect((await victim.callback(back)).status).toBe(303);
    const replay = await victim.callback(back);
    expect(replay.status).toBe(400);
    expect(await errorOf(replay)).toMatch(/no sign-in under way/);
    await attacker.startLogin();
    expect((await attacker.callback(back)).status).toBe(401);
    expect((await attacker.whoami()).status).toBe(401);
  });

  it('refuses an ID token with another nonce, a code from another PKCE challenge, and a callback in another browser', async () => {
    const b = new Browser();
    let { authorize } = await b.startLogin();
    authorize.searchParams.set('nonce', 'a-nonce-the-console-never-made-0123456789abcdefgh');
    let res = await b.callback(await b.atProvider(authorize, 'alice'));
    expect(res.status).toBe(401);
    expect(await errorOf(res)).toMatch(/nonce/);

    ({ authorize } = await b.startLogin());
    authorize.searchParams.set('code_challenge', 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM');
    res = await b.callback(await b.atProvider(authorize, 'alice'));
    expect(res.status).toBe(401);
    expect(await errorOf(res)).toMatch(/invalid_grant/);

    ({ authorize } = await b.startLogin());
    const back = await b.atProvider(authorize, 'alice');
    res = await new Browser().callback(back);
    expect(res.status).toBe(400);
    expect((await b.whoami()).status).toBe(401);
  });

  it('refuses redirects off this origin', async () => {
    for (const redirect of ['https://evil.test/', '//evil.test/x', '/\\evil.test', 'javascript:alert(1)']) {
      const res = await new Browser().fetch(`${ORIGIN}/api/v1/o/login?redirect=${encodeURIComponent(redirect)}`);
      expect(res.status, redirect).toBe(400);
    }
    const ok = await new Browser().fetch(`${ORIGIN}/api/v1/o/login?redirect=${encodeURIComponent(`${ORIGIN}/#tail`)}`);
    expect(ok.status).toBe(302);
  });

  it('takes a cookie for a change only from this origin; signs out with POST only', async () => {
    const b = await signedIn('rita');
    const del = (headers: Record<string, string>) => b.fetch(`${ORIGIN}/api/v1/logstream/app`, { method: 'DELETE', headers });
    for (const headers of [{ origin: 'https://evil.test' }, { origin: 'null' }, { 'sec-fetch-site': 'cross-site' }, {}] as Record<string, string>[]) {
      const res = await del(headers);
      expect(res.status, JSON.stringify(headers)).toBe(403);
      expect(await errorOf(res)).toMatch(/must come from https:\/\/console.test/);
    }
    // From the console's origin the request is the user's: a reader may not delete.
    const own = await del({ origin: ORIGIN });
    expect(own.status).toBe(403);
    expect(await errorOf(own)).toMatch(/user "rita@example.com" may not delete/);

    // A link or an image on another site cannot sign the user out (GET), nor can a cross-site POST.
    expect((await b.fetch(`${ORIGIN}/api/v1/o/logout`, { headers: { 'sec-fetch-site': 'cross-site' } })).status).toBe(405);
    expect((await b.fetch(`${ORIGIN}/api/v1/o/logout`, { method: 'POST', headers: { origin: 'https://evil.test' } })).status).toBe(403);
    expect((await b.whoami()).status).toBe(200);
    const out = await b.fetch(`${ORIGIN}/api/v1/o/logout`, { method: 'POST', headers: { origin: ORIGIN } });
    expect(out.status).toBe(200);
    expect(out.headers.getSetCookie()[0]).toMatch(/^__Host-session=; Max-Age=0; Path=\/; HttpOnly; Secure; SameSite=Lax/);
    expect((await b.whoami()).status).toBe(401);
  });

  it('an ended session is refused even when its cookie is kept', async () => {
    const b = await signedIn('alice');
    const cookie = b.jar.get('console.test')!.get('__Host-session')!;
    await b.fetch(`${ORIGIN}/api/v1/o/logout`, { headers: { 'sec-fetch-site': 'same-origin' } });
    expect((await b.whoami({ cookie: `__Host-session=${cookie}` })).status).toBe(401);
  });

  it('another worker on the same store accepts the session, and refuses it once it is ended', async () => {
    const b = await signedIn('alice');
    const cookie = `__Host-session=${b.jar.get('console.test')!.get('__Host-session')!}`;
    const whoamiThere = () => other.request('/api/v1/whoami', { headers: { cookie } });
    const there = await whoamiThere();
    expect(there.status).toBe(200);
    expect(await there.json()).toMatchObject({ user: 'alice@example.com', roles: ['admin'] });
    await b.fetch(`${ORIGIN}/api/v1/o/logout`, { method: 'POST', headers: { origin: ORIGIN } });
    // The other worker trusted its copy for a few seconds at most (sessions.ts CACHE_MS).
    await expect.poll(async () => (await whoamiThere()).status, { timeout: 20_000 }).toBe(401);
  });

  it('an API key wins over a cookie, and a key request needs no origin check', async () => {
    const b = await signedIn('rita');
    const who = await b.whoami({ 'x-api-key': 'k' });
    expect(await who.json()).toMatchObject({ user: null, role: 'admin' });
  });
});
