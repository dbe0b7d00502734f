import type { Grant } from './roles.ts';
import type { AccessState } from './state.ts';

/**
 * Which roles a user signed in through OpenID Connect gets: the values of one claim (P_OIDC_ROLE_CLAIM,
 * usually the provider's groups) mapped to role names (P_OIDC_ROLE_MAP), else the default role. Only
 * roles that exist count, so a claim can never invent a role.
 */

export interface RoleMapping {
  /** The claim's name, or a dotted path into it (`realm_access.roles`). */
  claim: string;
  /** Claim value → roles; undefined: a value naming an existing role is that role (Parseable's rule). */
  map?: ReadonlyMap<string, readonly string[]>;
  /** The role of a user none of whose values maps to an existing role; undefined: no role (refused). */
  defaultRole?: string;
}

/** `value=role,value=role…` (a value may be named more than once, for several roles); throws naming a bad item. */
export function parseRoleMap(spec: string): Map<string, string[]> | undefined {
  const items = spec
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (items.length === 0) return undefined;
  const map = new Map<string, string[]>();
  for (const item of items) {
    const eq = item.lastIndexOf('=');
    const value = item.slice(0, eq).trim();
    const role = item.slice(eq + 1).trim();
    if (eq <= 0 || !value || !role) throw new Error(`P_OIDC_ROLE_MAP: "${item}" is not value=role`);
    map.set(value, [...(map.get(value) ?? []), role]);
  }
  return map;
}

/**
 * The claim's values as strings: a string is one value, a list gives its strings. The name is looked up
 * as it is first (namespaced claims such as `https://example.com/groups` hold dots), then as a dotted path.
 */
export function claimValues(claims: Record<string, unknown>, claim: string): string[] {
  let value: unknown = claims[claim];
  if (value === undefined && claim.includes('.')) {
    value = claim.split('.').reduce<unknown>((v, part) => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>)[part] : undefined), claims);
  }
  if (typeof value === 'string') return [value];
  if (Array.isArray(value)) return value.filter((v): v is string => typeof v === 'string');
  return [];
}

/** The roles the claims give, among `existing` (sorted, each once); the default role when none does. */
export function rolesFor(claims: Record<string, unknown>, mapping: RoleMapping, existing: ReadonlySet<string>): string[] {
  const values = claimValues(claims, mapping.claim);
  const named = mapping.map ? values.flatMap((v) => mapping.map!.get(v) ?? []) : values;
  const roles = new Set(named.filter((r) => existing.has(r)));
  if (roles.size === 0 && mapping.defaultRole && existing.has(mapping.defaultRole)) roles.add(mapping.defaultRole);
  return [...roles].sort();
}

/**
 * Where role names resolve to their grants. The user and role store (issue 34's stored roles) is meant to
 * implement it; until it does, the built-in roles below answer. Resolved on every request, so a role
 * changed or removed applies to sessions already open.
 */
export interface RoleDirectory {
  names(): Promise<ReadonlySet<string>>;
  grants(role: string): Promise<readonly Grant[] | undefined>;
  /** The store's default role for new users (Parseable's), used when P_OIDC_DEFAULT_ROLE is not set. */
  defaultRole?(): string | undefined;
}

/** One role per Parseable privilege, over every dataset (a fresh service has no stored roles). */
export const BUILT_IN_ROLES: Readonly<Record<string, readonly Grant[]>> = {
  admin: [{ privilege: 'admin' }],
  editor: [{ privilege: 'editor' }],
  writer: [{ privilege: 'writer', resource: { stream: '*' } }],
  reader: [{ privilege: 'reader', resource: { stream: '*' } }],
  ingestor: [{ privilege: 'ingestor', resource: { stream: '*' } }],
};

export const builtInRoles: RoleDirectory = {
  names: () => Promise.resolve(new Set(Object.keys(BUILT_IN_ROLES))),
  grants: (role) => Promise.resolve(Object.hasOwn(BUILT_IN_ROLES, role) ? BUILT_IN_ROLES[role] : undefined),
};

/**
 * The roles of the user and role store (`PUT /api/v1/role/{name}`), as every worker holds them; a
 * built-in role answers for a name the store does not define.
 */
export function storedRoles(access: { readonly current: Pick<AccessState, 'roles' | 'defaultRole'> }): RoleDirectory {
  return {
    names: () => Promise.resolve(new Set([...Object.keys(BUILT_IN_ROLES), ...Object.keys(access.current.roles)])),
    grants: (role) => (Object.hasOwn(access.current.roles, role) ? Promise.resolve(access.current.roles[role]) : builtInRoles.grants(role)),
    defaultRole: () => access.current.defaultRole ?? undefined,
  };
}
