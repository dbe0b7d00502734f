import { createHash } from 'node:crypto';
import { forbidden } from '../../errors.ts';
import { OidcClient, type OidcSettings } from '../../access/oidc.ts';
import { builtInRoles, type RoleDirectory } from '../../access/roleMapping.ts';
import { SessionStore } from '../../access/sessions.ts';
import type { ObjectStore } from '../../storage/objects/objectStore.ts';
import { summaryRole, type Principal } from './auth.ts';

/**
 * Console sessions as a door sees them: the cookie, the origin a cookie-authenticated request must come
 * from, and the principal a session stands for (its roles resolved on every request, so a role changed
 * applies at once). Only the HTTP door takes the cookie: no other door serves a browser.
 */

export interface SignIn {
  oidc: OidcClient;
  sessions: SessionStore;
  roles: RoleDirectory;
  /** P_ORIGIN_URI's origin; undefined: each request's own (`http://{Host}`). */
  origin?: string;
  /** Whether cookies carry `Secure` (an https origin). */
  secure: boolean;
  /** `__Host-session` when Secure (pinned to this host and path /), else Parseable's `session`. */
  cookieName: string;
}

export interface SsoConfig {
  origin?: string;
  sessionTtlMs: number;
  oidc?: OidcSettings;
}

/** Sign-in for the console when single sign-on is configured; undefined otherwise. */
export function createSignIn(config: SsoConfig, store: ObjectStore, roles: RoleDirectory = builtInRoles): SignIn | undefined {
  if (!config.oidc) return undefined;
  const secure = config.origin?.startsWith('https:') ?? false;
  return {
    oidc: new OidcClient(config.oidc, roles),
    sessions: new SessionStore(store, config.sessionTtlMs),
    roles,
    origin: config.origin,
    secure,
    cookieName: secure ? '__Host-session' : 'session',
  };
}

/** The origin browsers reach this service at: P_ORIGIN_URI's, else the request's Host over http. */
export function originOf(signIn: Pick<SignIn, 'origin'>, headers: Headers): string {
  return signIn.origin ?? `http://${headers.get('host') ?? 'localhost'}`;
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * A request that changes something on the strength of a cookie must come from the console's own origin:
 * its `Origin` header (browsers send it with every non-GET request), else `Sec-Fetch-Site: same-origin`.
 * A page elsewhere cannot make the browser send either, so it cannot act with the user's session.
 */
export function checkSameOrigin(signIn: Pick<SignIn, 'origin'>, method: string, headers: Headers): void {
  if (SAFE_METHODS.has(method.toUpperCase())) return;
  const origin = headers.get('origin');
  const ok = origin ? origin === originOf(signIn, headers) : headers.get('sec-fetch-site') === 'same-origin';
  if (!ok) throw forbidden(`this request must come from ${originOf(signIn, headers)} (Origin: ${origin ?? 'none'}): a page elsewhere may not act with the console's session`);
}

/** A stable id for a signed-in user (their saved queries, per-user limits): the provider's issuer and subject. */
export const userPrincipalId = (issuer: string, sub: string) => createHash('sha256').update(`oidc:${issuer}\0${sub}`).digest('hex').slice(0, 16);

/** The principal of a session cookie, or undefined when it names no open session. */
export async function sessionPrincipal(signIn: SignIn, token: string): Promise<Principal | undefined> {
  const session = await signIn.sessions.get(token);
  if (!session) return undefined;
  const grants = (await Promise.all(session.roles.map((r) => signIn.roles.grants(r)))).flatMap((g) => g ?? []);
  return { id: userPrincipalId(session.issuer, session.sub), role: summaryRole(grants), user: session.user, roles: [...session.roles], grants: [...grants] };
}
