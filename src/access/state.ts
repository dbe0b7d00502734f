import { z } from 'zod';
import { conflict, invalidInput, notFound } from '../errors.ts';
import { allows, roleBodySchema, type Grant } from './roles.ts';

/**
 * The access state (issue 34): roles, the default role, users and user-owned API keys, as one JSON
 * document in the bucket (store.ts writes each version with one conditional write). The rules of every
 * change are pure functions here: each takes the state and returns the next, or throws one clear 4xx
 * before anything is written, so a refused change leaves nothing half-done.
 */
const userSchema = z
  .object({
    /** scrypt hash (passwords.ts); never the password. */
    passwordHash: z.string().min(1),
    roles: z.array(z.string()),
    created: z.string(),
  })
  .strict();
const keySchema = z
  .object({
    /** sha256 of the key, hex: the key itself is answered once and never stored. */
    digest: z.string().regex(/^[0-9a-f]{64}$/),
    user: z.string(),
    name: z.string(),
    created: z.string(),
  })
  .strict();
export const accessStateSchema = z
  .object({
    version: z.literal(1),
    roles: z.record(z.string(), roleBodySchema),
    defaultRole: z.string().nullable(),
    users: z.record(z.string(), userSchema),
    /** User-owned API keys by their public id. */
    keys: z.record(z.string(), keySchema),
  })
  .strict();
export type AccessState = z.infer<typeof accessStateSchema>;
export type StoredUser = z.infer<typeof userSchema>;
export type StoredKey = z.infer<typeof keySchema>;

export const emptyState = (): AccessState => ({ version: 1, roles: {}, defaultRole: null, users: {}, keys: {} });

/** User and role names: what fits a URL path segment, a PostgreSQL user name and a log line unquoted. */
const NAME = /^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$/;
export function checkName(kind: 'user' | 'role', name: string): void {
  if (!NAME.test(name)) throw invalidInput(`invalid ${kind} name ${JSON.stringify(name)}: 1-64 letters, digits, '_', '.', '@' or '-', starting with a letter or digit`);
  if (kind === 'role' && name === 'default') throw invalidInput('"default" names the default role setting, not a role');
}

const own = <T>(rec: Record<string, T>, key: string): T | undefined => (Object.hasOwn(rec, key) ? rec[key] : undefined);

export function getUser(s: AccessState, name: string): StoredUser {
  const u = own(s.users, name);
  if (!u) throw notFound(`user ${JSON.stringify(name)} does not exist`);
  return u;
}

export function getRole(s: AccessState, name: string): Grant[] {
  const r = own(s.roles, name);
  if (!r) throw notFound(`role ${JSON.stringify(name)} does not exist`);
  return r;
}

/** Every grant of a user's roles (a role deleted meanwhile grants nothing). */
export const grantsOf = (s: AccessState, user: StoredUser): Grant[] => user.roles.flatMap((r) => own(s.roles, r) ?? []);

const isAdmin = (s: AccessState, user: StoredUser) => allows(grantsOf(s, user), 'admin');

/**
 * A change that takes admin away from the acting user when no other user is admin would lock the
 * store's users out of managing themselves: refused (the env keys and P_USERNAME still are admin, but a
 * user must not do that to themselves by accident).
 */
function keepAnAdmin(next: AccessState, before: AccessState, actor: string | undefined): void {
  const hadAdmin = Object.values(before.users).some((u) => isAdmin(before, u));
  const wasActorAdmin = actor !== undefined && own(before.users, actor) !== undefined && isAdmin(before, before.users[actor]);
  if (!hadAdmin || !wasActorAdmin) return;
  if (!Object.values(next.users).some((u) => isAdmin(next, u))) throw conflict(`user ${JSON.stringify(actor)} is the last admin: this change would leave no admin user`);
}

function checkRolesExist(s: AccessState, roles: readonly string[]): void {
  const missing = roles.filter((r) => own(s.roles, r) === undefined);
  if (missing.length) throw invalidInput(`role${missing.length > 1 ? 's' : ''} ${missing.map((r) => JSON.stringify(r)).join(', ')} do${missing.length > 1 ? '' : 'es'} not exist`);
}

export function putRole(s: AccessState, name: string, grants: Grant[], actor?: string): AccessState {
  checkName('role', name);
  const next = { ...s, roles: { ...s.roles, [name]: grants } };
  keepAnAdmin(next, s, actor);
  return next;
}

export function deleteRole(s: AccessState, name: string): AccessState {
  getRole(s, name);
  const holders = Object.keys(s.users).filter((u) => s.users[u].roles.includes(name));
  if (holders.length) throw conflict(`role ${JSON.stringify(name)} is held by ${holders.map((u) => JSON.stringify(u)).join(', ')}: take it from them first`);
  if (s.defaultRole === name) throw conflict(`role ${JSON.stringify(name)} is the default role: set another default first`);
  const roles = { ...s.roles };
  delete roles[name];
  return { ...s, roles };
}

export function setDefaultRole(s: AccessState, name: string): AccessState {
  getRole(s, name);
  return { ...s, defaultRole: name };
}

/** A new user with `roles` (the default role when none are named and one is set). */
export function createUser(s: AccessState, name: string, roles: string[], passwordHash: string, now: string): AccessState {
  checkName('user', name);
  if (own(s.users, name)) throw conflict(`user ${JSON.stringify(name)} already exists`);
  const given = roles.length === 0 && s.defaultRole ? [s.defaultRole] : [...new Set(roles)];
  checkRolesExist(s, given);
  return { ...s, users: { ...s.users, [name]: { passwordHash, roles: given, created: now } } };
}

/** Deletes the user and every API key they own. */
export function deleteUser(s: AccessState, name: string, actor?: string): AccessState {
  getUser(s, name);
  const users = { ...s.users };
  delete users[name];
  const keys = Object.fromEntries(Object.entries(s.keys).filter(([, k]) => k.user !== name));
  const next = { ...s, users, keys };
  keepAnAdmin(next, s, actor);
  return next;
}

export function setUserRoles(s: AccessState, name: string, roles: string[], actor?: string): AccessState {
  const user = getUser(s, name);
  const unique = [...new Set(roles)];
  checkRolesExist(s, unique);
  const next = { ...s, users: { ...s.users, [name]: { ...user, roles: unique } } };
  keepAnAdmin(next, s, actor);
  return next;
}

export function setPassword(s: AccessState, name: string, passwordHash: string): AccessState {
  const user = getUser(s, name);
  return { ...s, users: { ...s.users, [name]: { ...user, passwordHash } } };
}

export function addKey(s: AccessState, id: string, key: StoredKey): AccessState {
  getUser(s, key.user);
  if (own(s.keys, id)) throw conflict(`key ${id} already exists`);
  return { ...s, keys: { ...s.keys, [id]: key } };
}

export function deleteKey(s: AccessState, user: string, id: string): AccessState {
  const key = own(s.keys, id);
  if (!key || key.user !== user) throw notFound(`user ${JSON.stringify(user)} has no key ${JSON.stringify(id)}`);
  const keys = { ...s.keys };
  delete keys[id];
  return { ...s, keys };
}
