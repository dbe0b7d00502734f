import { z } from 'zod';
import { log } from '../../log.ts';
import { icebergPushes } from '../../metrics.ts';
import type { TableMetadata } from './metadata.ts';

/**
 * Optional push of each table to a catalog the user runs (Polaris, Lakekeeper, Nessie, Glue's REST
 * endpoint…; P_ICEBERG_PUSH_URI), through the Iceberg REST spec's write paths (docs/lake.md "Push"):
 * the table is registered there once (registerTable, with our current metadata file), and each later
 * version of ours is committed as the spec's table updates (add-schema, add-snapshot, set-snapshot-ref,
 * remove-snapshots, set-properties) under the requirements assert-table-uuid and assert-ref-snapshot-id:
 * when the catalog's `main` moved since we loaded it (another worker pushed first), the commit answers
 * 409 and is reloaded and planned again. The same snapshots, manifests and data files: nothing is copied.
 * A failing catalog never blocks our own publishing: it is retried next round, logged, and its lag is
 * `lakehouse_iceberg_push_lag_seconds`.
 */

export interface PushSettings {
  /** The catalog's base URI (what readers put in `uri`), without `/v1`. */
  uri: string;
  /** Bearer token sent with every request. */
  token?: string;
  /** `warehouse` asked for at `/v1/config` (catalogs serving several warehouses need it). */
  warehouse?: string;
  namespace: string;
}

/** What this service needs of the catalog's copy of a table (zod: it comes from another system). */
const TheirsZ = z
  .object({
    'table-uuid': z.string(),
    'current-snapshot-id': z.number().nullable().optional(),
    'current-schema-id': z.number().int(),
    'last-sequence-number': z.number().int().optional(),
    schemas: z.array(z.object({ 'schema-id': z.number().int() }).passthrough()),
    snapshots: z.array(z.object({ 'snapshot-id': z.number() }).passthrough()).optional(),
    properties: z.record(z.string(), z.string()).optional(),
  })
  .passthrough();
export type TheirTable = z.infer<typeof TheirsZ>;
const LoadZ = z.object({ 'metadata-location': z.string().optional(), metadata: TheirsZ });
const ConfigZ = z.object({ defaults: z.record(z.string(), z.string()).optional(), overrides: z.record(z.string(), z.string()).optional() });

/** `none`: in step, or this worker is behind the table there (it never takes it back). */
export type PushPlan = { kind: 'none' } | { kind: 'replace' } | { kind: 'commit'; body: { requirements: object[]; updates: object[] } };

/**
 * The commit that makes the catalog's table show our metadata (pure; unit-tested). `extra` are
 * properties only the pushed table carries. `replace`: the catalog's table is another generation of
 * the dataset (deleted and created again): it is dropped and registered anew.
 */
export function planPush(theirs: TheirTable, ours: TableMetadata, extra: Record<string, string>): PushPlan {
  if (theirs['table-uuid'] !== ours['table-uuid']) return { kind: 'replace' };
  // A worker behind the table there (another worker pushed a newer version of ours) never takes it back.
  if ((theirs['last-sequence-number'] ?? 0) > ours['last-sequence-number']) return { kind: 'none' };
  const updates: object[] = [];
  const theirSchemas = new Set(theirs.schemas.map((s) => s['schema-id']));
  const added = ours.schemas.filter((s) => !theirSchemas.has(s['schema-id']));
  for (const schema of added) updates.push({ action: 'add-schema', schema, 'last-column-id': ours['last-column-id'] });
  if (theirs['current-schema-id'] !== ours['current-schema-id']) {
    // -1: "the schema added last in this commit", as the spec allows, when ours is new there.
    const isNew = added.some((s) => s['schema-id'] === ours['current-schema-id']);
    updates.push({ action: 'set-current-schema', 'schema-id': isNew && added.at(-1)?.['schema-id'] === ours['current-schema-id'] ? -1 : ours['current-schema-id'] });
  }
  const theirSnapshots = new Set((theirs.snapshots ?? []).map((s) => s['snapshot-id']));
  const ourSnapshots = new Set(ours.snapshots.map((s) => s['snapshot-id']));
  const newSnapshots = ours.snapshots.filter((s) => !theirSnapshots.has(s['snapshot-id'])).sort((a, b) => a['sequence-number'] - b['sequence-number']);
  for (const snapshot of newSnapshots) updates.push({ action: 'add-snapshot', snapshot });
  const current = snapshotId(ours['current-snapshot-id']);
  const theirCurrent = snapshotId(theirs['current-snapshot-id']);
  if (current !== null && current !== theirCurrent) {
    updates.push({ action: 'set-snapshot-ref', 'ref-name': 'main', type: 'branch', 'snapshot-id': current });
  }
  const gone = [...theirSnapshots].filter((id) => !ourSnapshots.has(id));
  if (gone.length) updates.push({ action: 'remove-snapshots', 'snapshot-ids': gone });
  const wanted = { ...ours.properties, ...extra };
  const changed = Object.fromEntries(Object.entries(wanted).filter(([k, v]) => theirs.properties?.[k] !== v));
  if (Object.keys(changed).length) updates.push({ action: 'set-properties', updates: changed });
  if (!updates.length) return { kind: 'none' };
  const requirements = [
    { type: 'assert-table-uuid', uuid: ours['table-uuid'] },
    // null: `main` must not exist yet (a table without snapshots).
    { type: 'assert-ref-snapshot-id', ref: 'main', 'snapshot-id': theirCurrent },
  ];
  return { kind: 'commit', body: { requirements, updates } };
}

