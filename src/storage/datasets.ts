import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import type { DuckDBInstance } from '@duckdb/node-api';
import { parseDurationMs } from '../config.ts';
import type { ColumnType } from '../ingest/types.ts';
import { failpoint } from '../failpoint.ts';
import { log } from '../log.ts';
import { Catalog, type FileEntry, type Manifest } from './catalog.ts';
import { writeFileDurable, type ObjectStore } from './objectStore.ts';
import { hourPartition, mergeParquet, planCompaction } from './compaction.ts';
import { writeParquet } from './parquetWriter.ts';
import { planSchema, unionSchemas, type Schema, type TypeSummary } from './schema.ts';
import { Wal, type Segment } from './wal.ts';
import { invalidInput, conflict, unavailable, notFound } from '../errors.ts';

/** What a dataset holds; it keeps the kind it was created with (OTLP signals do not mix). */
export type DatasetKind = 'json' | 'otel-logs' | 'otel-traces' | 'otel-metrics';

/** Parseable's retention shape: `[{"description":…, "action":"delete", "duration":"30d"}]`. */
export interface RetentionRule {
  description?: string;
  action: 'delete';
  duration: string;
}

export interface DatasetMeta {
  name: string;
  retention?: RetentionRule[];
  /** Changes every time a dataset of this name is created, so nothing of a deleted one ever returns. */
  generation: string;
  kind: DatasetKind;
  timeColumn: string;
  createdAt: string;
}

export interface StorageSettings {
  dataDir: string;
  nodeId: string;
  maxColumns: number;
  flushIntervalMs: number;
  flushBytes: number;
  walMaxBytes: number;
  zstdLevel: number;
  rowGroupRows: number;
  catalogRefreshMs: number;
  compactionIntervalMs: number;
  compactionTargetBytes: number;
  /** How long a file removed from the catalog stays, for queries (here and on other workers) still reading it. */
  deleteGraceMs: number;
}

export interface Snapshot {
  meta: DatasetMeta;
  schema: Schema;
  files: (FileEntry & { path: string })[];
  segments: Segment[];
  release: () => void;
}

class Dataset {
  /** Union of every worker's schema: what queries see. */
  schema: Schema = {};
  /** This worker's own schema object in the store. */
  ownSchema: Schema = {};
  schemaWrite: Promise<void> = Promise.resolve();
  /** The own schema has columns the store's copy lacks. */
  schemaDirty = false;
  flushing?: Promise<void>;
  oldestUnflushedAt?: number;
  /** After a failed flush, no new attempt before this time (exponential backoff). */
  retryFlushAt = 0;
  flushFailures = 0;
  compacting?: Promise<void>;
  deleted = false;
  readonly loadedAt = Date.now();
  constructor(
    public meta: DatasetMeta,
    readonly wal: Wal,
    readonly catalog: Catalog,
  ) {}
}

const NAME_RE = /^[A-Za-z][A-Za-z0-9_-]*$/;
export const MAX_NAME_LENGTH = 64;

export const metaKey = (name: string) => `.streams/${name}.json`;
const schemaKey = (m: DatasetMeta, nodeId: string) => `${m.name}/.schema/${m.generation}/${nodeId}.json`;
const manifestPrefix = (m: DatasetMeta) => `${m.name}/.manifests/${m.generation}/`;

export class DatasetRegistry {
  private datasets = new Map<string, Dataset>();
  private creating = new Map<string, Promise<DatasetMeta>>();
  private reserved = new Set<string>();
  private timers: NodeJS.Timeout[] = [];
  /** Objects removed from a catalog by this worker, deleted from storage once the grace period is over. */
  private pendingDeletes: { key: string; at: number }[] = [];
  private manifestSeq = 0;
  /** Generations deleted here: a listing of the store taken before the delete must not bring one back. */
  private deletedGenerations = new Set<string>();

  constructor(
    readonly store: ObjectStore,
    private readonly duck: DuckDBInstance,
    readonly settings: StorageSettings,
  ) {}

