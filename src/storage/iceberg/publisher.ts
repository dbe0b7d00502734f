import { failpoint } from '../../failpoint.ts';
import { log } from '../../log.ts';
import { sqlString, withConnection } from '../../duckdb.ts';
import { COLUMN_TYPES, type ColumnType } from '../../model.ts';
import { icebergCommits } from '../../metrics.ts';
import type { FileEntry } from '../catalog.ts';
import type { Schema } from '../codec.ts';
import type { Dataset, StorageContext } from '../dataset/dataset.ts';
import { datasetPrefix, icebergAvroKey, icebergMetadataKey, icebergMetadataPrefix, parseIcebergMetadataVersion } from '../layout.ts';
import { currentSchema, emptyTable, evolveSchema, lakeColumns, publishable, type TableMetadata } from './metadata.ts';
import { buildSnapshot, fileHour, type SnapshotNaming, type SnapshotPlan } from './snapshot.ts';
import { CatalogPush, type PushSettings } from './push.ts';
import { TableReader, type TableState } from './table.ts';

export interface IcebergSettings {
  intervalMs: number;
  /** Snapshots older than this are expired (the current one never is). */
  snapshotRetentionMs: number;
  /** URI of the store's root: `file:///…/store` or `s3://bucket`; an object's location is `{base}/{key}`. */
  baseUri: string;
  /** An external catalog every table is also committed to (P_ICEBERG_PUSH_URI). */
  push?: PushSettings;
}

/** Metadata versions kept in a table's metadata log (older metadata files are deleted). */
const METADATA_VERSIONS_KEPT = 20;
/** Commit attempts of one round: a lost race reloads the winner's version and plans again. */
const COMMIT_ATTEMPTS = 5;
/**
 * An idle dataset (its catalog and schema unchanged since its last round that found nothing more to
 * publish) is looked at again after this many intervals anyway: to learn the versions other workers
 * committed (the garbage collector's guard) and to expire snapshots.
 */
const IDLE_RECHECK_INTERVALS = 10;

/** What a dataset's table is published from: when it is unchanged, a round has nothing to do. */
interface Published {
  catalog: Dataset['catalog'];
  manifests: number;
  schema: string;
  /** Look again from this time on (recheck, or the next snapshot expiry). */
  until: number;
}

const isColumnType = (t: string): t is ColumnType => (COLUMN_TYPES as readonly string[]).includes(t);

/**
 * The Iceberg publisher (docs/lake.md): every P_ICEBERG_INTERVAL, each dataset's catalog of files is
 * published as a snapshot of the dataset's Iceberg v2 table, whose data files are the Parquet files
 * themselves. A file this worker's catalog has that the table lacks is added; a file the catalog
 * removed (compaction, retention) is removed; a file that other workers added and this worker has not
 * read yet is left alone, so a worker that is behind never takes anything away. A commit is the
 * conditional creation of the next `v{N}.metadata.json`: of workers racing for N exactly one wins, the
 * others reload N and plan again. Manifests are uploaded before that write, so a crash before it
 * leaves only unreferenced files, never a partial snapshot.
 */
export class IcebergPublisher {
  private readonly reader: TableReader;
  private readonly states = new Map<string, TableState>();
  /** Each file's column types as written (files never change): decides whether readers can read it as the table's types. */
  private readonly fileTypes = new Map<string, Record<string, ColumnType>>();
  /** When this worker first saw a file it has not published yet (the lag gauge). */
  private readonly firstSeen = new Map<string, number>();
  /** Data files any retained snapshot lists, per dataset: the garbage collector keeps them. */
  private readonly referencedFiles = new Map<string, Set<string>>();
  /** The external catalog's push (P_ICEBERG_PUSH_URI), and the deleted tables already dropped there. */
  readonly push?: CatalogPush;
  private readonly dropped = new Set<string>();
  /** Files of nanosecond-timed datasets written without the microsecond copy: compaction rewrites them. */
  private readonly withoutTimeCopy = new Set<string>();
  /** Per dataset generation: what its last complete round published from (idle rounds are skipped). */
  private readonly published = new Map<string, Published>();

