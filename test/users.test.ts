import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError } from './helpers/assert.ts';
import { RawOtlpClient } from './helpers/otlpGrpc.ts';
import { PG_CLIENTS, psql, requireTool, startPgServer, type PgTestServer } from './helpers/pg.ts';
import { s3Env, startS3Server, type S3TestServer } from './helpers/s3server.ts';
import { ANY_PORT, query, startServer, tempDir, type TestServer } from './helpers/server.ts';
import { waitFor } from './helpers/wait.ts';
import { snapshotRows } from './helpers/iceberg.ts';

/**
 * Users and roles as Parseable's clients use them (docs/users.md). `pb` could not be built here (the Go
 * module proxy answers 403 for github.com/parseablehq/pb@v0.5.3), so its requests are replayed as its
 * public source sends them (cmd/user.go, cmd/role.go: `PUT user/{name}` without a body answering the
 * password as the body, `GET user` as a list of names, `GET user/{name}/role` as a flat privilege list,
 * `PUT role/{name}`, `GET role`). quest's RBAC tests' shape (tests/integration/rbac_test.go): create a
 * role, read it back equal, create a user with it, regenerate the password, check what each privilege
 * may do, delete the user, then the role. Then psql as a user, OTLP/gRPC with Basic metadata, the audit
 * dataset, the brute-force guard; and two workers on one S3 bucket seeing each other's changes.
 */
/** A SQL query as a user sends it; the rows, or throws with the status. */
async function queryAs(s: TestServer, sql: string, headers: Record<string, string>): Promise<Record<string, unknown>[]> {
  const res = await s.request('/api/v1/query', { method: 'POST', headers, json: { query: sql, startTime: '1970-01-01T00:00:00Z', endTime: '2100-01-01T00:00:00Z' } });
  if (res.status !== 200) throw new Error(`${res.status}: ${await res.text()}`);
  return (await res.json()) as Record<string, unknown>[];
}

const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