  private walDir(m: DatasetMeta): string {
    return path.join(this.settings.dataDir, 'wal', m.name, m.generation);
  }

  private localSchemaFile(m: DatasetMeta): string {
    return path.join(this.walDir(m), 'schema.json');
  }

  /** Loads every dataset from the store and recovers this worker's WAL. */
  async init(reservedWords: string[]): Promise<void> {
    this.reserved = new Set(reservedWords.map((w) => w.toLowerCase()));
    const metas = await this.store.list('.streams/');
    for (const { key } of metas) {
      const body = await this.store.getBytes(key);
      if (!body) continue;
      const meta = JSON.parse(body.toString()) as DatasetMeta;
      await this.load(meta);
    }
    // WAL directories of datasets (or generations) that no longer exist are leftovers of a delete.
    const walRoot = path.join(this.settings.dataDir, 'wal');
    for (const name of await fs.readdir(walRoot).catch(() => [] as string[])) {
      for (const gen of await fs.readdir(path.join(walRoot, name)).catch(() => [] as string[])) {
        const ds = this.datasets.get(name);
        if (!ds || ds.meta.generation !== gen) await fs.rm(path.join(walRoot, name, gen), { recursive: true, force: true });
      }
    }
  }

  private async load(meta: DatasetMeta): Promise<Dataset> {
    const catalog = new Catalog();
    await this.readManifests(meta, catalog);
    // Segment numbers continue after every segment a manifest ever named, so a number is never reused.
    const wal = await Wal.open(this.walDir(meta), catalog.maxFlushedSegment(this.settings.nodeId) + 1);
    const ds = new Dataset(meta, wal, catalog);
    await this.refreshSchema(ds);
    // Segments already stored as Parquet (crash after the manifest, before the WAL cleanup) go now.
    const flushed = (await wal.seal()).filter((s) => ds.catalog.isSegmentFlushed(this.settings.nodeId, s.seq)).map((s) => s.seq);
    if (flushed.length) {
      log.info('wal: dropping segments already in parquet', { dataset: meta.name, segments: flushed });
      await wal.remove(flushed);
    }
    if (wal.size.rows > 0) ds.oldestUnflushedAt = Date.now();
    this.datasets.set(meta.name, ds);
    return ds;
  }

  /** Reads the manifests not yet applied to a catalog. */
  private async readManifests(meta: DatasetMeta, catalog: Catalog): Promise<void> {
    const entries = await this.store.list(manifestPrefix(meta));
    for (const { key } of entries) {
      if (catalog.hasManifest(key)) continue;
      const body = await this.store.getBytes(key);
      if (body) this.applyManifest(catalog, key, JSON.parse(body.toString()) as Manifest);
    }
  }

  private applyManifest(catalog: Catalog, key: string, m: Manifest): void {
    if (!catalog.apply(key, m)) return;
    this.manifestSeq = Math.max(this.manifestSeq, m.nodeId === this.settings.nodeId ? m.seq : 0);
    if (m.nodeId === this.settings.nodeId && m.remove.length) {
      const at = Date.parse(m.createdAt) + this.settings.deleteGraceMs;
      for (const k of m.remove) this.pendingDeletes.push({ key: k, at });
    }
  }

  /**
   * Reserves a manifest number (also used in file names), unique for this worker: at least `atLeast`,
   * above every number used so far. Taken before any await, so a flush and a compaction running at
   * the same time never share one (they would overwrite each other's manifest).
   */
  private reserveSeq(atLeast = 0): number {
    this.manifestSeq = Math.max(this.manifestSeq + 1, atLeast);
    return this.manifestSeq;
  }

