import type * as OpenId from 'openid-client';
import { forbidden, unauthorized } from '../errors.ts';
import { log } from '../log.ts';
import { parseRoleMap, rolesFor, type RoleDirectory, type RoleMapping } from './roleMapping.ts';
import type { LoginTransaction, StoredSession } from './sessions.ts';

/**
 * OpenID Connect sign-in with the authorization code flow and PKCE (S256), through `openid-client`:
 * discovery, the authorization URL, the code exchange and the ID token's checks (issuer, audience,
 * signature, expiry, the state and the nonce of this browser's sign-in, the PKCE verifier), then the
 * userinfo endpoint when the ID token lacks the role claim (Okta and oidc-provider send groups there).
 */

export interface OidcSettings {
  issuer: string;
  clientId: string;
  clientSecret?: string;
  scope: string;
  roleClaim: string;
  roleMap: string;
  defaultRole?: string;
}

/** A user's sign-in as the session keeps it. */
export type SignedIn = Omit<StoredSession, 'v' | 'createdAt' | 'expiresAt'>;

/**
 * openid-client (and jose beneath it, ~6 MB of an idle process) is loaded on the first sign-in, not at
 * start: most services run without single sign-on, and one with it pays the load once (docs/memory.md).
 */
let loaded: Promise<typeof OpenId> | undefined;
const openid = (): Promise<typeof OpenId> => (loaded ??= import('openid-client'));

/** The name shown for a user: the first of these claims the provider sends. */
const NAME_CLAIMS = ['email', 'preferred_username', 'name', 'sub'] as const;

/**
 * What went wrong, in words: openid-client's message, the check that failed beneath it (its cause: the
 * state, the nonce claim…), and the provider's own error code and description (`invalid_grant`).
 */
export function reason(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const e = err as Error & { error?: unknown; error_description?: unknown };
  const provider = typeof e.error === 'string' ? ` (${e.error}${typeof e.error_description === 'string' ? `: ${e.error_description}` : ''})` : '';
  const cause = err.cause instanceof Error && err.cause.message !== err.message ? `: ${reason(err.cause)}` : '';
  return `${err.message}${provider}${cause}`;
}

export class OidcClient {
  private configuration?: Promise<OpenId.Configuration>;
  readonly mapping: RoleMapping;

  constructor(
    private readonly settings: OidcSettings,
    private readonly roles: RoleDirectory,
  ) {
    this.mapping = { claim: settings.roleClaim, map: parseRoleMap(settings.roleMap), defaultRole: settings.defaultRole };
    if (new URL(settings.issuer).protocol === 'http:') log.warn('P_OIDC_ISSUER is plain http: the provider is trusted without TLS (a local try-out only)', { issuer: settings.issuer });
  }

  /** Discovery, on first use and again after a failure (a provider down at start-up does not stop the service). */
  private config(): Promise<OpenId.Configuration> {
    this.configuration ??= (async () => {
      const client = await openid();
      const { issuer, clientId, clientSecret } = this.settings;
      const auth = clientSecret ? client.ClientSecretBasic(clientSecret) : client.None();
      const insecure = new URL(issuer).protocol === 'http:' ? [client.allowInsecureRequests] : [];
      return client.discovery(new URL(issuer), clientId, undefined, auth, { execute: insecure, timeout: 10 });
    })();
    this.configuration.catch((err: unknown) => {
      log.warn('OpenID provider discovery failed', { issuer: this.settings.issuer, error: err });
      this.configuration = undefined;
    });
    return this.configuration;
  }

  /** A new sign-in's secrets and the provider URL to send the browser to. */
  async begin(redirectUri: string): Promise<{ url: URL; tx: Omit<LoginTransaction, 'redirect' | 'expiresAt'> }> {
    const config = await this.config();
    const client = await openid();
    const tx = { state: client.randomState(), nonce: client.randomNonce(), codeVerifier: client.randomPKCECodeVerifier() };
    const scope = this.settings.scope.split(/\s+/).includes('openid') ? this.settings.scope : `openid ${this.settings.scope}`;
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: redirectUri,
      scope,
      state: tx.state,
      nonce: tx.nonce,
      code_challenge: await client.calculatePKCECodeChallenge(tx.codeVerifier),
      code_challenge_method: 'S256',
    });
    return { url, tx };
  }

  /**
   * The provider's answer at the redirect URI (`callback`: that URI with the query the browser brought)
   * checked against this browser's sign-in, the code exchanged, and the user's roles mapped. Any failed
   * check is `unauthorized`; a user whom no role fits is `forbidden`.
   */
  async finish(callback: URL, tx: LoginTransaction): Promise<SignedIn> {
    const config = await this.config();
    const client = await openid();
    let claims: Record<string, unknown>;
    try {
      const tokens = await client.authorizationCodeGrant(config, callback, { pkceCodeVerifier: tx.codeVerifier, expectedState: tx.state, expectedNonce: tx.nonce, idTokenExpected: true });
      claims = { ...tokens.claims() };
      if (claims[this.settings.roleClaim] === undefined && config.serverMetadata().userinfo_endpoint) {
        const info = await client.fetchUserInfo(config, tokens.access_token, String(claims.sub));
        claims = { ...info, ...claims };
      }
    } catch (err) {
      const why = reason(err);
      log.warn('OpenID sign-in refused', { reason: why });
      throw unauthorized(`sign-in refused: ${why}`);
    }
    const sub = String(claims.sub);
    const user = NAME_CLAIMS.map((c) => claims[c]).find((v): v is string => typeof v === 'string' && v !== '') ?? sub;
    const mapping = { ...this.mapping, defaultRole: this.mapping.defaultRole ?? this.roles.defaultRole?.() };
    const roles = rolesFor(claims, mapping, await this.roles.names());
    if (roles.length === 0) throw forbidden(`${user} has no role here: none of the values of the "${this.mapping.claim}" claim maps to a role, and there is no default role (P_OIDC_ROLE_MAP, P_OIDC_DEFAULT_ROLE)`);
    return { user, sub, issuer: config.serverMetadata().issuer, roles };
  }
}
