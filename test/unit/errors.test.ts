import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { DomainError, type ErrorKind } from '../../src/errors.ts';
import { createApp } from '../../src/doors/http/app.ts';
import { ApiKeys } from '../../src/doors/shared/auth.ts';
import { ConnectionBudget } from '../../src/doors/shared/connections.ts';
import type { Services } from '../../src/doors/shared/context.ts';
import { tempDir } from '../helpers/server.ts';

/**
 * The one error → status map, in-process through `app.request()`: whatever layer throws a domain
 * error, the client gets the status, headers and JSON body of its kind; anything else is a bare 500
 * that discloses nothing.
 */
describe('error map (app.request)', async () => {
  const dir = await tempDir('errormap-');
  const keys = await ApiKeys.load('k:admin', dir);
  let next: Error = new Error('unset');
  // Every storage call the dataset routes make fails with the error under test.
  // The store answers an empty listing (the filter routes list it at start-up).
  const storage = new Proxy({ store: { list: async () => [] } }, { get: (target, prop) => (prop === 'store' ? target.store : () => Promise.reject(next)) });
  const connections = new ConnectionBudget({ maxConnections: 64, headersTimeoutMs: 10_000 });
  const services = { config: loadConfig({ P_DATA_DIR: dir }), keys, connections, storage, isReady: async () => ({ ready: true }) } as unknown as Services;
  const app = createApp(services);
  const get = (path: string, headers: Record<string, string> = { 'X-API-Key': 'k' }) => app.request(path, { headers });

  const cases: [ErrorKind, number, Record<string, string>][] = [
    ['invalid', 400, {}],
    ['unauthorized', 401, { 'www-authenticate': 'Bearer' }],
    ['forbidden', 403, {}],
    ['not_found', 404, {}],
    ['timeout', 408, {}],
    ['conflict', 409, {}],
    ['too_large', 413, {}],
    ['unsupported', 415, {}],
    ['too_many_requests', 429, { 'retry-after': '3' }],
    ['storage', 500, {}],
    ['unavailable', 503, { 'retry-after': '3' }],
  ];
  it.each(cases)('%s → %i', async (kind, status, headers) => {
    next = new DomainError(kind, `the ${kind} message`, kind === 'too_many_requests' || kind === 'unavailable' ? 2.5 : undefined);
    const res = await get('/api/v1/logstream/some/stats');
    expect(res.status).toBe(status);
    expect(res.headers.get('content-type')).toContain('application/json');
    expect(await res.json()).toEqual({ error: `the ${kind} message` });
    for (const [h, v] of Object.entries(headers)) expect(res.headers.get(h)).toBe(v);
  });

  it('an unexpected error is a 500 that discloses nothing', async () => {
    next = new Error('ENOENT: /secret/path/of/the/data/dir');
    const res = await get('/api/v1/logstream/some/stats');
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({ error: 'internal server error' });
  });

  it('no key is 401 with WWW-Authenticate; an unknown route is a JSON 404', async () => {
    const none = await get('/api/v1/logstream/some/stats', {});
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toBe('Bearer');
    const missing = await get('/api/v1/nothing/here');
    expect(missing.status).toBe(404);
    expect((await missing.json()) as { error: string }).toEqual({ error: 'no route for GET /api/v1/nothing/here' });
  });

  it('a body that is not JSON is a 400 before any storage call', async () => {
    next = new Error('must not be reached');
    const res = await app.request('/api/v1/logstream/some/retention', { method: 'PUT', headers: { 'X-API-Key': 'k' }, body: '{nope' });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toMatch(/malformed JSON/);
  });
});