describe('users and roles on one worker', () => {
  let s: PgTestServer;
  const as = (user: string, password: string) => ({ authorization: basic(user, password) });

  beforeAll(async () => {
    s = await startPgServer({ P_OTLP_GRPC_ADDR: ANY_PORT, P_FLUSH_INTERVAL: '500ms', P_ICEBERG_INTERVAL: '1s', P_SIGNIN_MAX_USER_FAILURES: '4', P_SIGNIN_MAX_ADDRESS_FAILURES: '1000' });
    for (const ds of ['app', 'web']) expect((await s.request(`/api/v1/logstream/${ds}`, { method: 'PUT' })).status).toBe(200);
    expect((await s.request('/api/v1/ingest', { method: 'POST', headers: { 'x-p-stream': 'app' }, json: [{ msg: 'a1' }, { msg: 'a2' }] })).status).toBe(200);
    expect((await s.request('/api/v1/ingest', { method: 'POST', headers: { 'x-p-stream': 'web' }, json: [{ msg: 'w1' }] })).status).toBe(200);
  });
  afterAll(async () => {
    await s?.kill();
  });

  it("pb's requests: role add/list, user add (password as the body), user list with privileges, remove", async () => {
    const grant = [{ privilege: 'reader', resource: { stream: 'app' } }];
    expect((await s.request('/api/v1/role/pbreaders', { method: 'PUT', json: grant })).status).toBe(200);
    expect(await (await s.request('/api/v1/role')).json()).toContain('pbreaders');
    expect(await (await s.request('/api/v1/role/pbreaders')).json()).toEqual(grant);
    // `pb user add bob`: PUT, no body; the default role applies.
    expect((await s.request('/api/v1/role/default', { method: 'PUT', json: 'pbreaders' })).status).toBe(200);
    expect(await (await s.request('/api/v1/role/default')).json()).toBe('pbreaders');
    const added = await s.request('/api/v1/user/pbbob', { method: 'PUT' });
    expect(added.status).toBe(200);
    const password = await added.text();
    expect(password.length).toBeGreaterThanOrEqual(20);
    expect(await (await s.request('/api/v1/user')).json()).toContain('pbbob');
    expect(await (await s.request('/api/v1/user/pbbob/role')).json()).toEqual(grant);
    // The password is never in the log.
    expect(s.logs()).not.toContain(password);
    expect((await s.request('/api/v1/user/pbbob', { method: 'DELETE' })).status).toBe(200);
    expect(await (await s.request('/api/v1/user')).json()).not.toContain('pbbob');
  });

  it("quest's RBAC flow: each privilege may do what Parseable's does, and no more", async () => {
    const roles: [string, unknown[], { read: boolean; ingest: boolean; deleteDataset: boolean }][] = [
      ['q_ingestor', [{ privilege: 'ingestor', resource: { stream: 'app' } }], { read: false, ingest: true, deleteDataset: false }],
      ['q_reader', [{ privilege: 'reader', resource: { stream: 'app' } }], { read: true, ingest: false, deleteDataset: false }],
      ['q_writer', [{ privilege: 'writer', resource: { stream: 'app' } }], { read: true, ingest: true, deleteDataset: false }],
      ['q_editor', [{ privilege: 'editor' }], { read: true, ingest: true, deleteDataset: true }],
    ];
    for (const [role, body, may] of roles) {
      expect((await s.request(`/api/v1/role/${role}`, { method: 'PUT', json: body })).status).toBe(200);
      expect(await (await s.request(`/api/v1/role/${role}`)).json()).toEqual(body);
      const user = `${role}_user`;
      const created = await s.request(`/api/v1/user/${user}`, { method: 'POST', json: [role] });
      expect(created.status).toBe(200);
      await created.text();
      expect(await (await s.request(`/api/v1/user/${user}`)).json()).toMatchObject({ id: user, roles: { [role]: body } });
      const regen = await s.request(`/api/v1/user/${user}/generate-new-password`, { method: 'POST' });
      const password = await regen.text();
      const h = as(user, password);
      const read = await queryAs(s, 'SELECT count(*) AS n FROM app', h).catch(() => undefined);
      expect(read !== undefined, `${role} read`).toBe(may.read);
      const ingest = await s.request('/api/v1/ingest', { method: 'POST', headers: { ...h, 'x-p-stream': 'app' }, json: [{ msg: role }] });
      expect(ingest.status, `${role} ingest`).toBe(may.ingest ? 200 : 403);
      // No one but an editor (or admin) deletes; the editor deletes a dataset of its own making.
      if (may.deleteDataset) {
        expect((await s.request('/api/v1/logstream/editors_own', { method: 'PUT', headers: h })).status).toBe(200);
        expect((await s.request('/api/v1/logstream/editors_own', { method: 'DELETE', headers: h })).status).toBe(200);
      } else expect((await s.request('/api/v1/logstream/app', { method: 'DELETE', headers: h })).status).toBe(403);
      // Only admins manage users.
      expect((await s.request('/api/v1/user', { headers: h })).status).toBe(403);
      const who = (await (await s.request('/api/v1/whoami', { headers: h })).json()) as { user: string; roles: string[] };
      expect(who).toMatchObject({ user, roles: [role] });
      expect((await s.request(`/api/v1/user/${user}`, { method: 'DELETE' })).status).toBe(200);
      expect((await s.request('/api/v1/whoami', { headers: h })).status).toBe(401);
      expect((await s.request(`/api/v1/role/${role}`, { method: 'DELETE' })).status).toBe(200);
    }
  });

  it('refuses bad input with a clear 4xx and changes nothing', async () => {
    expect((await s.request('/api/v1/role/solo_admin', { method: 'PUT', json: [{ privilege: 'admin' }] })).status).toBe(200);
    const pw = await (await s.request('/api/v1/user/solo', { method: 'POST', json: ['solo_admin'] })).text();
    const before = await (await s.request('/api/v1/user')).json();
    const bad: [string, string, unknown, number, RegExp][] = [
      ['/api/v1/role/r1', 'PUT', [{ privilege: 'owner', resource: { stream: 'app' } }], 400, /privilege/],
      ['/api/v1/role/r1', 'PUT', [{ privilege: 'reader', resource: { stream: 'nope' } }], 400, /"nope" does not exist/],
      ['/api/v1/user/solo', 'POST', [], 409, /already exists/],
      ['/api/v1/user/newbie', 'POST', ['no_such_role'], 400, /does not exist/],
      ['/api/v1/role/solo_admin', 'DELETE', undefined, 409, /held by/],
    ];
    for (const [path, method, json, status, message] of bad) expect(await expectError(await s.request(path, { method, json }), status)).toMatch(message);
    // The last admin user deletes themself.
    expect(await expectError(await s.request('/api/v1/user/solo', { method: 'DELETE', headers: as('solo', pw) }), 409)).toMatch(/last admin/);
    expect(await (await s.request('/api/v1/user')).json()).toEqual(before);
    expect(await (await s.request('/api/v1/role')).json()).not.toContain('r1');
  });

  it('user-owned API keys: created once, act as the user, revoked at once', async () => {
    await s.request('/api/v1/role/keyrole', { method: 'PUT', json: [{ privilege: 'reader', resource: { stream: 'web' } }] });
    const pw = await (await s.request('/api/v1/user/keyuser', { method: 'POST', json: ['keyrole'] })).text();
    // The user makes their own key.
    const made = await s.request('/api/v1/user/keyuser/key', { method: 'POST', headers: as('keyuser', pw), json: { name: 'ci' } });
    expect(made.status).toBe(201);
    const { id, key } = (await made.json()) as { id: string; key: string };
    expect(await queryAs(s, 'SELECT msg FROM web', { 'x-api-key': key })).toEqual([{ msg: 'w1' }]);
    expect((await s.request('/api/v1/query', { method: 'POST', headers: { 'x-api-key': key }, json: { query: 'SELECT * FROM app', startTime: '1970-01-01T00:00:00Z', endTime: '2100-01-01T00:00:00Z' } })).status).toBe(403);
    expect(await (await s.request('/api/v1/user/keyuser/key')).json()).toEqual([expect.objectContaining({ id, name: 'ci' })]);
    expect((await s.request(`/api/v1/user/keyuser/key/${id}`, { method: 'DELETE' })).status).toBe(200);
    expect((await s.request('/api/v1/whoami', { headers: { 'x-api-key': key } })).status).toBe(401);
  });

  it('psql signs in as a user', async () => {
    await s.request('/api/v1/role/pgrole', { method: 'PUT', json: [{ privilege: 'reader', resource: { stream: 'app' } }] });
    const pw = await (await s.request('/api/v1/user/pguser', { method: 'POST', json: ['pgrole'] })).text();
    const out = await psql(s, 'SELECT count(*) FROM app', { password: pw, extra: ['-U', 'pguser', '-t', '-A'] });
    const expected = (await query(s, 'SELECT count(*) AS n FROM app'))[0].n;
    expect(Number(out.trim())).toBe(Number(expected));
    await expect(psql(s, 'SELECT count(*) FROM web', { password: pw, extra: ['-U', 'pguser'] })).rejects.toThrow(/web/);
    await expect(psql(s, 'SELECT 1', { password: 'wrong', extra: ['-U', 'pguser'] })).rejects.toThrow(/password authentication failed/);
  });

  it('psycopg: a role change applies to an open session at its next statement', async () => {
    await s.request('/api/v1/role/sessrole', { method: 'PUT', json: [{ privilege: 'reader', resource: { stream: 'app' } }] });
    await s.request('/api/v1/role/sessnone', { method: 'PUT', json: [] });
    const pw = await (await s.request('/api/v1/user/sessuser', { method: 'POST', json: ['sessrole'] })).text();
    const python = requireTool(path.join(PG_CLIENTS, 'venv/bin/python'), 'the Python venv with psycopg');
    const child = spawn(python, [path.join(import.meta.dirname, 'fixtures/pg/userSession.py'), String(s.pgPort), 'sessuser', pw, 'app'], { stdio: ['pipe', 'pipe', 'inherit'] });
    const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
    const expected = Number((await query(s, 'SELECT count(*) AS n FROM app'))[0].n);
    expect(JSON.parse((await lines.next()).value as string)).toEqual({ first: expected });
    expect((await s.request('/api/v1/user/sessuser/role', { method: 'PUT', json: ['sessnone'] })).status).toBe(200);
    child.stdin!.end('go\n');
    const second = JSON.parse((await lines.next()).value as string) as { error?: string };
    expect(second.error).toMatch(/app/);
    child.kill();
  });

  it("pyiceberg signs in to the Iceberg catalog as a user (client id and password) and sees the user's tables only", async () => {
    await s.request('/api/v1/role/lakerole', { method: 'PUT', json: [{ privilege: 'reader', resource: { stream: 'app' } }] });
    const pw = await (await s.request('/api/v1/user/lakeuser', { method: 'POST', json: ['lakerole'] })).text();
    const uri = `${s.url}/iceberg`;
    const expected = Number((await query(s, 'SELECT count(*) AS n FROM app'))[0].n);
    await expect.poll(async () => (await snapshotRows({ uri, key: pw, user: 'lakeuser', table: 'app' }).catch(() => [])).at(-1)?.[1], { timeout: 60_000, interval: 1000 }).toBe(expected);
    await expect(snapshotRows({ uri, key: pw, user: 'lakeuser', table: 'web' })).rejects.toThrow(/NoSuchTable/);
    await expect(snapshotRows({ uri, key: 'wrong', user: 'lakeuser', table: 'app' })).rejects.toThrow(/invalid/i);
  }, 120_000);

  it('OTLP/gRPC takes Basic user:password metadata', async () => {
    await s.request('/api/v1/role/grpcingest', { method: 'PUT', json: [{ privilege: 'writer', resource: { stream: '*' } }] });
    await s.request('/api/v1/role/grpcread', { method: 'PUT', json: [{ privilege: 'reader', resource: { stream: '*' } }] });
    await s.request('/api/v1/role/grpcread', { method: 'PUT', json: [{ privilege: 'reader', resource: { stream: '*' } }] });
    const ingestPw = await (await s.request('/api/v1/user/grpcin', { method: 'POST', json: ['grpcingest'] })).text();
    const readPw = await (await s.request('/api/v1/user/grpcreader', { method: 'POST', json: ['grpcread'] })).text();
    const client = new RawOtlpClient(`127.0.0.1:${s.grpcPort}`);
    try {
      // An empty ExportLogsServiceRequest: the answer is the sign-in's.
      expect((await client.call('logs', Buffer.alloc(0), { authorization: basic('grpcin', ingestPw) })).code).toBe(grpc.status.OK);
      // A reader may not ingest.
      expect((await client.call('logs', Buffer.alloc(0), { authorization: basic('grpcreader', readPw) })).code).toBe(grpc.status.PERMISSION_DENIED);
      expect((await client.call('logs', Buffer.alloc(0), { authorization: basic('grpcin', 'wrong') })).code).toBe(grpc.status.UNAUTHENTICATED);
    } finally {
      client.close();
    }
  });

  it('the shippers\' doors under HTTP (Elasticsearch bulk) take Basic user:password too', async () => {
    await s.request('/api/v1/role/shipper', { method: 'PUT', json: [{ privilege: 'writer', resource: { stream: '*' } }] });
    const pw = await (await s.request('/api/v1/user/shipperuser', { method: 'POST', json: ['shipper'] })).text();
    const bulk = (auth: string) =>
      s.request('/es/_bulk', { method: 'POST', headers: { authorization: auth, 'content-type': 'application/x-ndjson' }, body: '{"index":{"_index":"es_users"}}\n{"msg":"from a user"}\n' });
    const ok = await bulk(basic('shipperuser', pw));
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { errors: boolean }).errors).toBe(false);
    expect((await bulk(basic('shipperuser', 'wrong'))).status).toBe(401);
  });

  it('brute force: a user is locked after repeated failures (429, logged), even for the right password', async () => {
    await s.request('/api/v1/role/bfrole', { method: 'PUT', json: [{ privilege: 'reader', resource: { stream: 'app' } }] });
    const pw = await (await s.request('/api/v1/user/bfuser', { method: 'POST', json: ['bfrole'] })).text();
    for (let i = 0; i < 4; i++) expect((await s.request('/api/v1/whoami', { headers: as('bfuser', `guess${i}`) })).status).toBe(401);
    const locked = await s.request('/api/v1/whoami', { headers: as('bfuser', pw) });
    expect(locked.status).toBe(429);
    expect(Number(locked.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(s.logs()).toMatch(/sign-in locked after repeated failures.*bfuser/);
  });

  it('the audit dataset names who changed what, for admins only', async () => {
    await s.request('/api/v1/role/audrole', { method: 'PUT', json: [{ privilege: 'reader', resource: { stream: '*' } }] });
    const pw = await (await s.request('/api/v1/user/auduser', { method: 'POST', json: ['audrole'] })).text();
    const rows = await waitFor('audit rows', async () => {
      const r = await query(s, "SELECT action, target, name, \"actorKind\" FROM paudit WHERE name IN ('audrole', 'auduser') ORDER BY target").catch(() => []);
      return r.length === 2 ? r : undefined;
    });
    expect(rows).toEqual([
      { action: 'create', target: 'role', name: 'audrole', actorKind: 'admin-key' },
      { action: 'create', target: 'user', name: 'auduser', actorKind: 'admin-key' },
    ]);
    expect(s.logs()).toMatch(/"msg":"audit".*"name":"auduser"/);
    // A reader of every dataset still may not read the audit, nor may anyone but the service write it.
    expect((await s.request('/api/v1/query', { method: 'POST', headers: as('auduser', pw), json: { query: 'SELECT * FROM paudit', startTime: '1970-01-01T00:00:00Z', endTime: '2100-01-01T00:00:00Z' } })).status).toBe(403);
    expect((await s.request('/api/v1/ingest', { method: 'POST', headers: { 'x-p-stream': 'paudit' }, json: [{ actor: 'forged' }] })).status).toBe(403);
  });
});