  constructor(
    private readonly ctx: StorageContext,
    readonly settings: IcebergSettings,
  ) {
    this.reader = new TableReader(ctx.store, (uri) => this.keyOf(uri));
    if (settings.push) this.push = new CatalogPush(settings.push);
  }

  readonly uri = (key: string): string => `${this.settings.baseUri}/${key}`;
  private keyOf(uri: string): string {
    const base = `${this.settings.baseUri}/`;
    if (!uri.startsWith(base)) throw new Error(`iceberg: ${uri} is not under ${base}`);
    return uri.slice(base.length);
  }

  private naming(ds: Dataset): SnapshotNaming {
    return { uri: this.uri, keyOf: (u) => this.keyOf(u), avroKey: (f) => icebergAvroKey(ds.meta.name, ds.meta.generation, f) };
  }

  /** Whether a file is one of a nanosecond-timed dataset's written without the microsecond copy (seen so far). */
  lacksTimeCopy(key: string): boolean {
    return this.withoutTimeCopy.has(key);
  }

  /** Whether a retained snapshot of some table lists this data file (the GC keeps it while one does). */
  referenced(key: string): boolean {
    const dataset = key.slice(0, key.indexOf('/'));
    return this.referencedFiles.get(dataset)?.has(key) ?? false;
  }

  /** Seconds the oldest file this worker has seen but not yet published has waited (0: none waits). */
  lagSeconds(name: string, now = Date.now()): number {
    let oldest = now;
    for (const [key, at] of this.firstSeen) if (key.startsWith(datasetPrefix(name)) && at < oldest) oldest = at;
    return (now - oldest) / 1000;
  }

  /** One round over every dataset; a failure of one is logged and retried next round. */
  async publishAll(datasets: Dataset[]): Promise<void> {
    for (const ds of datasets) {
      if (ds.deleted) {
        await this.dropPushed(ds);
        continue;
      }
      // Nothing changed since a round found nothing more to publish: no LIST, no planning.
      if (this.idle(ds)) continue;
      const from = this.source(ds);
      const done = await this.publish(ds).then(
        () => true,
        (err) => log.warn('iceberg publish failed; will retry', { dataset: ds.meta.name, error: (err as Error).message }),
      );
      if (done) this.published.set(`${ds.meta.name}/${ds.meta.generation}`, { ...from, until: this.recheckAt(ds) });
      // After our own commit, whatever its outcome: the external catalog gets the table as it now is.
      await this.pushTable(ds);
    }
  }

  /** What the table is published from now (read before planning: a change meanwhile makes the next round work). */
  private source(ds: Dataset): Omit<Published, 'until'> {
    return { catalog: ds.catalog, manifests: ds.catalog.appliedManifests, schema: JSON.stringify(ds.schema) };
  }

  /** Whether the dataset is unchanged since its last complete round, before its recheck time, and in step with any external catalog. */
  private idle(ds: Dataset): boolean {
    const last = this.published.get(`${ds.meta.name}/${ds.meta.generation}`);
    if (!last || Date.now() >= last.until || (this.push && this.push.lagSeconds(ds.meta.name) > 0)) return false;
    const now = this.source(ds);
    return last.catalog === now.catalog && last.manifests === now.manifests && last.schema === now.schema;
  }

  /** The next time an idle table must be looked at: the recheck, or sooner when a snapshot is due to expire. */
  private recheckAt(ds: Dataset): number {
    const now = Date.now();
    let at = now + IDLE_RECHECK_INTERVALS * this.settings.intervalMs;
    const m = this.states.get(`${ds.meta.name}/${ds.meta.generation}`)?.metadata;
    for (const s of m?.snapshots ?? []) if (s['snapshot-id'] !== m!['current-snapshot-id']) at = Math.min(at, s['timestamp-ms'] + this.settings.snapshotRetentionMs + 1);
    return Math.max(at, now);
  }

  /** Commits the table's current version to the external catalog too (see push.ts); never throws. */
  private async pushTable(ds: Dataset): Promise<void> {
    const { name, generation } = ds.meta;
    const state = this.states.get(`${name}/${generation}`);
    if (!this.push || !state) return;
    const location = this.uri(icebergMetadataKey(name, generation, state.version));
    await this.push.sync(name, { location, metadata: state.metadata }, this.uri(icebergMetadataPrefix(name, generation)).slice(0, -1));
  }

