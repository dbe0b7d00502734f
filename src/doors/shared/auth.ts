import { createHash, hash, randomBytes, timingSafeEqual } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { writeFileDurable } from '../../storage/objects/objectStore.ts';
import { log } from '../../log.ts';
import { unauthorized, forbidden } from '../../errors.ts';
import type { IngestRights } from '../../ingest/service.ts';
import { allows, PRIVILEGE_ACTIONS, type Grant } from '../../access/roles.ts';
import { verifyPassword } from '../../access/passwords.ts';
import type { AccessStore } from '../../access/store.ts';
import { grantsOf, type AccessState } from '../../access/state.ts';
import type { SignInLimits } from './signInLimits.ts';

/** The internal audit dataset (issue 34): who changed users, roles, keys and datasets; readable by admins only. */
export const AUDIT_DATASET = 'paudit';
const SERVICE_ONLY: ReadonlySet<string> = new Set([AUDIT_DATASET]);

export type Role = 'admin' | 'writer' | 'reader';
export type Action = 'ingest' | 'create' | 'read' | 'delete' | 'admin';

export const ROLE_ACTIONS: Record<Role, Set<Action>> = {
  admin: new Set(['ingest', 'create', 'read', 'delete', 'admin']),
  writer: new Set(['ingest', 'create']),
  reader: new Set(['read']),
};

export interface Principal {
  /**
   * Stable id of the key (not the key: a hash of its digest), for what a key owns (saved queries) and
   * per-key limits (queries in flight).
   */
  id: string;
  role: Role;
  /** Datasets the key is limited to; undefined means all. */
  datasets?: Set<string>;
  /** A user signed in (Basic user:password, or a key the user owns): their name, roles and grants. */
  user?: string;
  roles?: string[];
  /** The user's grants: when present they, not `role`, decide what is allowed (role is only a summary). */
  grants?: Grant[];
  /** The user-owned key it came with, if any (revoking it ends its access at the next check). */
  keyId?: string;
}

/** What a user (or their key) presents: a user name when Basic auth named one, and the secret. */
export interface Credentials {
  user?: string;
  secret: string;
}

interface KeyEntry extends Principal {
  digest: Buffer;
}

// The one-shot hash (no Hash object per call): it runs on every request.
const digest = (key: string) => hash('sha256', key, 'buffer') as unknown as Buffer;

/** `key[:role[:dataset|dataset…]]`, comma-separated. */
export function parseApiKeys(spec: string): { key: string; principal: Omit<Principal, 'id'> }[] {
  return spec
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((item) => {
      const [key, role = 'admin', datasets] = item.split(':');
      if (!key) throw new Error('P_API_KEYS: empty key');
      if (role !== 'admin' && role !== 'writer' && role !== 'reader') throw new Error(`P_API_KEYS: unknown role "${role}" (admin, writer or reader)`);
      const list = datasets?.split('|').filter(Boolean);
      return { key, principal: { role, datasets: list?.length ? new Set(list) : undefined } };
    });
}

export class ApiKeys {
  /**
   * @param keyFile where the generated admin key is kept, when the keys were not configured (the start
   *   log names it, so the operator knows where to read the key).
   */
  private constructor(
    private readonly entries: KeyEntry[],
    readonly keyFile?: string,
  ) {}

  /**
   * Keys from P_API_KEYS; with none configured, one admin key generated on first start, kept in the
   * data dir and printed once, so the service never runs open.
   */
  static async load(spec: string, dataDir: string): Promise<ApiKeys> {
    const parsed = parseApiKeys(spec);
    let keyFile: string | undefined;
    if (parsed.length === 0) {
      const file = path.join(dataDir, 'api-key');
      keyFile = file;
      let key = (await fs.readFile(file, 'utf8').catch(() => '')).trim();
      if (!key) {
        key = randomBytes(24).toString('base64url');
        await writeFileDurable(file, `${key}\n`);
        await fs.chmod(file, 0o600);
        // The one time a key is ever written to the log: the operator needs it to use the service.
        log.info('generated admin API key (printed once; kept in the data dir)', { apiKey: key, file });
      }
      parsed.push({ key, principal: { role: 'admin' } });
    }
    return new ApiKeys(
      parsed.map(({ key, principal }) => {
        const d = digest(key);
        return { ...principal, digest: d, id: createHash('sha256').update('owner:').update(d).digest('hex').slice(0, 16) };
      }),
      keyFile,
    );
  }

  private directory?: { access: AccessStore; limits: SignInLimits };
  /** Passwords verified lately, per user: sha256(password, stored hash), so scrypt runs once per password change, not per request. */
  private readonly verified = new Map<string, string>();

  /** Users, roles and user keys from the access store; sign-in attempts held to `limits`. */
  useDirectory(access: AccessStore, limits: SignInLimits): void {
    this.directory = { access, limits };
  }