  /**
   * Writes a manifest, then applies it to the local catalog and runs `alsoNow` in the same tick, so
   * no query can see the catalog change without what goes with it (the WAL segments it replaces).
   */
  private async commitManifest(
    ds: Dataset,
    seq: number,
    m: Omit<Manifest, 'version' | 'generation' | 'nodeId' | 'seq' | 'createdAt'>,
    alsoNow?: (manifest: Manifest) => void,
  ): Promise<Manifest> {
    const manifest: Manifest = { version: 1, generation: ds.meta.generation, nodeId: this.settings.nodeId, seq, createdAt: new Date().toISOString(), ...m };
    const key = `${manifestPrefix(ds.meta)}${this.settings.nodeId}.${String(seq).padStart(12, '0')}.json`;
    await this.store.putBytes(key, JSON.stringify(manifest));
    this.applyManifest(ds.catalog, key, manifest);
    alsoNow?.(manifest);
    return manifest;
  }

  async refreshSchema(ds: Dataset): Promise<void> {
    const local = await fs.readFile(this.localSchemaFile(ds.meta), 'utf8').catch(() => undefined);
    if (local) {
      const own = JSON.parse(local) as Schema;
      if (Object.keys(own).some((k) => ds.ownSchema[k] !== own[k])) ds.schemaDirty = true;
      ds.ownSchema = unionSchemas([ds.ownSchema, own]);
    }
    const prefix = `${ds.meta.name}/.schema/${ds.meta.generation}/`;
    const schemas: Schema[] = [];
    for (const { key } of await this.store.list(prefix)) {
      const body = await this.store.getBytes(key);
      if (!body) continue;
      const schema = JSON.parse(body.toString()) as Schema;
      if (key === schemaKey(ds.meta, this.settings.nodeId)) ds.ownSchema = unionSchemas([ds.ownSchema, schema]);
      schemas.push(schema);
    }
    ds.schema = unionSchemas([ds.schema, ds.ownSchema, ...schemas]);
  }

  validateName(name: string): void {
    if (name.length === 0) throw invalidInput('dataset name must not be empty');
    if (name.length > MAX_NAME_LENGTH) throw invalidInput(`dataset name must be at most ${MAX_NAME_LENGTH} characters`);
    if (!NAME_RE.test(name)) {
      throw invalidInput('dataset name must start with a letter and contain only letters, digits, "_" and "-"');
    }
    if (this.reserved.has(name.toLowerCase())) throw invalidInput(`dataset name "${name}" is a reserved SQL keyword`);
    if (name.toLowerCase().startsWith('p_')) throw invalidInput('dataset names starting with "p_" are reserved');
  }