describe('two workers on one S3 bucket', () => {
  let s3: S3TestServer;
  const workers: TestServer[] = [];
  beforeAll(async () => {
    s3 = await startS3Server();
    const env = { ...s3Env(s3), P_ACCESS_POLL: '500ms' };
    for (let i = 0; i < 2; i++) workers.push(await startServer({ dataDir: await tempDir(), env }));
  });
  afterAll(async () => {
    for (const w of workers) await w.kill();
    await s3?.close();
  });

  it("see each other's users and role changes within seconds, and both admins' concurrent changes", async () => {
    const [a, b] = workers;
    expect((await a.request('/api/v1/logstream/shared', { method: 'PUT' })).status).toBe(200);
    await a.request('/api/v1/role/none', { method: 'PUT', json: [] });
    expect((await a.request('/api/v1/role/r_shared', { method: 'PUT', json: [{ privilege: 'reader', resource: { stream: 'shared' } }] })).status).toBe(200);
    const pw = await (await a.request('/api/v1/user/carol', { method: 'POST', json: ['r_shared'] })).text();
    const whoOnB = () => b.request('/api/v1/whoami', { headers: { authorization: basic('carol', pw) } });
    await waitFor('carol on worker b', async () => (await whoOnB()).status === 200);
    // A role change on b applies on a without restart.
    expect((await b.request('/api/v1/user/carol/role', { method: 'PUT', json: ['none'] })).status).toBe(200);
    await expect.poll(async () => ((await (await a.request('/api/v1/whoami', { headers: { authorization: basic('carol', pw) } })).json()) as { roles: string[] }).roles, { timeout: 15_000 }).toEqual(['none']);
    // Two admins at once on two workers: both users exist afterwards (no lost update).
    const [x, y] = await Promise.all([a.request('/api/v1/user/dave', { method: 'POST', json: [] }), b.request('/api/v1/user/erin', { method: 'POST', json: [] })]);
    expect([x.status, y.status]).toEqual([200, 200]);
    await expect.poll(async () => ((await (await a.request('/api/v1/user')).json()) as string[]).filter((u) => ['dave', 'erin'].includes(u)).sort(), { timeout: 15_000 }).toEqual(['dave', 'erin']);
    // Deleted on a: refused on b within seconds.
    expect((await a.request('/api/v1/user/carol', { method: 'DELETE' })).status).toBe(200);
    await expect.poll(async () => (await whoOnB()).status, { timeout: 15_000 }).toBe(401);
  });

  it('survives a restart', async () => {
    const [a] = workers;
    const pw = await (await a.request('/api/v1/user/frank', { method: 'POST', json: ['none'] })).text();
    await a.stop();
    const again = await startServer({ dataDir: a.dataDir, env: a.env });
    workers[0] = again;
    expect((await again.request('/api/v1/whoami', { headers: { authorization: basic('frank', pw) } })).status).toBe(200);
  });
});
