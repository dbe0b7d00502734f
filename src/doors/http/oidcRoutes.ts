import type { Context, Hono } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { invalidInput, notFound } from '../../errors.ts';
import { log } from '../../log.ts';
import { LOGIN_TTL_MS } from '../../access/sessions.ts';
import { authenticate, presentedKey, type Principal } from '../shared/auth.ts';
import type { AppEnv, Services } from '../shared/context.ts';
import { requestBody } from '../shared/requestBody.ts';
import { checkSameOrigin, originOf, sessionPrincipal, type SignIn } from '../shared/sessionAuth.ts';

/**
 * Single sign-on for the console, on Parseable's routes (docs/users.md "Single sign-on"):
 * `GET /api/v1/o/login?redirect=` starts an OpenID Connect sign-in (state, nonce and PKCE verifier kept
 * for this browser under a short-lived cookie), `GET /api/v1/o/code` is the redirect URI the provider
 * sends the browser back to (checked, exchanged, a session opened), `POST /api/v1/o/logout` ends it.
 * Registered before the key check: these routes are how a browser gets its credential.
 */

export const CODE_PATH = '/api/v1/o/code';
/** The sign-in under way: sent back only to these routes. */
const LOGIN_COOKIE = 'p_oidc_login';
const LOGIN_COOKIE_PATH = '/api/v1/o/';

/** Where to go once signed in or out: a path on this origin (400 for anything else: no open redirect). */
export function safeRedirect(value: string | undefined, origin: string): string {
  if (!value) return '/';
  if (/^\/(?![/\\])/.test(value)) return value;
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    // neither a path nor a URL
  }
  if (url?.origin !== origin) throw invalidInput(`invalid redirect: ${JSON.stringify(value)} is not on ${origin}`);
  return `${url.pathname}${url.search}${url.hash}`;
}

const redirectUri = (signIn: SignIn, c: Context<AppEnv>) => `${originOf(signIn, c.req.raw.headers)}${CODE_PATH}`;
const wantsJson = (c: Context<AppEnv>) => /application\/json/.test(c.req.header('accept') ?? '');

function sessionCookie(signIn: SignIn, c: Context<AppEnv>, token: string | undefined, maxAgeMs: number): void {
  const opts = { path: '/', httpOnly: true, secure: signIn.secure, sameSite: 'Lax' } as const;
  if (token === undefined) deleteCookie(c, signIn.cookieName, opts);
  else setCookie(c, signIn.cookieName, token, { ...opts, maxAge: Math.floor(maxAgeMs / 1000) });
}

/**
 * The principal of a request on the HTTP door: its API key when it presents one, else its session
 * cookie (and then, for a request that changes something, the same-origin check), else 401.
 */
export async function principalOf(services: Services, c: Context<AppEnv>): Promise<Principal> {
  const signIn = services.signIn;
  const token = signIn && presentedKey(c.req.raw.headers) === undefined ? getCookie(c, signIn.cookieName) : undefined;
  if (signIn && token) {
    const p = await sessionPrincipal(signIn, token);
    if (p) {
      checkSameOrigin(signIn, c.req.method, c.req.raw.headers);
      return p;
    }
  }
  return authenticate(services.keys, c.req.raw.headers, requestBody(c).peer);
}

export function registerOidcRoutes(app: Hono<AppEnv>, services: Services): void {
  const signIn = services.signIn;
  const need = () => {
    if (!signIn) throw notFound('single sign-on is not configured (P_OIDC_ISSUER)');
    return signIn;
  };

  // Public: the console's sign-in page shows its single sign-on button only when there is one.
  app.get('/api/v1/o/config', (c) => c.json({ sso: Boolean(signIn) }));

  app.get('/api/v1/o/login', async (c) => {
    const sso = need();
    const redirect = safeRedirect(c.req.query('redirect'), originOf(sso, c.req.raw.headers));
    c.header('Cache-Control', 'no-store');
    // Already signed in: straight back (Parseable does the same).
    const current = getCookie(c, sso.cookieName);
    if (current && (await sso.sessions.get(current))) return c.redirect(redirect, 303);
    const { url, tx } = await sso.oidc.begin(redirectUri(sso, c));
    const token = await sso.sessions.beginLogin({ ...tx, redirect });
    setCookie(c, LOGIN_COOKIE, token, { path: LOGIN_COOKIE_PATH, httpOnly: true, secure: sso.secure, sameSite: 'Lax', maxAge: LOGIN_TTL_MS / 1000 });
    return c.redirect(url.href, 302);
  });

  app.get(CODE_PATH, async (c) => {
    const sso = need();
    c.header('Cache-Control', 'no-store');
    const loginToken = getCookie(c, LOGIN_COOKIE);
    deleteCookie(c, LOGIN_COOKIE, { path: LOGIN_COOKIE_PATH, secure: sso.secure });
    // Taken once: a second callback with the same cookie (a replayed code) finds nothing.
    const tx = loginToken ? await sso.sessions.takeLogin(loginToken) : undefined;
    if (!tx) throw invalidInput('no sign-in under way in this browser (expired, already completed, or started in another browser): sign in again');
    const callback = new URL(redirectUri(sso, c));
    callback.search = new URL(c.req.url).search;
    const who = await sso.oidc.finish(callback, tx);
    const { token } = await sso.sessions.open(who);
    sessionCookie(sso, c, token, sso.sessions.ttlMs);
    log.info('signed in', { user: who.user, roles: who.roles });
    // Parseable's answer to a fetch (Accept: application/json); a browser's navigation goes back to the console.
    if (wantsJson(c)) return c.json({ username: who.user, user_id: who.sub, roles: who.roles });
    return c.redirect(tx.redirect, 303);
  });

  const logout = async (c: Context<AppEnv>) => {
    c.header('Cache-Control', 'no-store');
    const redirect = signIn ? safeRedirect(c.req.query('redirect'), originOf(signIn, c.req.raw.headers)) : '/';
    const token = signIn && getCookie(c, signIn.cookieName);
    if (signIn && token) {
      await signIn.sessions.end(token);
      sessionCookie(signIn, c, undefined, 0);
    }
    return wantsJson(c) || c.req.method === 'POST' ? c.json({ signedOut: true, redirect }) : c.redirect(redirect, 303);
  };
  // Ending a session changes state: POST, from this origin.
  app.post('/api/v1/o/logout', async (c) => {
    checkSameOrigin(signIn ?? services.config.sso, 'POST', c.req.raw.headers);
    return logout(c);
  });
  // Parseable's clients sign out with a GET navigation: honoured when the browser says it comes from this
  // origin or from the user (address bar, bookmark), never for a link or image on another site.
  app.get('/api/v1/o/logout', async (c) => {
    const site = c.req.header('sec-fetch-site');
    if (site !== 'same-origin' && site !== 'none') {
      c.header('Allow', 'POST');
      return c.json({ error: 'sign out with POST /api/v1/o/logout (a GET from another site may not end a session)' }, 405);
    }
    return logout(c);
  });
}