  private async dropPushed(ds: Dataset): Promise<void> {
    const id = `${ds.meta.name}/${ds.meta.generation}`;
    if (!this.push || this.dropped.has(id)) return;
    this.dropped.add(id);
    await this.push.drop(ds.meta.name);
  }

  /** The table's current metadata, as readers load it (the newest version in the store). */
  async current(ds: Dataset): Promise<{ location: string; metadata: TableMetadata } | undefined> {
    const { name, generation } = ds.meta;
    let version = await this.reader.latestVersion(name, generation, this.states.get(`${name}/${generation}`)?.version);
    if (version === 0) {
      await this.publish(ds);
      version = await this.reader.latestVersion(name, generation);
    }
    const metadata = version ? await this.reader.metadata(name, generation, version) : undefined;
    return metadata && { location: this.uri(icebergMetadataKey(name, generation, version)), metadata };
  }

  /** Publishes what the dataset's catalog holds that the table does not; returns whether a version was committed (throws when every attempt lost a race). */
  async publish(ds: Dataset): Promise<boolean> {
    const { name, generation } = ds.meta;
    for (let attempt = 0; attempt < COMMIT_ATTEMPTS; attempt++) {
      const version = await this.reader.latestVersion(name, generation, this.states.get(`${name}/${generation}`)?.version);
      // Keyed by generation too: a dataset deleted and created again is another table.
      const state = version ? await this.reader.load(name, generation, version, this.states.get(`${name}/${generation}`)) : undefined;
      if (state) await this.remember(name, generation, state);
      const next = await this.nextMetadata(ds, state);
      if (!next) return false;
      const key = icebergMetadataKey(name, generation, version + 1);
      if (await this.ctx.store.putIfAbsent(key, JSON.stringify(next.metadata))) {
        icebergCommits.inc({ result: 'committed' });
        for (const f of next.plan.add) this.firstSeen.delete(f.key);
        // What was written is the state: its manifests are in the reader's cache, nothing is read back.
        await this.remember(name, generation, await this.reader.fromMetadata(version + 1, next.metadata));
        await this.cleanUp(ds, state, next.metadata, version + 1);
        return true;
      }
      icebergCommits.inc({ result: 'conflict' });
      log.debug('iceberg commit lost a race; reloading', { dataset: name, version: version + 1 });
    }
    // Thrown, not returned: the round is not complete (publishAll logs it and tries again next interval).
    throw new Error('iceberg commit lost every race of this round');
  }

  /** The metadata of the next version, or undefined when the table already shows the catalog. */
  private async nextMetadata(ds: Dataset, state: TableState | undefined): Promise<{ metadata: TableMetadata; plan: SnapshotPlan } | undefined> {
    const now = Date.now();
    const lake = lakeColumns(ds.schema, ds.meta.timeColumn);
    // The table is created with its time column, which its partition spec is made from and never changes.
    if (!state && !(ds.meta.timeColumn in ds.schema)) return undefined;
    let base = state?.metadata ?? emptyTable(this.uri(datasetPrefix(ds.meta.name).slice(0, -1)), lake.columns, lake.timeColumn, now);
    if (state && staleSchema(currentSchema(base), lake.columns)) return undefined;
    base = evolveSchema(base, lake.columns);
    const plan = await this.plan(ds, state, base, lake.columns);
    const changed = base !== state?.metadata;
    if (!plan.add.length && !plan.remove.size) {
      // Nothing to publish: a version is still committed for a new schema, or to expire old snapshots.
      const expired = this.expire(base, now);
      return changed || expired !== base ? { metadata: this.withLog(ds, expired, state, now), plan } : undefined;
    }
    const built = await buildSnapshot(state, base, plan, this.naming(ds), now);
    for (const u of built.uploads) {
      await this.ctx.store.putBytes(u.key, u.body);
      this.reader.remember(this.uri(u.key), u);
    }
    // The crash tests' point: manifests and manifest list uploaded, the metadata version not yet written.
    failpoint('iceberg-before-commit');
    const withSnapshot: TableMetadata = {
      ...base,
      'last-sequence-number': built.snapshot['sequence-number'],
      'current-snapshot-id': built.snapshot['snapshot-id'],
      snapshots: [...base.snapshots, built.snapshot],
      'snapshot-log': [...base['snapshot-log'], { 'snapshot-id': built.snapshot['snapshot-id'], 'timestamp-ms': now }],
      refs: { main: { 'snapshot-id': built.snapshot['snapshot-id'], type: 'branch' } },
    };
    return { metadata: this.withLog(ds, this.expire(withSnapshot, now), state, now), plan };
  }