  /**
   * THE resolver of every door (HTTP, gRPC, PostgreSQL, Iceberg, ES, Loki, HEC): the secret as an env
   * key or a user-owned key, else Basic user:password against the access store. Failures count against
   * the user and the source address (429 past the limit, before any check).
   */
  async signIn(cred: Credentials, address?: string): Promise<Principal> {
    const limits = this.directory?.limits;
    // A valid key (144 random bits or an operator's choice: not guessable at 100 tries a minute) is never
    // locked out, neither by guesses at the user name it is sent with nor by a bad client sharing its
    // address (every client behind a proxy has the proxy's). The locks guard passwords.
    const keyed = this.resolve(cred.secret);
    if (keyed) return keyed;
    // Only a user that exists is counted and locked: names nobody has would only grow the counters.
    const state = this.directory?.access.current;
    const user = cred.user !== undefined && state && Object.hasOwn(state.users, cred.user) ? cred.user : undefined;
    limits?.check(user, address);
    const principal = await this.userByPassword(cred);
    if (!principal) {
      limits?.fail(user, address);
      throw unauthorized(cred.user === undefined ? 'invalid API key' : `invalid user name, password or API key for ${JSON.stringify(cred.user)}`);
    }
    limits?.succeed(principal.user);
    return principal;
  }

  private async userByPassword(cred: Credentials): Promise<Principal | undefined> {
    const state = this.directory?.access.current;
    const user = cred.user !== undefined && state && Object.hasOwn(state.users, cred.user) ? state.users[cred.user] : undefined;
    if (!user || cred.user === undefined) return undefined;
    const stamp = createHash('sha256').update(cred.secret).update('\0').update(user.passwordHash).digest('hex');
    if (this.verified.get(cred.user) !== stamp) {
      if (!(await verifyPassword(cred.secret, user.passwordHash))) return undefined;
      if (this.verified.size > 10_000) this.verified.clear();
      this.verified.set(cred.user, stamp);
    }
    return userPrincipal(state!, cred.user);
  }

  /**
   * The principal as the access state now has it: a user's current roles, or unauthorized when the user
   * (or the user key) is gone. Long sessions (PostgreSQL) call it before each statement; env keys never change.
   */
  refresh(p: Principal): Principal {
    const state = this.directory?.access.current;
    if (p.user === undefined || !state) return p;
    if (!Object.hasOwn(state.users, p.user)) throw unauthorized(`user ${JSON.stringify(p.user)} no longer exists`);
    if (p.keyId !== undefined && !Object.hasOwn(state.keys, p.keyId)) throw unauthorized('this API key was revoked');
    return { ...userPrincipal(state, p.user), keyId: p.keyId };
  }

  /** Compares against every key in constant time (digests of equal length, no early exit); then the user-owned keys. */
  resolve(presented: string): Principal | undefined {
    const d = digest(presented);
    let found: Principal | undefined;
    for (const entry of this.entries) if (timingSafeEqual(d, entry.digest) && !found) found = entry;
    return found ?? this.userKey(d);
  }

  /** A user-owned key, looked up by its digest (a lookup by a hash of the secret reveals nothing of it). */
  private userKey(d: Buffer): Principal | undefined {
    const state = this.directory?.access.current;
    if (!state) return undefined;
    const hex = d.toString('hex');
    const entry = Object.entries(state.keys).find(([, k]) => k.digest === hex);
    if (!entry || !Object.hasOwn(state.users, entry[1].user)) return undefined;
    return { ...userPrincipal(state, entry[1].user), keyId: entry[0] };
  }
}

/** A role summary for what reads only a role (logs, the console's menus): admin, else reader if it reads, else writer. */
export function summaryRole(grants: readonly Grant[]): Role {
  if (allows(grants, 'admin')) return 'admin';
  return allows(grants, 'read') ? 'reader' : 'writer';
}

export function userPrincipal(state: AccessState, name: string): Principal {
  const user = state.users[name];
  const grants = grantsOf(state, user);
  const id = createHash('sha256').update('user:').update(name).digest('hex').slice(0, 16);
  return { id, role: summaryRole(grants), user: name, roles: [...user.roles], grants };
}

/** The credentials of a request: Basic user:password, else the key as presentedKey finds it. */
export function presentedCredentials(headers: Headers): Credentials | undefined {
  const basic = /^Basic\s+(.+)$/i.exec(headers.get('authorization') ?? '');
  if (basic && !headers.get('x-api-key')) {
    const decoded = Buffer.from(basic[1].trim(), 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon >= 0) return { user: decoded.slice(0, colon) || undefined, secret: decoded.slice(colon + 1) };
  }
  const key = presentedKey(headers);
  const token = key?.startsWith('u.') ? Buffer.from(key.slice(2), 'base64url').toString('utf8') : undefined;
  const colon = token?.indexOf(':') ?? -1;
  if (token !== undefined && colon > 0) return { user: token.slice(0, colon), secret: token.slice(colon + 1) };
  return key === undefined ? undefined : { secret: key };
}

/**
 * The Iceberg catalog's OAuth2 token for a user (client id + password): it stands for the user's Basic
 * credentials in the Bearer header of the next requests (as secret as the password it carries).
 */
export const userToken = (user: string, password: string) => `u.${Buffer.from(`${user}:${password}`).toString('base64url')}`;

