import { Hono, type Context } from 'hono';
import { DomainError, isDomainError } from '../../errors.ts';
import { log } from '../../log.ts';
import { authenticate, canAccess, isListed, userToken } from '../shared/auth.ts';
import { requestBody } from '../shared/requestBody.ts';
import type { AppEnv, Services } from '../shared/context.ts';

/**
 * The read-only Iceberg REST catalog (Apache Iceberg's REST OpenAPI spec, docs/lake.md), mounted by the
 * HTTP door at `/iceberg`: one namespace (P_ICEBERG_NAMESPACE) whose tables are the datasets a key may
 * see. Keys come as `Authorization: Bearer <key>`, or are exchanged at the OAuth2 token endpoint
 * (client_credentials, the key as client secret) for a token that is the key itself. Every write
 * answers 403 in the spec's error model: the tables are written by the service's publisher only.
 */

type IcebergErrorType = 'NotAuthorizedException' | 'ForbiddenException' | 'NoSuchNamespaceException' | 'NoSuchTableException' | 'BadRequestException' | 'ServiceUnavailableException' | 'TooManyRequestsException';

/** The spec's ErrorModel: `{"error":{"message","type","code"}}`. */
export function icebergError(c: Context, code: 401 | 403 | 404 | 400 | 429 | 503, type: IcebergErrorType, message: string): Response {
  if (c.req.method === 'HEAD') return c.body(null, code);
  return c.json({ error: { message, type, code } }, code);
}

/** The object-store settings a reader needs to open the table's files (LoadTableResult.config). */
function storageConfig(services: Services): Record<string, string> {
  const { config } = services;
  if (config.storage !== 's3') return {};
  const endpoint = config.iceberg?.s3PublicEndpoint ?? config.s3.url;
  return { ...(endpoint ? { 's3.endpoint': endpoint } : {}), 's3.path-style-access': 'true', 's3.region': config.s3.region, 'client.region': config.s3.region };
}

export function createIcebergApp(services: Services): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  const namespace = services.config.iceberg?.namespace ?? 'lakehouse';

  app.onError((err, c) => {
    if (err instanceof DomainError && err.kind === 'not_found') return icebergError(c, 404, 'NoSuchTableException', err.message);
    if (err instanceof DomainError && err.kind === 'unavailable') return icebergError(c, 503, 'ServiceUnavailableException', err.message);
    log.error('iceberg catalog error', { path: c.req.path, error: err as Error });
    return c.json({ error: { message: 'internal server error', type: 'InternalServerError', code: 500 } }, 500);
  });

  // OAuth2 client_credentials (RFC 6749 §4.4): the client secret is an API key; the token is that key.
  app.post('/v1/oauth/tokens', async (c) => {
    const form = await c.req.parseBody().catch(() => ({}) as Record<string, unknown>);
    const basic = c.req.header('authorization');
    const pair = basic ? Buffer.from(basic.replace(/^Basic\s+/i, ''), 'base64').toString() : '';
    const secret = typeof form.client_secret === 'string' ? form.client_secret : pair.split(':').slice(1).join(':');
    const clientId = typeof form.client_id === 'string' ? form.client_id : pair.split(':')[0];
    if (form.grant_type !== 'client_credentials') return c.json({ error: 'unsupported_grant_type', error_description: 'only client_credentials is supported' }, 400);
    if (!secret) return c.json({ error: 'invalid_client', error_description: 'no client secret (an API key, or a user\'s password with the user as client id)' }, 401);
    try {
      const p = await services.keys.signIn({ user: clientId || undefined, secret }, requestBody(c).peer);
      // A key is its own token; a user's token carries the user and password (as Basic would) for the next requests.
      const token = p.user !== undefined && p.keyId === undefined && !services.keys.resolve(secret) ? userToken(clientId, secret) : secret;
      return c.json({ access_token: token, token_type: 'bearer', expires_in: 3600, issued_token_type: 'urn:ietf:params:oauth:token-type:access_token' });
    } catch (err) {
      return c.json({ error: 'invalid_client', error_description: (err as Error).message }, isDomainError(err) && err.kind === 'too_many_requests' ? 429 : 401);
    }
  });

  app.use('*', async (c, next) => {
    try {
      c.set('principal', await authenticate(services.keys, c.req.raw.headers, requestBody(c).peer));
    } catch (err) {
      if (isDomainError(err) && err.kind === 'too_many_requests') return icebergError(c, 429, 'TooManyRequestsException', err.message);
      return icebergError(c, 401, 'NotAuthorizedException', (err as Error).message);
    }
    // The catalog is read-only: every create, commit, drop, rename and register is refused.
    if (c.req.method !== 'GET' && c.req.method !== 'HEAD') return icebergError(c, 403, 'ForbiddenException', 'this catalog is read-only: tables are written by the lakehouse service itself');
    await next();
  });

  app.get('/v1/config', (c) => c.json({ defaults: {}, overrides: {} }));

  app.get('/v1/namespaces', (c) => c.json({ namespaces: c.req.query('parent') ? [] : [[namespace]] }));

  const checkNamespace = (c: Context<AppEnv>) => (c.req.param('ns') === namespace ? undefined : icebergError(c, 404, 'NoSuchNamespaceException', `namespace ${c.req.param('ns')} does not exist`));

  app.get('/v1/namespaces/:ns', (c) => checkNamespace(c) ?? c.json({ namespace: [namespace], properties: {} }));

  app.get('/v1/namespaces/:ns/tables', (c) => {
    const missing = checkNamespace(c);
    if (missing) return missing;
    const p = c.get('principal');
    const identifiers = services.storage
      .list()
      .filter((m) => isListed(p, m.name))
      .map((m) => ({ namespace: [namespace], name: m.name }));
    return c.json({ identifiers });
  });

  app.get('/v1/namespaces/:ns/tables/:table', async (c) => {
    const missing = checkNamespace(c);
    if (missing) return missing;
    const name = c.req.param('table');
    // A dataset the key may not see is answered like one that does not exist.
    const table = canAccess(c.get('principal'), name) ? await services.storage.icebergTable(name).catch(notFoundAsUndefined) : undefined;
    if (!table) return icebergError(c, 404, 'NoSuchTableException', `table ${namespace}.${name} does not exist`);
    if (c.req.method === 'HEAD') return c.body(null, 204);
    return c.json({ 'metadata-location': table.location, metadata: table.metadata, config: storageConfig(services) });
  });

  return app;
}

function notFoundAsUndefined(err: unknown): undefined {
  if (err instanceof DomainError && err.kind === 'not_found') return undefined;
  throw err;
}