  /** Stamps the update time and logs the version it replaces. */
  private withLog(ds: Dataset, m: TableMetadata, state: TableState | undefined, now: number): TableMetadata {
    const { name, generation } = ds.meta;
    const previous = state ? [{ 'metadata-file': this.uri(icebergMetadataKey(name, generation, state.version)), 'timestamp-ms': state.metadata['last-updated-ms'] }] : [];
    return { ...m, 'last-updated-ms': now, 'metadata-log': [...m['metadata-log'], ...previous].slice(-METADATA_VERSIONS_KEPT) };
  }

  /** Drops snapshots older than the retention (never the current one). */
  private expire(m: TableMetadata, now: number): TableMetadata {
    const keep = m.snapshots.filter((s) => s['snapshot-id'] === m['current-snapshot-id'] || now - s['timestamp-ms'] <= this.settings.snapshotRetentionMs);
    if (keep.length === m.snapshots.length) return m;
    const ids = new Set(keep.map((s) => s['snapshot-id']));
    return { ...m, snapshots: keep, 'snapshot-log': m['snapshot-log'].filter((e) => ids.has(e['snapshot-id'])) };
  }

  /** What to add and remove: see the class comment. */
  private async plan(ds: Dataset, state: TableState | undefined, m: TableMetadata, columns: Schema): Promise<SnapshotPlan> {
    const live = new Set<string>();
    for (const entries of state?.entries.values() ?? []) for (const e of entries) live.add(this.keyOf(e.data_file.file_path));
    const inCatalog = new Map(ds.catalog.all().map((f) => [f.key, f]));
    const spec = m['partition-specs'][0].fields[0];
    const timeColumn = spec && currentSchema(m).fields.find((f) => f.id === spec['source-id'])?.name;
    const add: FileEntry[] = [];
    const readable = new Set<string>();
    const now = Date.now();
    for (const f of inCatalog.values()) {
      if (await this.readable(f, columns, timeColumn)) readable.add(f.key);
      else continue;
      if (!live.has(f.key)) {
        add.push(f);
        if (!this.firstSeen.has(f.key)) this.firstSeen.set(f.key, now);
      }
    }
    // A file merged or deleted before it was published no longer waits (the lag gauge).
    for (const key of this.firstSeen.keys()) if (key.startsWith(datasetPrefix(ds.meta.name)) && !inCatalog.has(key)) this.firstSeen.delete(key);
    for (const key of this.withoutTimeCopy) if (key.startsWith(datasetPrefix(ds.meta.name)) && !inCatalog.has(key)) this.withoutTimeCopy.delete(key);
    // Files gone from the catalog never come back: their types are no longer needed.
    for (const key of this.fileTypes.keys()) if (key.startsWith(datasetPrefix(ds.meta.name)) && !inCatalog.has(key)) this.fileTypes.delete(key);
    // Removed by the catalog, or no longer readable as the table's types (a column widened since).
    const remove = new Set([...live].filter((k) => ds.catalog.isRemoved(k) || (inCatalog.has(k) && !readable.has(k))));
    return { add, remove };
  }

  /** Whether readers get a file's rows right under the table's schema (see docs/lake.md "Types"). */
  private async readable(f: FileEntry, schema: Schema, timeColumn: string | undefined): Promise<boolean> {
    if (timeColumn !== undefined && fileHour(f) === undefined) return false;
    const types = await this.typesOf(f.key);
    // A nanosecond-timed file written before the microsecond copy existed has no table time column:
    // it stays out until compaction rewrites it with the copy (lacksTimeCopy).
    if (timeColumn !== undefined && !(timeColumn in types)) {
      this.withoutTimeCopy.add(f.key);
      return false;
    }
    for (const [column, type] of Object.entries(types)) {
      const want = schema[column];
      if (want === undefined) return false;
      if (publishable(want) && want !== type) return false;
    }
    return true;
  }

