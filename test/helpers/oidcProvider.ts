import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider from 'oidc-provider';

/**
 * A real OpenID provider in the test's own process: `oidc-provider` (the certified Node implementation)
 * with its development login and consent forms (any login name, any password). Each account's `groups`
 * claim comes from `groups`; it is released with the `groups` scope, and (as Okta does) only from the
 * userinfo endpoint, not in the ID token.
 *
 * The issuer listens on port 0 at once; the provider itself is built by `register`, once the redirect URI
 * is known (the service's port is only known after it started with this issuer).
 */
export interface TestProvider {
  issuer: string;
  clientId: string;
  clientSecret: string;
  register: (redirectUris: string[]) => void;
  close: () => Promise<void>;
}

export async function startOidcProvider(groups: Record<string, string[]>): Promise<TestProvider> {
  let handler: http.RequestListener | undefined;
  const server = http.createServer((req, res) => {
    if (handler) return handler(req, res);
    res.writeHead(503).end('provider not registered yet');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const clientId = 'lakehouse-console';
  const clientSecret = 'a-client-secret-for-tests-only-0123456789';
  return {
    issuer,
    clientId,
    clientSecret,
    register: (redirectUris) => {
      const provider = new Provider(issuer, {
        clients: [{ client_id: clientId, client_secret: clientSecret, redirect_uris: redirectUris, grant_types: ['authorization_code'], response_types: ['code'] }],
        claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'], groups: ['groups'] },
        findAccount: (_ctx, id) => ({
          accountId: id,
          claims: () => ({ sub: id, email: `${id}@example.com`, email_verified: true, name: id, groups: groups[id] ?? [] }),
        }),
        features: { devInteractions: { enabled: true } },
        cookies: { keys: ['a-cookie-key-for-tests-only'] },
        // Lifetimes set, so the provider does not print a notice for each default it falls back to.
        ttl: { Interaction: 600, Session: 3600, Grant: 3600, AccessToken: 600, IdToken: 600, AuthorizationCode: 60 },
        // PKCE (S256) is required of every client, as the service always sends it.
        pkce: { required: () => true },
      });
      handler = provider.callback();
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