/** A current snapshot id; -1 (v1 style) and absent both mean none. */
const snapshotId = (id: number | null | undefined): number | null => (id === undefined || id === null || id === -1 ? null : id);

/** Attempts of one round: a lost race (409) reloads the catalog's table and plans again. */
const PUSH_ATTEMPTS = 5;
const REQUEST_TIMEOUT_MS = 30_000;

export class CatalogPush {
  private base?: string;
  /** Since when each dataset's table there has been behind ours (the lag gauge). */
  private readonly behindSince = new Map<string, number>();

  constructor(private readonly settings: PushSettings) {}

  /** Seconds the catalog's copy of the table has been behind ours (0: in step). */
  lagSeconds(name: string, now = Date.now()): number {
    const since = this.behindSince.get(name);
    return since === undefined ? 0 : (now - since) / 1000;
  }

  /**
   * Makes the catalog's table show `ours` (at `location`); `metadataDir` is where the catalog writes its
   * own metadata files (beside ours, so a dataset delete removes them). Never throws: failures are
   * logged and counted, and the next round tries again.
   */
  async sync(name: string, ours: { location: string; metadata: TableMetadata }, metadataDir: string): Promise<void> {
    if (!this.behindSince.has(name)) this.behindSince.set(name, Date.now());
    try {
      if (await this.syncOnce(name, ours, metadataDir)) this.behindSince.delete(name);
    } catch (err) {
      icebergPushes.inc({ result: 'failed' });
      log.warn('iceberg push to the external catalog failed; will retry', { dataset: name, error: (err as Error).message });
    }
  }

  /** Drops the catalog's table of a deleted dataset (a 404 there is fine). */
  async drop(name: string): Promise<void> {
    this.behindSince.delete(name);
    try {
      await this.request('DELETE', this.tablePath(await this.prefix(), name), undefined, [404]);
    } catch (err) {
      log.warn('iceberg push: dropping a deleted dataset\'s table failed', { dataset: name, error: (err as Error).message });
    }
  }

  private async syncOnce(name: string, ours: { location: string; metadata: TableMetadata }, metadataDir: string): Promise<boolean> {
    const base = await this.prefix();
    const extra = { 'write.metadata.path': metadataDir };
    for (let attempt = 0; attempt < PUSH_ATTEMPTS; attempt++) {
      const loaded = await this.request('GET', this.tablePath(base, name), undefined, [404]);
      if (loaded.status === 404) {
        if ((await this.register(base, name, ours.location)) !== 409) continue; // registered: now commit the extra properties
        icebergPushes.inc({ result: 'conflict' });
        continue;
      }
      const plan = planPush(LoadZ.parse(loaded.body).metadata, ours.metadata, extra);
      if (plan.kind === 'none') return true;
      if (plan.kind === 'replace') {
        await this.request('DELETE', this.tablePath(base, name), undefined, [404]);
        continue;
      }
      const res = await this.request('POST', this.tablePath(base, name), plan.body, [409]);
      if (res.status !== 409) {
        icebergPushes.inc({ result: 'committed' });
        continue; // reload: in step when the next plan is empty
      }
      icebergPushes.inc({ result: 'conflict' });
      log.debug('iceberg push lost a race; reloading', { dataset: name });
    }
    return false;
  }

  private async register(base: string, name: string, location: string): Promise<number> {
    const ns = encodeURIComponent(this.settings.namespace);
    await this.request('POST', `${base}namespaces`, { namespace: [this.settings.namespace], properties: {} }, [409]);
    const res = await this.request('POST', `${base}namespaces/${ns}/register`, { name, 'metadata-location': location }, [409]);
    if (res.status !== 409) icebergPushes.inc({ result: 'registered' });
    return res.status;
  }

  private tablePath(base: string, name: string): string {
    return `${base}namespaces/${encodeURIComponent(this.settings.namespace)}/tables/${encodeURIComponent(name)}`;
  }

  /** `{uri}/v1/{prefix}/`: the prefix the catalog's `/v1/config` names (per warehouse), asked once. */
  private async prefix(): Promise<string> {
    if (this.base) return this.base;
    const query = this.settings.warehouse ? `?warehouse=${encodeURIComponent(this.settings.warehouse)}` : '';
    const config = ConfigZ.parse((await this.request('GET', `${this.settings.uri.replace(/\/$/, '')}/v1/config${query}`)).body);
    const prefix = config.overrides?.prefix ?? config.defaults?.prefix;
    this.base = `${this.settings.uri.replace(/\/$/, '')}/v1/${prefix ? `${prefix.split('/').map(encodeURIComponent).join('/')}/` : ''}`;
    return this.base;
  }

  /** One request; a status other than 2xx or an `allowed` one throws with the catalog's message. */
  private async request(method: string, url: string, body?: object, allowed: number[] = []): Promise<{ status: number; body: unknown }> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (body) headers['content-type'] = 'application/json';
    if (this.settings.token) headers.authorization = `Bearer ${this.settings.token}`;
    const res = await fetch(url, { method, headers, body: body && JSON.stringify(body), signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
    const text = await res.text();
    if (!res.ok && !allowed.includes(res.status)) throw new Error(`${method} ${url}: ${res.status} ${text.slice(0, 300)}`);
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  }
}