  /** A file's column types as its writer (this worker's flush or compaction) wrote them. */
  knowTypes(key: string, types: Record<string, ColumnType>): void {
    this.fileTypes.set(key, types);
  }

  private async typesOf(key: string): Promise<Record<string, ColumnType>> {
    const known = this.fileTypes.get(key);
    if (known) return known;
    const { paths, release } = await this.ctx.store.acquire([key]);
    try {
      const rows = await withConnection(this.ctx.duck, async (conn) =>
        (await conn.runAndReadAll(`DESCRIBE SELECT * FROM read_parquet(${sqlString(paths[0])}, hive_partitioning = false)`)).getRowObjectsJson(),
      );
      const types: Record<string, ColumnType> = {};
      for (const r of rows) {
        const t = String(r.column_type);
        // A type this service never writes has no Iceberg type to match: the file stays out.
        types[String(r.column_name)] = isColumnType(t) ? t : ('UNKNOWN' as ColumnType);
      }
      this.fileTypes.set(key, types);
      return types;
    } finally {
      release();
    }
  }

  /** Keeps the table state, and what its retained snapshots list (for the GC guard). */
  private async remember(name: string, generation: string, state: TableState): Promise<void> {
    this.states.set(`${name}/${generation}`, state);
    // Snapshots share most manifests (a fast append adds one): each distinct manifest is read once.
    const manifests = new Set<string>();
    for (const s of state.metadata.snapshots) for (const mf of await this.reader.manifestList(s['manifest-list'])) manifests.add(mf.manifest_path);
    const files = new Set<string>();
    for (const m of manifests) for (const e of await this.reader.manifestEntries(m)) files.add(this.keyOf(e.data_file.file_path));
    this.referencedFiles.set(name, files);
  }

  /** After a commit: deletes the Avro files of expired snapshots and metadata versions out of the log. */
  private async cleanUp(ds: Dataset, before: TableState | undefined, after: TableMetadata, version: number): Promise<void> {
    if (!before) return;
    const kept = new Set(after.snapshots.map((s) => s['manifest-list']));
    const expired = before.metadata.snapshots.filter((s) => !kept.has(s['manifest-list']));
    if (!expired.length) return;
    const stillListed = new Set<string>();
    for (const s of after.snapshots) for (const mf of await this.reader.manifestList(s['manifest-list']).catch(() => [])) stillListed.add(mf.manifest_path);
    const doomed = new Set<string>();
    for (const s of expired) {
      doomed.add(s['manifest-list']);
      for (const mf of await this.reader.manifestList(s['manifest-list']).catch(() => [])) if (!stillListed.has(mf.manifest_path)) doomed.add(mf.manifest_path);
    }
    const oldestLogged = version - METADATA_VERSIONS_KEPT;
    const keys = (await this.ctx.store.list(icebergMetadataPrefix(ds.meta.name, ds.meta.generation))).map((o) => o.key);
    const oldMetadata = keys.filter((k) => (parseIcebergMetadataVersion(k) ?? Infinity) < oldestLogged);
    // The external catalog's own metadata files (push.ts points its write.metadata.path here; named
    // `{version}-{uuid}.metadata.json`, so by name is by age): its newest ones stay.
    const pushed = keys.filter((k) => k.endsWith('.metadata.json') && parseIcebergMetadataVersion(k) === undefined).sort();
    oldMetadata.push(...pushed.slice(0, -METADATA_VERSIONS_KEPT));
    await this.ctx.store.delete([...[...doomed].map((u) => this.keyOf(u)), ...oldMetadata]);
    this.reader.forget([...doomed]);
  }
}

/**
 * This worker's view of the dataset schema is older than the table's (another worker widened a
 * column or added one this worker has not read yet): it must not take the table's schema back.
 */
export function staleSchema(table: { fields: { name: string; type: unknown }[] }, columns: Schema): boolean {
  for (const f of table.fields) {
    const mine = columns[f.name];
    if (mine === undefined) return true;
    const tableDouble = f.type === 'double' || (typeof f.type === 'object' && (f.type as { element?: string }).element === 'double');
    if (tableDouble && (mine === 'BIGINT' || mine === 'BIGINT[]')) return true;
  }
  return false;
}
