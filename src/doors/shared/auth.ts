import { createHash, hash, randomBytes, timingSafeEqual } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { writeFileDurable } from '../../storage/objectStore.ts';
import { log } from '../../log.ts';
import { unauthorized, forbidden } from '../../errors.ts';
import type { IngestRights } from '../../ingest/service.ts';
import { allows, PRIVILEGE_ACTIONS, type Grant } from '../../access/roles.ts';

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
  /**
   * A signed-in user's (a console session's, src/doors/shared/sessionAuth.ts): their name, role names and
   * the grants those roles hold. With `grants`, they decide every check below; `role` is then only their
   * summary (admin if any grant is admin), for the few places that ask "is this an admin".
   */
  user?: string;
  roles?: readonly string[];
  grants?: readonly Grant[];
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

  /** Compares against every key in constant time (digests of equal length, no early exit). */
  resolve(presented: string): Principal | undefined {
    const d = digest(presented);
    let found: Principal | undefined;
    for (const entry of this.entries) if (timingSafeEqual(d, entry.digest) && !found) found = entry;
    return found;
  }
}

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

export function authenticate(keys: ApiKeys, headers: Headers): Principal {
  const key = presentedKey(headers);
  if (!key) throw unauthorized('missing API key (X-API-Key header, Bearer token, Basic password, ApiKey or Splunk token)');
  const principal = keys.resolve(key);
  if (!principal) throw unauthorized('invalid API key');
  return principal;
}

export function canAccess(p: Principal, dataset: string): boolean {
  if (p.grants) return p.grants.some((g) => (g.resource?.stream ?? '*') === '*' || g.resource?.stream === dataset);
  return !p.datasets || p.datasets.has(dataset);
}

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

/** A user's key-role summary: admin when a grant is, else reader when one reads, else writer. */
export const summaryRole = (grants: readonly Grant[]): Role => (allows(grants, 'admin') ? 'admin' : allows(grants, 'read') ? 'reader' : 'writer');

export function authorize(p: Principal, action: Action, dataset?: string): void {
  if (p.grants) {
    if (!allows(p.grants, action, dataset)) throw forbidden(`${p.user ?? 'this user'} may not ${action}${dataset === undefined ? '' : ` on dataset "${dataset}"`} (roles: ${p.roles?.join(', ') || 'none'})`);
    return;
  }
  if (!ROLE_ACTIONS[p.role].has(action)) throw forbidden(`a ${p.role} key may not ${action}`);
  if (dataset !== undefined && !canAccess(p, dataset)) throw forbidden(`this API key may not access dataset "${dataset}"`);
}

/** A key's ingest rights as data, for the ingest service (which knows no principals). */
export function ingestRights(p: Principal): IngestRights {
  if (p.grants) return { key: p.id, ingest: allows(p.grants, 'ingest'), create: allows(p.grants, 'create'), datasets: grantDatasets(p.grants, 'ingest') };
  const actions = ROLE_ACTIONS[p.role];
  return { key: p.id, ingest: actions.has('ingest'), create: actions.has('create'), datasets: p.datasets };
}
