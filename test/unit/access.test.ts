import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import * as rules from '../../src/access/state.ts';
import { AccessStore } from '../../src/access/store.ts';
import { hashPassword } from '../../src/access/passwords.ts';
import { LocalObjectStore } from '../../src/storage/objects/objectStore.ts';
import { ApiKeys, authorize, canAccess, ingestRights, presentedCredentials, AUDIT_DATASET } from '../../src/doors/shared/auth.ts';
import { SignInLimits } from '../../src/doors/shared/signInLimits.ts';
import { DomainError } from '../../src/errors.ts';

/** The access rules (users, roles, last admin), the store's conditional versions, the one resolver and the sign-in guard. */

const kindOf = (fn: () => unknown): string | undefined => {
  try {
    fn();
  } catch (err) {
    return err instanceof DomainError ? err.kind : `not a DomainError: ${String(err)}`;
  }
  return undefined;
};

/** A state with roles `admin` (admin), `reader` (reader of app) and users alice (admin), bob (reader). */
function base(): rules.AccessState {
  let s = rules.emptyState();
  s = rules.putRole(s, 'admin', [{ privilege: 'admin' }]);
  s = rules.putRole(s, 'appreader', [{ privilege: 'reader', resource: { stream: 'app' } }]);
  s = rules.createUser(s, 'alice', ['admin'], 'h', 't');
  return rules.createUser(s, 'bob', ['appreader'], 'h', 't');
}

describe('access rules', () => {
  const cases: [string, (s: rules.AccessState) => unknown, string | undefined][] = [
    ['create an existing user', (s) => rules.createUser(s, 'bob', [], 'h', 't'), 'conflict'],
    ['create with a missing role', (s) => rules.createUser(s, 'carol', ['nope'], 'h', 't'), 'invalid'],
    ['create with a bad name', (s) => rules.createUser(s, 'a/b', [], 'h', 't'), 'invalid'],
    ['create carol', (s) => rules.createUser(s, 'carol', ['appreader'], 'h', 't'), undefined],
    ['delete a missing user', (s) => rules.deleteUser(s, 'zed', 'alice'), 'not_found'],
    ['the last admin deletes themself', (s) => rules.deleteUser(s, 'alice', 'alice'), 'conflict'],
    ['the last admin drops their admin role', (s) => rules.setUserRoles(s, 'alice', ['appreader'], 'alice'), 'conflict'],
    ['the last admin role loses admin', (s) => rules.putRole(s, 'admin', [{ privilege: 'reader' }], 'alice'), 'conflict'],
    ['an env key deletes the last admin user', (s) => rules.deleteUser(s, 'alice', undefined), undefined],
    ['an admin deletes bob', (s) => rules.deleteUser(s, 'bob', 'alice'), undefined],
    ['delete a role in use', (s) => rules.deleteRole(s, 'appreader'), 'conflict'],
    ['delete a missing role', (s) => rules.deleteRole(s, 'nope'), 'not_found'],
    ['set roles that do not exist', (s) => rules.setUserRoles(s, 'bob', ['nope'], 'alice'), 'invalid'],
    ['default role that does not exist', (s) => rules.setDefaultRole(s, 'nope'), 'not_found'],
    ['a role named default', (s) => rules.putRole(s, 'default', []), 'invalid'],
    ['revoke a key of someone else', (s) => rules.deleteKey(rules.addKey(s, 'k1', { digest: 'a'.repeat(64), user: 'bob', name: 'k', created: 't' }), 'alice', 'k1'), 'not_found'],
  ];
  it.each(cases)('%s', (_name, change, kind) => {
    const before = base();
    const snapshot = JSON.stringify(before);
    expect(kindOf(() => change(before))).toBe(kind);
    // Rules never change the state they are given: a refused change leaves nothing half-done.
    expect(JSON.stringify(before)).toBe(snapshot);
  });

  it('a new user without roles gets the default role; deleting a user takes their keys', () => {
    let s = rules.setDefaultRole(base(), 'appreader');
    s = rules.createUser(s, 'dan', [], 'h', 't');
    expect(s.users.dan.roles).toEqual(['appreader']);
    s = rules.addKey(s, 'k1', { digest: 'b'.repeat(64), user: 'dan', name: 'k', created: 't' });
    expect(Object.keys(rules.deleteUser(s, 'dan', 'alice').keys)).toEqual([]);
  });
});

describe('access store', () => {
  const dirs: string[] = [];
  const fresh = async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'access-'));
    dirs.push(dir);
    return new LocalObjectStore(dir);
  };
  afterAll(async () => {
    for (const d of dirs) await fs.rm(d, { recursive: true, force: true });
  });

  it('two writers on one store lose no update, and a third reads every change back', async () => {
    const store = await fresh();
    const a = new AccessStore(store, 60_000);
    const b = new AccessStore(store, 60_000);
    await Promise.all([a.reload(), b.reload()]);
    const names = Array.from({ length: 12 }, (_, i) => `u${i}`);
    // Interleaved: each writer holds a stale state for most of its changes, so most first writes lose a race.
    await Promise.all(names.map((n, i) => (i % 2 ? a : b).change((s) => ({ state: rules.createUser(s, n, [], 'h', 't'), result: undefined }))));
    const c = new AccessStore(store, 60_000);
    await c.reload();
    expect(Object.keys(c.current.users).sort()).toEqual([...names].sort());
    expect(c.version).toBe(names.length);
  });

  it('a rule refused on the newer state writes nothing', async () => {
    const store = await fresh();
    const a = new AccessStore(store, 60_000);
    const b = new AccessStore(store, 60_000);
    await a.change((s) => ({ state: rules.createUser(s, 'x', [], 'h', 't'), result: undefined }));
    // b has not seen x: its first write loses the race, and the rule, applied again, refuses.
    await expect(b.change((s) => ({ state: rules.createUser(s, 'x', [], 'h', 't'), result: undefined }))).rejects.toMatchObject({ kind: 'conflict' });
    expect((await store.list('.access/')).length).toBe(1);
  });

  it('rejects a damaged version on read (zod)', async () => {
    const store = await fresh();
    await store.putIfAbsent('.access/state-000000000001.json', JSON.stringify({ version: 1, users: { a: { passwordHash: 1 } } }));
    await expect(new AccessStore(store, 60_000).reload()).rejects.toThrow();
  });
});

