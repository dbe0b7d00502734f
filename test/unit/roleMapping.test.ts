import { describe, expect, it } from 'vitest';
import { BUILT_IN_ROLES, builtInRoles, claimValues, parseRoleMap, rolesFor, storedRoles, type RoleMapping } from '../../src/access/roleMapping.js';
import { actionsOf, authorize, canAccess, grantDatasets, ingestRights, summaryRole, type Principal } from '../../src/doors/shared/auth.js';
import { PRIVILEGE_ACTIONS, type Grant } from '../../src/access/roles.js';

const EXISTING = new Set(['admin', 'reader', 'writer', 'contractor']);

describe('parseRoleMap', () => {
  it.each([
    ['', undefined],
    [' , ', undefined],
    ['ops=admin', [['ops', ['admin']]]],
    ['ops=admin, dev = writer', [['ops', ['admin']], ['dev', ['writer']]]],
    // One value, several roles; a value holding "=" (a DN) keeps all but the last one.
    ['ops=admin,ops=reader', [['ops', ['admin', 'reader']]]],
    ['cn=ops,ou=groups=admin', [['cn', ['ops']], ['ou=groups', ['admin']]]],
  ])('%j', (spec, expected) => {
    const map = parseRoleMap(spec);
    expect(map && [...map]).toEqual(expected);
  });

  it.each(['ops', '=admin', 'ops=', 'ops=admin,bad'])('%j is refused, naming the item', (spec) => {
    expect(() => parseRoleMap(spec)).toThrow(/P_OIDC_ROLE_MAP: ".*" is not value=role/);
  });
});

describe('claimValues', () => {
  const claims = {
    groups: ['ops', 7, 'dev'],
    role: 'reader',
    'https://example.com/groups': ['namespaced'],
    realm_access: { roles: ['kc-admin'] },
    empty: null,
  };
  it.each([
    ['groups', ['ops', 'dev']],
    ['role', ['reader']],
    ['https://example.com/groups', ['namespaced']],
    ['realm_access.roles', ['kc-admin']],
    ['realm_access.missing', []],
    ['empty', []],
    ['absent', []],
  ])('%s → %j', (claim, expected) => {
    expect(claimValues(claims, claim)).toEqual(expected);
  });
});

describe('rolesFor', () => {
  const map = parseRoleMap('lakehouse-admins=admin,sre=writer,sre=reader,vendors=contractor,ghosts=missing-role');
  const cases: Array<[string, Record<string, unknown>, RoleMapping, string[]]> = [
    ['values naming roles (no map: Parseable\'s rule)', { groups: ['reader', 'unrelated'] }, { claim: 'groups' }, ['reader']],
    ['no map, nothing matches, no default', { groups: ['unrelated'] }, { claim: 'groups' }, []],
    ['no map, nothing matches, default', { groups: ['unrelated'] }, { claim: 'groups', defaultRole: 'reader' }, ['reader']],
    ['a default that does not exist gives nothing', { groups: [] }, { claim: 'groups', defaultRole: 'nope' }, []],
    ['mapped values', { groups: ['lakehouse-admins'] }, { claim: 'groups', map }, ['admin']],
    ['one value, several roles, sorted', { groups: ['sre'] }, { claim: 'groups', map }, ['reader', 'writer']],
    ['several values, roles once each', { groups: ['sre', 'lakehouse-admins', 'sre'] }, { claim: 'groups', map }, ['admin', 'reader', 'writer']],
    ['with a map, a value naming a role is not that role', { groups: ['admin'] }, { claim: 'groups', map }, []],
    ['a mapped role that does not exist is dropped', { groups: ['ghosts'] }, { claim: 'groups', map }, []],
    ['the default only when nothing maps', { groups: ['vendors'] }, { claim: 'groups', map, defaultRole: 'reader' }, ['contractor']],
    ['a string claim', { role: 'sre' }, { claim: 'role', map }, ['reader', 'writer']],
    ['a nested claim', { realm_access: { roles: ['lakehouse-admins'] } }, { claim: 'realm_access.roles', map }, ['admin']],
    ['no claim at all, default', {}, { claim: 'groups', map, defaultRole: 'reader' }, ['reader']],
  ];
  it.each(cases)('%s', (_name, claims, mapping, expected) => {
    expect(rolesFor(claims, mapping, EXISTING)).toEqual(expected);
  });
});

