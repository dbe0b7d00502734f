import { createHash, randomBytes } from 'node:crypto';
import type { Context, Hono } from 'hono';
import { z } from 'zod';
import { forbidden, invalidInput } from '../../errors.ts';
import { generatePassword, hashPassword } from '../../access/passwords.ts';
import { parseRole, type Grant } from '../../access/roles.ts';
import * as rules from '../../access/state.ts';
import type { AppEnv, Services } from '../shared/context.ts';
import type { Principal } from '../shared/auth.ts';
import { parseJson, readBody } from './body.ts';
import { formatIssues, requires } from './middleware.ts';

/**
 * Parseable's user and role API (issue 34; paths, bodies and answers as Parseable and its `pb` CLI use
 * them — docs/users.md): roles, the default role, users with generated passwords, and user-owned API
 * keys. Each change is one conditional write of the access state (src/access/store.ts) and one audit
 * event; a refused change writes nothing.
 */

/** Small bodies only: a role list or a few grants. */
const MAX_BODY = 64 * 1024;
const roleNames = z.array(z.string());
const keyBody = z.object({ name: z.string().max(128).optional() }).strict();

/** The JSON body, or `fallback` when there is none (pb sends no body for a role with no privilege, or a user). */
async function optionalJson<S extends z.ZodType>(c: Context, schema: S, fallback: z.infer<S>): Promise<z.infer<S>> {
  const raw = await readBody(c, MAX_BODY);
  if (raw.byteLength === 0 || raw.toString('utf8').trim() === '') return fallback;
  const parsed = schema.safeParse(parseJson(raw));
  if (!parsed.success) throw invalidInput(formatIssues(parsed.error));
  return parsed.data;
}

const actorName = (p: Principal) => p.user;

/** The user themself (a user's own keys) or an admin. */
function selfOrAdmin(p: Principal, name: string): void {
  if (p.user === name) return;
  if (p.grants ? !p.grants.some((g) => g.privilege === 'admin') : p.role !== 'admin') throw forbidden('only an admin or the user themself may manage these keys');
}

function registerRoleRoutes(app: Hono<AppEnv>, { access, audit, storage }: Services): void {
  app.get('/api/v1/role', requires('admin'), (c) => c.json(Object.keys(access.current.roles).sort()));
  app.get('/api/v1/role/default', requires('admin'), (c) => c.json(access.current.defaultRole));
  app.put('/api/v1/role/default', requires('admin'), async (c) => {
    const name = await optionalJson(c, z.string(), '');
    await access.change((s) => ({ state: rules.setDefaultRole(s, name), result: undefined }));
    await audit.record(c.get('principal'), { action: 'update', target: 'default-role', name });
    return c.json(name);
  });
  app.get('/api/v1/role/:name', requires('admin'), (c) => c.json(rules.getRole(access.current, c.req.param('name'))));
  app.put('/api/v1/role/:name', requires('admin'), async (c) => {
    const name = c.req.param('name');
    const body: unknown = await optionalJson(c, z.unknown(), []);
    const grants = parseRole(body, (ds) => storage.find(ds) !== undefined);
    const existed = await access.change((s) => ({ state: rules.putRole(s, name, grants, actorName(c.get('principal'))), result: Object.hasOwn(s.roles, name) }));
    await audit.record(c.get('principal'), { action: existed ? 'update' : 'create', target: 'role', name, detail: { grants } });
    return c.text(`role ${name} ${existed ? 'updated' : 'created'}`);
  });
  app.delete('/api/v1/role/:name', requires('admin'), async (c) => {
    const name = c.req.param('name');
    await access.change((s) => ({ state: rules.deleteRole(s, name), result: undefined }));
    await audit.record(c.get('principal'), { action: 'delete', target: 'role', name });
    return c.text(`role ${name} deleted`);
  });
}

/** A user as `GET /api/v1/user/{name}` answers: Parseable's id, method and roles (each with its privileges). */
function userView(s: rules.AccessState, name: string) {
  const user = rules.getUser(s, name);
  const roles: Record<string, Grant[]> = {};
  for (const r of user.roles) roles[r] = Object.hasOwn(s.roles, r) ? s.roles[r] : [];
  return { id: name, method: 'native', roles, created: user.created };
}