describe('the one resolver', () => {
  it('signs in users by password, env keys and user keys; applies grants; refreshes on change', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'access-'));
    const access = new AccessStore(new LocalObjectStore(dir), 60_000);
    const keys = await ApiKeys.load('envkey:reader', dir);
    keys.useDirectory(access, new SignInLimits({ maxUserFailures: 3, maxAddressFailures: 100, windowMs: 60_000 }));
    const hash = await hashPassword('pw-bob');
    await access.change(() => ({ state: rules.setPassword(base(), 'bob', hash), result: undefined }));

    const bob = await keys.signIn({ user: 'bob', secret: 'pw-bob' });
    expect(bob.user).toBe('bob');
    expect(canAccess(bob, 'app')).toBe(true);
    expect(canAccess(bob, 'web')).toBe(false);
    expect(kindOf(() => authorize(bob, 'ingest', 'app'))).toBe('forbidden');
    expect(ingestRights(bob).ingest).toBe(false);
    const env = await keys.signIn({ user: 'whoever', secret: 'envkey' });
    expect(env.user).toBeUndefined();
    expect(canAccess(env, AUDIT_DATASET)).toBe(false);
    expect(ingestRights(env).except?.has(AUDIT_DATASET)).toBe(true);

    // Three failures lock bob (429) even for the right password, until the window passes.
    for (let i = 0; i < 3; i++) await expect(keys.signIn({ user: 'bob', secret: 'wrong' }, '10.0.0.1')).rejects.toMatchObject({ kind: 'unauthorized' });
    await expect(keys.signIn({ user: 'bob', secret: 'pw-bob' }, '10.0.0.2')).rejects.toMatchObject({ kind: 'too_many_requests' });

    await access.change((s) => ({ state: rules.setUserRoles(s, 'bob', ['admin']), result: undefined }));
    expect(keys.refresh(bob).role).toBe('admin');
    await access.change((s) => ({ state: rules.deleteUser(s, 'bob'), result: undefined }));
    expect(kindOf(() => keys.refresh(bob))).toBe('unauthorized');
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('a locked address refuses passwords and unknown keys, never a valid key', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'access-'));
    const access = new AccessStore(new LocalObjectStore(dir), 60_000);
    const keys = await ApiKeys.load('envkey:reader', dir);
    keys.useDirectory(access, new SignInLimits({ maxUserFailures: 100, maxAddressFailures: 2, windowMs: 60_000 }));
    for (let i = 0; i < 2; i++) await expect(keys.signIn({ secret: `guess${i}` }, '10.0.0.9')).rejects.toMatchObject({ kind: 'unauthorized' });
    await expect(keys.signIn({ secret: 'guess2' }, '10.0.0.9')).rejects.toMatchObject({ kind: 'too_many_requests' });
    expect((await keys.signIn({ user: 'x', secret: 'envkey' }, '10.0.0.9')).role).toBe('reader');
    await expect(keys.signIn({ secret: 'guess3' }, '10.0.0.10')).rejects.toMatchObject({ kind: 'unauthorized' });
    await fs.rm(dir, { recursive: true, force: true });
  });

  const creds: [string, Record<string, string>, ReturnType<typeof presentedCredentials>][] = [
    ['Basic user:password', { authorization: `Basic ${Buffer.from('bob:pw:x').toString('base64')}` }, { user: 'bob', secret: 'pw:x' }],
    ['Basic with an empty user (a key as password)', { authorization: `Basic ${Buffer.from(':k').toString('base64')}` }, { user: undefined, secret: 'k' }],
    ['Bearer key', { authorization: 'Bearer k' }, { secret: 'k' }],
    ['X-API-Key wins over Basic', { 'x-api-key': 'k', authorization: `Basic ${Buffer.from('bob:pw').toString('base64')}` }, { secret: 'k' }],
    ['Iceberg user token', { authorization: `Bearer u.${Buffer.from('bob:pw').toString('base64url')}` }, { user: 'bob', secret: 'pw' }],
    ['nothing', {}, undefined],
  ];
  it.each(creds)('credentials of %s', (_n, headers, expected) => {
    expect(presentedCredentials(new Headers(headers))).toEqual(expected);
  });
});

describe('sign-in limits', () => {
  it('locks a user and an address separately, for the window', () => {
    const l = new SignInLimits({ maxUserFailures: 2, maxAddressFailures: 3, windowMs: 1000 });
    l.fail('bob', 'a1', 0);
    l.fail('bob', 'a2', 10);
    expect(kindOf(() => l.check('bob', 'a3', 20))).toBe('too_many_requests');
    expect(kindOf(() => l.check('carol', 'a1', 20))).toBeUndefined();
    l.fail(undefined, 'a1', 30);
    l.fail(undefined, 'a1', 40);
    expect(kindOf(() => l.check(undefined, 'a1', 50))).toBe('too_many_requests');
    // The window passed: both free again.
    expect(kindOf(() => l.check('bob', 'a1', 1100))).toBeUndefined();
  });
});