describe('a signed-in user\'s grants decide every check', () => {
  const user = (grants: Grant[]): Principal => ({ id: 'u', role: summaryRole(grants), user: 'ann@example.com', roles: ['r'], grants });
  const reader = user([...BUILT_IN_ROLES.reader]);
  const admin = user([...BUILT_IN_ROLES.admin]);
  const contractor = user([
    { privilege: 'reader', resource: { stream: 'app' } },
    { privilege: 'ingestor', resource: { stream: 'web' } },
  ]);

  it('the built-in roles are the privileges over every dataset', async () => {
    for (const [name, grants] of Object.entries(BUILT_IN_ROLES)) {
      expect(await builtInRoles.grants(name)).toBe(grants);
      expect(actionsOf(user([...grants])).sort()).toEqual([...PRIVILEGE_ACTIONS[grants[0].privilege]].sort());
    }
    expect(await builtInRoles.grants('toString')).toBeUndefined();
  });

  it.each([
    ['reader reads anything', reader, 'read', 'app', true],
    ['reader may not ingest', reader, 'ingest', 'app', false],
    ['reader may not delete', reader, 'delete', undefined, false],
    ['admin administers', admin, 'admin', 'app', true],
    ['contractor reads app', contractor, 'read', 'app', true],
    ['contractor may not read web', contractor, 'read', 'web', false],
    ['contractor ingests into web', contractor, 'ingest', 'web', true],
    ['contractor may not ingest into app', contractor, 'ingest', 'app', false],
  ] as const)('%s', (_n, p, action, dataset, allowed) => {
    const attempt = () => authorize(p, action, dataset);
    if (allowed) expect(attempt).not.toThrow();
    else expect(attempt).toThrow(/user "ann@example.com" may not/);
  });

  it('summaries: role, datasets, ingest rights', () => {
    expect([reader.role, admin.role, contractor.role]).toEqual(['reader', 'admin', 'reader']);
    expect(summaryRole([...BUILT_IN_ROLES.ingestor])).toBe('writer');
    expect(grantDatasets(contractor.grants!)).toEqual(new Set(['app', 'web']));
    expect(grantDatasets(reader.grants!)).toBeUndefined();
    expect([canAccess(contractor, 'app'), canAccess(contractor, 'other'), canAccess(reader, 'other')]).toEqual([true, false, true]);
    expect(ingestRights(contractor)).toMatchObject({ key: 'u', ingest: true, create: false, datasets: new Set(['web']) });
    // An ingest-only grant does not read.
    expect(canAccess(contractor, 'web')).toBe(false);
  });
});

describe('storedRoles: the user and role store\'s roles, the built-in ones for other names', () => {
  const contractor: Grant[] = [{ privilege: 'reader', resource: { stream: 'app' } }];
  const narrowReader: Grant[] = [{ privilege: 'reader', resource: { stream: 'web' } }];
  const access = { current: { roles: { contractor, reader: narrowReader }, defaultRole: 'contractor' as string | null } };
  const dir = storedRoles(access);

  it('names both, a stored role shadows a built-in one, the default role is the store\'s', async () => {
    expect([...(await dir.names())].sort()).toEqual(['admin', 'contractor', 'editor', 'ingestor', 'reader', 'writer']);
    expect(await dir.grants('contractor')).toBe(contractor);
    expect(await dir.grants('reader')).toBe(narrowReader);
    expect(await dir.grants('admin')).toBe(BUILT_IN_ROLES.admin);
    expect(await dir.grants('nope')).toBeUndefined();
    expect(dir.defaultRole?.()).toBe('contractor');
  });

  it('follows the store: a role deleted there is gone at once', async () => {
    const live = { current: { roles: { contractor } as Record<string, Grant[]>, defaultRole: null as string | null } };
    const d = storedRoles(live);
    expect(await d.grants('contractor')).toBe(contractor);
    live.current = { roles: {}, defaultRole: null };
    expect(await d.grants('contractor')).toBeUndefined();
    expect(d.defaultRole?.()).toBeUndefined();
  });
});