function registerUserRoutes(app: Hono<AppEnv>, { access, audit }: Services): void {
  app.get('/api/v1/user', requires('admin'), (c) => c.json(Object.keys(access.current.users).sort()));
  app.get('/api/v1/user/:name', requires('admin'), (c) => c.json(userView(access.current, c.req.param('name'))));
  // pb reads a user's privileges as one flat list (`pb user list`).
  app.get('/api/v1/user/:name/role', requires('admin'), (c) => c.json(rules.grantsOf(access.current, rules.getUser(access.current, c.req.param('name')))));
  const create = async (c: Context<AppEnv>) => {
    const name = c.req.param('name')!;
    const roles = await optionalJson(c, roleNames, []);
    const password = generatePassword();
    const hash = await hashPassword(password);
    const given = await access.change((s) => {
      const state = rules.createUser(s, name, roles, hash, new Date().toISOString());
      return { state, result: state.users[name].roles };
    });
    await audit.record(c.get('principal'), { action: 'create', target: 'user', name, detail: { roles: given } });
    // The one time the password is shown: as Parseable answers it, the body is the password itself.
    return c.text(password);
  };
  app.post('/api/v1/user/:name', requires('admin'), create);
  app.put('/api/v1/user/:name', requires('admin'), create);
  app.delete('/api/v1/user/:name', requires('admin'), async (c) => {
    const name = c.req.param('name');
    await access.change((s) => ({ state: rules.deleteUser(s, name, actorName(c.get('principal'))), result: undefined }));
    await audit.record(c.get('principal'), { action: 'delete', target: 'user', name });
    return c.text(`deleted user: ${name}`);
  });
  app.put('/api/v1/user/:name/role', requires('admin'), async (c) => {
    const name = c.req.param('name');
    const roles = await optionalJson(c, roleNames, []);
    await access.change((s) => ({ state: rules.setUserRoles(s, name, roles, actorName(c.get('principal'))), result: undefined }));
    await audit.record(c.get('principal'), { action: 'update', target: 'user', name, detail: { roles } });
    return c.text(`roles of ${name} set`);
  });
  app.post('/api/v1/user/:name/generate-new-password', requires('admin'), async (c) => {
    const name = c.req.param('name');
    const password = generatePassword();
    const hash = await hashPassword(password);
    await access.change((s) => ({ state: rules.setPassword(s, name, hash), result: undefined }));
    await audit.record(c.get('principal'), { action: 'update', target: 'password', name });
    return c.text(password);
  });
}

/** User-owned API keys: the key is answered once; only its sha256 is stored. */
function registerKeyRoutes(app: Hono<AppEnv>, { access, audit }: Services): void {
  app.get('/api/v1/user/:name/key', (c) => {
    const name = c.req.param('name');
    selfOrAdmin(c.get('principal'), name);
    rules.getUser(access.current, name);
    const keys = Object.entries(access.current.keys).filter(([, k]) => k.user === name);
    return c.json(keys.map(([id, k]) => ({ id, name: k.name, created: k.created })));
  });
  app.post('/api/v1/user/:name/key', async (c) => {
    const name = c.req.param('name');
    selfOrAdmin(c.get('principal'), name);
    const body = await optionalJson(c, keyBody, {});
    const id = `k_${randomBytes(6).toString('hex')}`;
    const key = `pk_${randomBytes(24).toString('base64url')}`;
    const digest = createHash('sha256').update(key).digest('hex');
    const entry = { digest, user: name, name: body.name ?? id, created: new Date().toISOString() };
    await access.change((s) => ({ state: rules.addKey(s, id, entry), result: undefined }));
    await audit.record(c.get('principal'), { action: 'create', target: 'key', name: id, detail: { user: name, keyName: entry.name } });
    return c.json({ id, name: entry.name, key }, 201);
  });
  app.delete('/api/v1/user/:name/key/:id', async (c) => {
    const name = c.req.param('name');
    const id = c.req.param('id');
    selfOrAdmin(c.get('principal'), name);
    await access.change((s) => ({ state: rules.deleteKey(s, name, id), result: undefined }));
    await audit.record(c.get('principal'), { action: 'delete', target: 'key', name: id, detail: { user: name } });
    return c.text(`key ${id} revoked`);
  });
}

export function registerAccessRoutes(app: Hono<AppEnv>, services: Services): void {
  registerRoleRoutes(app, services);
  registerUserRoutes(app, services);
  registerKeyRoutes(app, services);
}