  list(): DatasetMeta[] {
    return [...this.datasets.values()].map((d) => d.meta).sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Finds a dataset by name; SQL identifiers are case-insensitive, so lookups from SQL are too. */
  find(name: string, caseInsensitive = false): DatasetMeta | undefined {
    const exact = this.datasets.get(name);
    if (exact || !caseInsensitive) return exact?.meta;
    const lower = name.toLowerCase();
    for (const d of this.datasets.values()) if (d.meta.name.toLowerCase() === lower) return d.meta;
    return undefined;
  }

  private dataset(name: string): Dataset {
    const ds = this.datasets.get(name);
    if (!ds) throw notFound(`dataset "${name}" does not exist`);
    return ds;
  }

  /** Creates a dataset; a second create of the same name returns the existing one (created: false). */
  async create(name: string, kind: DatasetKind, timeColumn: string): Promise<{ meta: DatasetMeta; created: boolean }> {
    this.validateName(name);
    const existing = this.datasets.get(name)?.meta ?? (await this.creating.get(name));
    if (existing) return { meta: existing, created: false };
    const clash = this.find(name, true)?.name ?? [...this.creating.keys()].find((n) => n.toLowerCase() === name.toLowerCase());
    if (clash) throw conflict(`dataset "${clash}" already exists (names are case-insensitive)`);
    const work = (async () => {
      const meta: DatasetMeta = {
        name,
        generation: randomUUID().replaceAll('-', '').slice(0, 16),
        kind,
        timeColumn,
        createdAt: new Date().toISOString(),
      };
      await this.store.putBytes(metaKey(name), JSON.stringify(meta));
      await this.load(meta);
      log.info('dataset created', { dataset: name, kind });
      return meta;
    })();
    this.creating.set(name, work);
    try {
      return { meta: await work, created: true };
    } finally {
      this.creating.delete(name);
    }
  }

  /** Deletes the dataset everywhere: metadata first (so it is gone for every reader), then its data. */
  async delete(name: string): Promise<void> {
    const ds = this.dataset(name);
    ds.deleted = true;
    this.deletedGenerations.add(ds.meta.generation);
    this.datasets.delete(name);
    await this.store.delete([metaKey(name)]);
    await ds.wal.destroy();
    await fs.rm(path.join(this.settings.dataDir, 'wal', name), { recursive: true, force: true });
    await ds.flushing?.catch(() => undefined);
    await this.store.deletePrefix(`${name}/`);
    log.info('dataset deleted', { dataset: name });
  }

  schemaOf(name: string): { meta: DatasetMeta; schema: Schema } {
    const ds = this.dataset(name);
    return { meta: ds.meta, schema: ds.schema };
  }

  /**
   * Stores rows already serialised as WAL lines by an ingest worker, which placed every value against
   * `schema` as it was when the job started. If the schema has changed since in a way the batch does
   * not fit (another request added the same new column with another type, or reached P_MAX_COLUMNS),
   * nothing is stored and the current schema comes back: the caller has the batch placed again.
   * Otherwise the schema evolves (persisted before anything that depends on it is acknowledged) and
   * the lines are appended; resolves once they are durable.
   */
  async ingestSerialized(
    name: string,
    batch: { lines: string; rows: number; types: TypeSummary; fixed: string[] },
    rawBytes: number,
  ): Promise<{ count: number } | { conflict: string; schema: Schema }> {
    const ds = this.dataset(name);
    if (batch.rows === 0) return { count: 0 };
    const plan = planSchema(ds.schema, batch.types, this.settings.maxColumns, new Set(batch.fixed));
    if (plan.conflict !== undefined) return { conflict: plan.conflict, schema: ds.schema };
    return { count: await this.append(ds, plan.next, batch.lines, batch.rows, rawBytes) };
  }

  private async append(ds: Dataset, nextSchema: Schema | undefined, lines: string, rows: number, rawBytes: number): Promise<number> {
    if (ds.wal.size.bytes > this.settings.walMaxBytes) {
      throw unavailable('write-ahead log is full (storage is behind); retry later', 5);
    }
    if (nextSchema) {
      ds.schema = nextSchema;
      ds.ownSchema = unionSchemas([ds.ownSchema, nextSchema]);
      ds.schemaDirty = true;
      const own = ds.ownSchema;
      // Kept on local disk next to the WAL (so ingestion does not depend on the store being up) and
      // uploaded with the next flush, before any manifest that names files with these columns.
      ds.schemaWrite = ds.schemaWrite.catch(() => undefined).then(() => writeFileDurable(this.localSchemaFile(ds.meta), JSON.stringify(own)));
    }
    // Every append waits for the latest schema write, so no acknowledged row has an unrecorded column.
    await ds.schemaWrite;
    await ds.wal.append(lines, rows, rawBytes);
    ds.oldestUnflushedAt ??= Date.now();
    if (ds.wal.size.bytes >= this.settings.flushBytes && !ds.flushing && Date.now() >= ds.retryFlushAt) void this.flush(ds.meta.name).catch(() => undefined);
    return rows;
  }

  /** Turns everything acknowledged so far into Parquet; one flush per dataset at a time. */
  async flush(name: string): Promise<void> {
    const ds = this.datasets.get(name);
    if (!ds) return;
    while (ds.flushing) await ds.flushing.catch(() => undefined);
    ds.flushing = this.flushNow(ds).finally(() => (ds.flushing = undefined));
    return ds.flushing;
  }

  private async flushNow(ds: Dataset): Promise<void> {
    const segments = await ds.wal.seal();
    ds.oldestUnflushedAt = undefined;
    if (segments.length === 0) return;
    const started = Date.now();
    const seq = this.reserveSeq(segments[segments.length - 1].seq);
    const { generation, name, timeColumn } = ds.meta;
    const staging = path.join(this.settings.dataDir, 'tmp', `flush-${name}-${generation}-${seq}-${randomUUID().slice(0, 8)}`);
    try {
      const columns = Object.entries(ds.schema) as [string, ColumnType][];
      const written = await writeParquet(this.duck, {
        segmentPaths: segments.map((s) => s.path),
        columns,
        timeColumn,
        stagingDir: staging,
        filePrefix: `${generation}.${this.settings.nodeId}.${String(seq).padStart(12, '0')}`,
        zstdLevel: this.settings.zstdLevel,
        rowGroupRows: this.settings.rowGroupRows,
      });
      const add: FileEntry[] = [];
      for (const f of written) {
        const key = `${name}/${f.partition}/${path.basename(f.path)}`;
        await this.store.putFile(key, f.path);
        add.push({ key, rows: f.rows, bytes: f.bytes, minMs: f.minMs, maxMs: f.maxMs, columns: columns.map(([n]) => n), nodeId: this.settings.nodeId });
      }
      failpoint('flush-after-upload');
      if (ds.deleted) return;
      if (ds.schemaDirty) {
        ds.schemaDirty = false;
        await this.store.putBytes(schemaKey(ds.meta, this.settings.nodeId), JSON.stringify(ds.ownSchema)).catch((err) => {
          ds.schemaDirty = true;
          throw err;
        });
      }
      // Catalog and WAL change in the same tick: a query sees these rows in Parquet or in the WAL, never both.
      let removal: Promise<void> = Promise.resolve();
      await this.commitManifest(
        ds,
        seq,
        { add, remove: [], walSegments: segments.map((s) => s.seq), ingestedBytes: segments.reduce((sum, s) => sum + s.rawBytes, 0) },
        (m) => {
          failpoint('flush-after-manifest');
          removal = ds.wal.remove(m.walSegments);
        },
      );
      await removal;
      ds.flushFailures = 0;
      ds.retryFlushAt = 0;
      log.info('flushed', { dataset: name, rows: add.reduce((s, f) => s + f.rows, 0), files: add.length, ms: Date.now() - started });
    } catch (err) {
      ds.oldestUnflushedAt ??= Date.now();
      ds.flushFailures++;
      ds.retryFlushAt = Date.now() + Math.min(30_000, 500 * 2 ** Math.min(ds.flushFailures, 6));
      log.error('flush failed; will retry', { dataset: name, attempt: ds.flushFailures, retryInMs: ds.retryFlushAt - Date.now(), error: (err as Error).message });
      throw err;
    } finally {
      await fs.rm(staging, { recursive: true, force: true });
    }
  }

  /**
   * A consistent view for a query: Parquet files overlapping the range plus the sealed WAL segments
   * holding every acknowledged row not yet in Parquet. Held segments are not deleted until release.
   */
  async snapshot(name: string, startMs: number, endMs: number): Promise<Snapshot> {
    const ds = this.dataset(name);
    await ds.wal.seal();
    // No await between reading the catalog and the WAL: a flush swaps them in one tick.
    const files = ds.catalog.select(startMs, endMs);
    const segments = ds.wal.sealedSegments();
    const releaseSegments = ds.wal.retain(segments);
    try {
      const held = await this.store.acquire(files.map((f) => f.key));
      return {
        meta: ds.meta,
        schema: ds.schema,
        files: files.map((f, i) => ({ ...f, path: held.paths[i] })),
        segments,
        release: () => {
          releaseSegments();
          held.release();
        },
      };
    } catch (err) {
      releaseSegments();
      throw err;
    }
  }

  stats(name: string) {
    const ds = this.dataset(name);
    const wal = ds.wal.size;
    const totals = ds.catalog.totals();
    return {
      stream: name,
      time: new Date().toISOString(),
      ingestion: { count: totals.rows + wal.rows, size: ds.catalog.ingestedBytes + wal.rawBytes, format: 'json' },
      storage: { size: totals.bytes, format: 'parquet', files: totals.files },
      wal: { count: wal.rows, size: wal.bytes, segments: wal.segments },
    };
  }

  /**
   * Brings this worker up to date with the store: datasets created, deleted or re-created by other
   * workers, their catalog manifests and schemas. Runs every P_CATALOG_REFRESH, so queries never list
   * the store themselves.
   */
  async sync(): Promise<void> {
    const listedAt = Date.now();
    const listed = new Map<string, DatasetMeta>();
    for (const { key } of await this.store.list('.streams/')) {
      const body = await this.store.getBytes(key);
      if (!body) continue;
      const meta = JSON.parse(body.toString()) as DatasetMeta;
      listed.set(meta.name, meta);
    }
    for (const [name, ds] of [...this.datasets]) {
      const current = listed.get(name);
      if (current && current.generation === ds.meta.generation) {
        ds.meta = current; // retention may have changed
        continue;
      }
      // Created here after the listing was taken: the listing cannot know it yet.
      if (this.creating.has(name) || ds.loadedAt >= listedAt) continue;
      // Deleted (or deleted and re-created) elsewhere: drop what this worker still buffers for it,
      // so no late flush brings the old data back.
      log.info('dataset removed by another worker', { dataset: name, generation: ds.meta.generation });
      ds.deleted = true;
      this.deletedGenerations.add(ds.meta.generation);
      this.datasets.delete(name);
      await ds.wal.destroy();
    }
    for (const [name, meta] of listed) {
      if (!this.datasets.has(name) && !this.creating.has(name) && !this.deletedGenerations.has(meta.generation)) await this.load(meta);
    }
    for (const ds of this.datasets.values()) {
      await this.readManifests(ds.meta, ds.catalog);
      await this.refreshSchema(ds);
    }
  }

  /** Merges this worker's small files, per hour partition, into files of the target size. */
  async compact(name: string): Promise<number> {
    const ds = this.datasets.get(name);
    if (!ds || ds.compacting) return 0;
    let merged = 0;
    const work = (async () => {
      for (const group of planCompaction(ds.catalog.all(), this.settings.nodeId, this.settings.compactionTargetBytes)) {
        if (ds.deleted) return;
        await this.mergeGroup(ds, group);
        merged += group.length;
      }
    })();
    ds.compacting = work.finally(() => (ds.compacting = undefined));
    await ds.compacting;
    return merged;
  }

  private async mergeGroup(ds: Dataset, group: FileEntry[]): Promise<void> {
    const started = Date.now();
    const columns = Object.entries(ds.schema) as [string, ColumnType][];
    const seq = this.reserveSeq();
    const name = `${ds.meta.generation}.${this.settings.nodeId}.${String(seq).padStart(12, '0')}.compacted.parquet`;
    const staging = path.join(this.settings.dataDir, 'tmp', `compact-${randomUUID().slice(0, 8)}-${name}`);
    const release = await this.store.acquire(group.map((f) => f.key));
    try {
      const written = await mergeParquet(this.duck, {
        paths: release.paths,
        presentColumns: new Set(group.flatMap((f) => f.columns)),
        columns,
        timeColumn: ds.meta.timeColumn,
        target: staging,
        zstdLevel: this.settings.zstdLevel,
        rowGroupRows: this.settings.rowGroupRows,
      });
      const key = `${ds.meta.name}/${hourPartition(group[0].key)}/${name}`;
      await this.store.putFile(key, staging);
      failpoint('compaction-after-upload');
      if (ds.deleted) return;
      // One manifest adds the merged file and removes its inputs: readers switch atomically. The
      // inputs stay in storage for the grace period, for queries that picked them before.
      await this.commitManifest(ds, seq, {
        add: [{ key, rows: written.rows, bytes: written.bytes, minMs: written.minMs, maxMs: written.maxMs, columns: columns.map(([n]) => n), nodeId: this.settings.nodeId }],
        remove: group.map((f) => f.key),
        walSegments: [],
        ingestedBytes: 0,
      });
      failpoint('compaction-after-manifest');
      log.info('compacted', { dataset: ds.meta.name, files: group.length, rows: written.rows, bytes: written.bytes, ms: Date.now() - started });
    } finally {
      release.release();
      await fs.rm(staging, { force: true });
    }
  }

  async setRetention(name: string, rules: RetentionRule[]): Promise<DatasetMeta> {
    const ds = this.dataset(name);
    const meta = { ...ds.meta, retention: rules };
    await this.store.putBytes(metaKey(name), JSON.stringify(meta));
    ds.meta = meta;
    return meta;
  }

  /** Removes from the catalog every file entirely older than the dataset's retention. */
  async applyRetention(name: string, now = Date.now()): Promise<number> {
    const ds = this.datasets.get(name);
    const rule = ds?.meta.retention?.find((r) => r.action === 'delete');
    if (!ds || !rule) return 0;
    const cutoff = now - parseDurationMs(rule.duration);
    const expired = ds.catalog.all().filter((f) => f.maxMs < cutoff);
    if (!expired.length) return 0;
    await this.commitManifest(ds, this.reserveSeq(), { add: [], remove: expired.map((f) => f.key), walSegments: [], ingestedBytes: 0 });
    log.info('retention removed files', { dataset: name, files: expired.length, olderThan: new Date(cutoff).toISOString() });
    return expired.length;
  }

  /** Deletes objects removed from the catalog once their grace period is over. */
  private async collectGarbage(now = Date.now()): Promise<void> {
    const due = this.pendingDeletes.filter((d) => d.at <= now);
    if (!due.length) return;
    this.pendingDeletes = this.pendingDeletes.filter((d) => d.at > now);
    await this.store.delete(due.map((d) => d.key)).catch((err) => {
      this.pendingDeletes.push(...due);
      log.warn('deleting removed files failed; will retry', { error: (err as Error).message });
    });
  }

  /** Background work: flush on the time threshold, sync with the store, compaction, retention, GC. */
  start(): void {
    const every = (ms: number, fn: () => Promise<void> | void) => {
      let running = false;
      const t = setInterval(async () => {
        if (running) return;
        running = true;
        try {
          await fn();
        } catch (err) {
          log.warn('background task failed', { error: (err as Error).message });
        } finally {
          running = false;
        }
      }, ms);
      t.unref();
      this.timers.push(t);
    };
    every(Math.min(1000, this.settings.flushIntervalMs), () => {
      const now = Date.now();
      for (const ds of this.datasets.values()) {
        const due = ds.oldestUnflushedAt !== undefined && now - ds.oldestUnflushedAt >= this.settings.flushIntervalMs;
        if (due && !ds.flushing && now >= ds.retryFlushAt) void this.flush(ds.meta.name).catch(() => undefined);
      }
    });
    every(this.settings.catalogRefreshMs, () => this.sync());
    every(this.settings.compactionIntervalMs, async () => {
      for (const name of [...this.datasets.keys()]) {
        await this.applyRetention(name);
        await this.compact(name);
      }
    });
    every(Math.min(5000, this.settings.deleteGraceMs), () => this.collectGarbage());
  }

  /** Graceful shutdown: flush everything, close the logs. */
  async shutdown(): Promise<void> {
    for (const t of this.timers) clearInterval(t);
    for (const ds of this.datasets.values()) {
      await ds.compacting?.catch(() => undefined);
      await this.flush(ds.meta.name).catch((err) => log.error('flush on shutdown failed; data stays in the WAL', { dataset: ds.meta.name, error: err as Error }));
      await ds.wal.close();
    }
  }
}