/** The key from `X-API-Key`, else `Authorization: Bearer <key>`, else the password of `Authorization: Basic`. */
export function presentedKey(headers: Headers): string | undefined {
  const direct = headers.get('x-api-key');
  if (direct) return direct;
  const auth = headers.get('authorization');
  if (!auth) return undefined;
  const shipper = shipperSchemeKey(auth);
  if (shipper !== undefined) return shipper;
  const bearer = /^Bearer\s+(.+)$/i.exec(auth);
  if (bearer) return bearer[1].trim();
  const basic = /^Basic\s+(.+)$/i.exec(auth);
  if (basic) {
    const decoded = Buffer.from(basic[1].trim(), 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    return colon >= 0 ? decoded.slice(colon + 1) : undefined;
  }
  return undefined;
}

/**
 * The key in the schemes log shippers send: `Splunk <key>` (HEC) and Elasticsearch's `ApiKey <credential>`,
 * where the credential is the key itself or base64 of `id:key` (what the official clients send for an
 * `{id, api_key}` pair; the id is not checked).
 */
export function shipperSchemeKey(auth: string): string | undefined {
  const m = /^(Splunk|ApiKey)\s+(\S+)\s*$/i.exec(auth);
  if (!m) return undefined;
  if (m[1].toLowerCase() === 'splunk' || !/^[A-Za-z0-9+/]+={0,2}$/.test(m[2])) return m[2];
  const decoded = Buffer.from(m[2], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon > 0 && /^[\x20-\x7e]+$/.test(decoded) ? decoded.slice(colon + 1) : m[2];
}

/** A request's principal, through the one resolver (`address`: the source, for the brute-force guard). */
export async function authenticate(keys: ApiKeys, headers: Headers, address?: string): Promise<Principal> {
  const cred = presentedCredentials(headers);
  if (!cred || !cred.secret) throw unauthorized('missing API key (X-API-Key header, Bearer token, Basic user:password or key, ApiKey or Splunk token)');
  return keys.signIn(cred, address);
}

/** Whether the principal may read the dataset (the audit dataset: admins only, whatever the key's scope). */
export function canAccess(p: Principal, dataset: string): boolean {
  if (dataset === AUDIT_DATASET) return p.grants ? allows(p.grants, 'admin') : p.role === 'admin';
  if (p.grants) return allows(p.grants, 'read', dataset);
  return !p.datasets || p.datasets.has(dataset);
}

/**
 * Whether a dataset appears in the principal's lists (datasets, the PostgreSQL catalog, the Iceberg
 * namespace): the audit dataset never does — an admin queries it by name —, so lists stay the client's data.
 */
export const isListed = (p: Principal, dataset: string) => dataset !== AUDIT_DATASET && canAccess(p, dataset);

/** The datasets a user's grants allow `action` on (any action when not given); undefined: every dataset. */
export function grantDatasets(grants: readonly Grant[], action?: Action): Set<string> | undefined {
  const fit = grants.filter((g) => action === undefined || PRIVILEGE_ACTIONS[g.privilege].has(action));
  if (fit.some((g) => (g.resource?.stream ?? '*') === '*')) return undefined;
  return new Set(fit.map((g) => g.resource!.stream));
}

/** What a principal may do somewhere: its key role's actions, or the union of a user's grants. */
export function actionsOf(p: Principal): Action[] {
  if (!p.grants) return [...ROLE_ACTIONS[p.role]];
  return [...new Set(p.grants.flatMap((g) => [...PRIVILEGE_ACTIONS[g.privilege]]))];
}

const who = (p: Principal) => (p.user !== undefined ? `user "${p.user}"` : `a ${p.role} key`);

export function authorize(p: Principal, action: Action, dataset?: string): void {
  if (p.grants) {
    if (!allows(p.grants, action, dataset === AUDIT_DATASET ? undefined : dataset)) throw forbidden(`${who(p)} may not ${action}${dataset === undefined ? '' : ` on dataset "${dataset}"`}`);
    if (dataset === AUDIT_DATASET && !allows(p.grants, 'admin')) throw forbidden(`only admins may access dataset "${dataset}"`);
    return;
  }
  if (!ROLE_ACTIONS[p.role].has(action)) throw forbidden(`${who(p)} may not ${action}`);
  if (dataset !== undefined && !canAccess(p, dataset)) throw forbidden(`this API key may not access dataset "${dataset}"`);
}

/** A key's (or user's) ingest rights as data, for the ingest service (which knows no principals). */
export function ingestRights(p: Principal): IngestRights {
  if (p.grants) {
    const grants = p.grants;
    const ingesting = grants.filter((g) => allows([g], 'ingest'));
    const everywhere = ingesting.some((g) => (g.resource?.stream ?? '*') === '*');
    const datasets = everywhere ? undefined : new Set(ingesting.map((g) => g.resource!.stream));
    return { key: p.id, ingest: ingesting.length > 0, create: allows(grants, 'create'), datasets, except: SERVICE_ONLY };
  }
  const actions = ROLE_ACTIONS[p.role];
  return { key: p.id, ingest: actions.has('ingest'), create: actions.has('create'), datasets: p.datasets, except: SERVICE_ONLY };
}
