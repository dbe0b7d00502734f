import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import type { DuckDBInstance } from '@duckdb/node-api';
import { parseDurationMs } from '../config.ts';
import type { ColumnType } from '../model.ts';
import { log } from '../log.ts';
import { encodeMeta, isCorruptObject, type DatasetKind, type DatasetMeta, type RetentionRule } from './codec.ts';
import { mergeGroup, planCompaction } from './compaction.ts';
import type { Dataset, Snapshot, StorageContext, StorageSettings } from './dataset.ts';
import { flushDataset } from './flush.ts';
import { GarbageCollector } from './gc.ts';
import { listMetas, openDataset, readMeta } from './load.ts';
import { metaKey, quarantineDir, walDir, walRoot } from './layout.ts';
import { Manifests } from './manifests.ts';
import { isMissingObject, type ObjectStore } from './objectStore.ts';
import { Quarantine, type QuarantinedObject } from './quarantine.ts';
import { planSchema, type Schema, type TypeSummary } from './schema.ts';
import { evolveSchema, refreshSchema } from './schemaState.ts';
import { takeSnapshot } from './snapshot.ts';
import { invalidInput, conflict, unavailable, notFound } from '../errors.ts';
import type { DatasetStats, Totals } from './stats.ts';

export type { DatasetKind, DatasetMeta, DatasetStats, RetentionRule, Snapshot, StorageSettings, Totals };
export { splitByRows } from './stats.ts';
export { metaKey };

const NAME_RE = /^[A-Za-z][A-Za-z0-9_-]*$/;
export const MAX_NAME_LENGTH = 64;
/** A miss looks in the store at most this often (a client naming unknown datasets costs one LIST per period). */
const DISCOVER_MIN_INTERVAL_MS = 250;

/**
 * The datasets this worker serves: creation (exactly once across workers, by a conditional write of
 * the metadata object), deletion, ingestion into the WAL, snapshots for queries, and the background
 * work (flush, catalog refresh, compaction, retention, garbage collection). The parts live in their
 * own modules: layout (keys), codec (stored objects), manifests, flush, schemaState, walSalvage, gc.
 */
export class DatasetRegistry {
  private datasets = new Map<string, Dataset>();
  private creating = new Map<string, Promise<DatasetMeta>>();
  private loading = new Map<string, Promise<Dataset>>();
  private reserved = new Set<string>();
  private timers: NodeJS.Timeout[] = [];
  /** Generations deleted here: a listing of the store taken before the delete must not bring one back. */
  private deletedGenerations = new Set<string>();
  private discovering?: Promise<void>;
  private discoveredAt = 0;
  readonly quarantine = new Quarantine();
  private readonly ctx: StorageContext;
  private readonly gc: GarbageCollector;
  private readonly manifests: Manifests;

  constructor(
    readonly store: ObjectStore,
    duck: DuckDBInstance,
    readonly settings: StorageSettings,
  ) {
    this.ctx = { store, duck, settings, quarantine: this.quarantine };
    this.gc = new GarbageCollector(this.ctx);
    this.manifests = new Manifests(this.ctx, (keys, at) => this.gc.schedule(keys, at));
  }

  /** Loads every dataset from the store and recovers this worker's WAL. */
  async init(reservedWords: string[]): Promise<void> {
    this.reserved = new Set(reservedWords.map((w) => w.toLowerCase()));
    const { metas, damaged } = await listMetas(this.ctx);
    for (const meta of metas.values()) await this.loadSafely(meta);
    // WAL directories of datasets (or generations) that no longer exist are leftovers of a delete; a
    // crash during a late flush may also have left objects of that generation in the store.
    const root = walRoot(this.settings.dataDir);
    for (const name of await fs.readdir(root).catch(() => [] as string[])) {
      if (damaged.has(name)) continue; // kept until the metadata can be read again
      for (const gen of await fs.readdir(path.join(root, name)).catch(() => [] as string[])) {
        const ds = this.datasets.get(name);
        if (ds && ds.meta.generation === gen) continue;
        await fs.rm(path.join(root, name, gen), { recursive: true, force: true });
        if (metas.get(name)?.generation !== gen) await this.gc.purgeGeneration(name, gen).catch((err) => log.warn('purge failed', { dataset: name, error: (err as Error).message }));
      }
    }
  }

  /** Loads a dataset; a failure is logged and the dataset left out, never the whole service. */
  private async loadSafely(meta: DatasetMeta): Promise<void> {
    try {
      await this.load(meta);
    } catch (err) {
      log.error('dataset could not be loaded; serving the others', { dataset: meta.name, error: err as Error });
    }
  }

  /**
   * Opens a dataset once: concurrent loads of one name (a refresh and a lookup on a miss) share one
   * opening. Two openings would each own a WAL on the same directory, and one would overwrite the
   * other's segments.
   */
  private load(meta: DatasetMeta): Promise<Dataset> {
    const loaded = this.datasets.get(meta.name);
    if (loaded && loaded.meta.generation === meta.generation) return Promise.resolve(loaded);
    const inflight = this.loading.get(meta.name);
    if (inflight) return inflight.then((ds) => (ds.meta.generation === meta.generation ? ds : this.load(meta)));
    const opening = openDataset(this.ctx, this.manifests, meta)
      .then((ds) => {
        this.datasets.set(meta.name, ds);
        return ds;
      })
      .finally(() => this.loading.delete(meta.name));
    this.loading.set(meta.name, opening);
    return opening;
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

  /** Finds a dataset this worker knows; SQL identifiers are case-insensitive, so lookups from SQL are too. */
  find(name: string, caseInsensitive = false): DatasetMeta | undefined {
    const exact = this.datasets.get(name);
    if (exact || !caseInsensitive) return exact?.meta;
    const lower = name.toLowerCase();
    for (const d of this.datasets.values()) if (d.meta.name.toLowerCase() === lower) return d.meta;
    return undefined;
  }

  /**
   * Like find, but a miss looks in the store first: another worker may have created the dataset since
   * the last catalog refresh. Use it wherever a miss would answer 404.
   */
  async resolve(name: string, caseInsensitive = false): Promise<DatasetMeta | undefined> {
    const have = this.find(name, caseInsensitive);
    if (have) return have;
    await this.discover();
    return this.find(name, caseInsensitive);
  }

  /** `resolve`, or notFound. */
  async require(name: string): Promise<DatasetMeta> {
    const meta = await this.resolve(name);
    if (!meta) throw notFound(`dataset "${name}" does not exist`);
    return meta;
  }

  /** Loads datasets created elsewhere since the last refresh (one listing shared by concurrent misses). */
  private discover(): Promise<void> {
    this.discovering ??= (async () => {
      const wait = this.discoveredAt + DISCOVER_MIN_INTERVAL_MS - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      try {
        const { metas } = await listMetas(this.ctx);
        for (const meta of metas.values()) {
          if (!this.datasets.has(meta.name) && !this.creating.has(meta.name) && !this.deletedGenerations.has(meta.generation)) await this.loadSafely(meta);
        }
      } finally {
        this.discoveredAt = Date.now();
        this.discovering = undefined;
      }
    })();
    return this.discovering;
  }

  private dataset(name: string): Dataset {
    const ds = this.datasets.get(name);
    if (!ds) throw notFound(`dataset "${name}" does not exist`);
    return ds;
  }

  /**
   * Creates a dataset; a second create of the same name returns the existing one (created: false).
   * Across workers the metadata object is written only if absent (a conditional write), so of several
   * workers creating one dataset at once exactly one generation wins and every other adopts it: rows
   * each acknowledges land in that one generation.
   */
  async create(name: string, kind: DatasetKind, timeColumn: string): Promise<{ meta: DatasetMeta; created: boolean }> {
    this.validateName(name);
    // No await unless a creation is under way: from here to `creating.set` below nothing may interleave,
    // or two requests creating the same new name would see each other as a case clash.
    const pending = this.creating.get(name);
    const existing = this.datasets.get(name)?.meta ?? (pending ? await pending : undefined);
    if (existing) return { meta: existing, created: false };
    const clash = this.find(name, true)?.name ?? [...this.creating.keys()].find((n) => n.toLowerCase() === name.toLowerCase());
    if (clash) throw conflict(`dataset "${clash}" already exists (names are case-insensitive)`);
    let created = false;
    const work = (async () => {
      for (let attempt = 0; attempt < 5; attempt++) {
        const stored = await readMeta(this.ctx, name);
        if (stored) return (await this.load(stored)).meta;
        const meta: DatasetMeta = { name, generation: randomUUID().replaceAll('-', '').slice(0, 16), kind, timeColumn, createdAt: new Date().toISOString() };
        if (await this.store.putIfAbsent(metaKey(name), encodeMeta(meta))) {
          created = true;
          await this.load(meta);
          log.info('dataset created', { dataset: name, kind, generation: meta.generation });
          return meta;
        }
        // Another worker created it first; read and adopt it (unless it was deleted again meanwhile).
      }
      throw unavailable(`dataset "${name}" is being created and deleted concurrently; retry`, 1);
    })();
    this.creating.set(name, work);
    try {
      return { meta: await work, created };
    } finally {
      this.creating.delete(name);
    }
  }

  /**
   * Deletes the dataset everywhere: the metadata object first (from then on no worker loads it and
   * every worker drops it at its next refresh), then this worker's WAL, then every object of the
   * generation (never those of a newer generation created meanwhile under the same name).
   */
  async delete(name: string): Promise<void> {
    await this.require(name);
    const ds = this.dataset(name);
    await this.store.delete([metaKey(name)]);
    await this.drop(ds, 'deleted');
  }

  /** Forgets a deleted generation here and removes what is left of it, once this worker's own work on it is over. */
  private async drop(ds: Dataset, why: string): Promise<void> {
    const { name, generation } = ds.meta;
    ds.deleted = true;
    this.deletedGenerations.add(generation);
    if (this.datasets.get(name) === ds) this.datasets.delete(name);
    this.quarantine.forgetDataset(name);
    await ds.wal.destroy();
    await fs.rm(walDir(this.settings.dataDir, name, generation), { recursive: true, force: true });
    await fs.rm(path.join(quarantineDir(this.settings.dataDir), 'wal', name, generation), { recursive: true, force: true });
    await ds.flushing?.catch(() => undefined);
    await ds.compacting?.catch(() => undefined);
    await this.gc.purgeGeneration(name, generation);
    log.info(`dataset ${why}`, { dataset: name, generation });
  }

  schemaOf(name: string): { meta: DatasetMeta; schema: Record<string, ColumnType> } {
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
    batch: { lines: string | Uint8Array; rows: number; types: TypeSummary; fixed: string[] },
    rawBytes: number,
  ): Promise<{ count: number } | { conflict: string; schema: Schema }> {
    const ds = this.dataset(name);
    if (batch.rows === 0) return { count: 0 };
    const plan = planSchema(ds.schema, batch.types, this.settings.maxColumns, new Set(batch.fixed));
    if (plan.conflict !== undefined) return { conflict: plan.conflict, schema: ds.schema };
    return { count: await this.append(ds, plan.next, batch.lines, batch.rows, rawBytes) };
  }

  private async append(ds: Dataset, nextSchema: Record<string, ColumnType> | undefined, lines: string | Uint8Array, rows: number, rawBytes: number): Promise<number> {
    if (ds.wal.size.bytes > this.settings.walMaxBytes) {
      throw unavailable('write-ahead log is full (storage is behind); retry later', 5);
    }
    // No acknowledged row may have a column the durable schema lacks.
    if (nextSchema) await evolveSchema(this.ctx, ds, nextSchema);
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
    ds.flushing = flushDataset(this.ctx, this.manifests, ds).finally(() => (ds.flushing = undefined));
    return ds.flushing;
  }

  /**
   * A consistent view for a query (see snapshot.ts): notFound for a dataset deleted meanwhile,
   * `unavailable` while the store cannot be reached, damaged files set aside.
   */
  async snapshot(name: string, startMs: number, endMs: number): Promise<Snapshot> {
    await this.require(name);
    return takeSnapshot(this.ctx, () => this.dataset(name), startMs, endMs, (ds) => this.stillCurrent(ds));
  }

  /** Is this generation still the dataset's current one in the store? If not, it is dropped here now. */
  private async stillCurrent(ds: Dataset): Promise<boolean> {
    const stored = await readMeta(this.ctx, ds.meta.name).catch((err) => {
      if (isCorruptObject(err)) return ds.meta;
      throw err;
    });
    if (stored?.generation === ds.meta.generation) return true;
    void this.drop(ds, 'removed by another worker').catch((err) => log.warn('dropping a removed dataset failed', { dataset: ds.meta.name, error: (err as Error).message }));
    return false;
  }

  /**
   * Counts and sizes of a dataset (numbers only; the HTTP layer shapes them). `current` is what is
   * stored now (Parquet files plus the WAL), `deleted` what retention removed; lifetime is their sum.
   */
  stats(name: string): DatasetStats {
    const ds = this.dataset(name);
    const wal = ds.wal.size;
    const files = ds.catalog.totals();
    const deleted = ds.catalog.deletedTotals();
    return {
      meta: ds.meta,
      current: {
        rows: files.rows + wal.rows,
        // ingestedBytes covers every flush ever applied, deleted files included.
        rawBytes: ds.catalog.ingestedBytes - deleted.rawBytes + wal.rawBytes,
        storageBytes: files.bytes,
        files: files.files,
      },
      deleted: { rows: deleted.rows, rawBytes: deleted.rawBytes, storageBytes: deleted.bytes, files: deleted.files },
      wal: { rows: wal.rows, bytes: wal.bytes, rawBytes: wal.rawBytes, segments: wal.segments },
      timeRange: ds.catalog.timeRange(),
      quarantined: this.quarantine.list(name),
    };
  }

  /** What readiness reports to a caller with a key: damaged objects set aside, by key. */
  health(): { quarantined: QuarantinedObject[] } {
    return { quarantined: this.quarantine.list() };
  }

  /**
   * What one day (UTC, `YYYY-MM-DD`) holds: files of that date partition (by the time column), plus
   * the unflushed WAL rows when the day is today (they are at most P_FLUSH_INTERVAL old).
   */
  statsForDate(name: string, date: string, now = Date.now()): Totals {
    const ds = this.dataset(name);
    const files = ds.catalog.totals(date);
    const today = new Date(now).toISOString().slice(0, 10) === date;
    const wal = today ? ds.wal.size : { rows: 0, rawBytes: 0 };
    return { rows: files.rows + wal.rows, rawBytes: files.rawBytes + wal.rawBytes, storageBytes: files.bytes, files: files.files };
  }

  /**
   * Brings this worker up to date with the store: datasets created, deleted or re-created by other
   * workers, their catalog manifests and schemas. Runs every P_CATALOG_REFRESH, so queries never list
   * the store themselves. One dataset's failure never stops the refresh of the others.
   */
  async sync(): Promise<void> {
    const listedAt = Date.now();
    const { metas: listed, damaged } = await listMetas(this.ctx);
    for (const [name, ds] of [...this.datasets]) {
      const current = listed.get(name);
      if (current && current.generation === ds.meta.generation) {
        ds.meta = current; // retention may have changed
        continue;
      }
      // Unreadable metadata is not a delete; created here after the listing was taken is not either.
      if (damaged.has(name) || this.creating.has(name) || ds.loadedAt >= listedAt) continue;
      // Deleted (or deleted and re-created) elsewhere: what this worker still buffers for it goes
      // with it (README "Deletion across workers"), and so does anything its late flush uploaded.
      await this.drop(ds, 'removed by another worker').catch((err) => log.warn('dropping a removed dataset failed', { dataset: name, error: (err as Error).message }));
    }
    for (const [name, meta] of listed) {
      if (!this.datasets.has(name) && !this.creating.has(name) && !this.deletedGenerations.has(meta.generation)) await this.loadSafely(meta);
    }
    for (const ds of [...this.datasets.values()]) {
      try {
        await this.manifests.read(ds.meta, ds.catalog);
        await refreshSchema(this.ctx, ds);
      } catch (err) {
        log.warn('catalog refresh of a dataset failed; will retry', { dataset: ds.meta.name, error: (err as Error).message });
      }
    }
  }

  /** Removes objects of generations no dataset has any more (see GarbageCollector.sweep). */
  async sweepOrphans(): Promise<number> {
    const { metas, damaged } = await listMetas(this.ctx);
    return this.gc.sweep(new Map([...metas].map(([n, m]) => [n, m.generation])), damaged);
  }

  /** Merges this worker's small files, per hour partition, into files of the target size. */
  async compact(name: string): Promise<number> {
    const ds = this.datasets.get(name);
    if (!ds || ds.compacting) return 0;
    let merged = 0;
    const work = (async () => {
      const files = ds.catalog.all().filter((f) => !this.quarantine.has(f.key));
      for (const group of planCompaction(files, this.settings.nodeId, this.settings.compactionTargetBytes)) {
        if (ds.deleted) return;
        try {
          await mergeGroup(this.ctx, this.manifests, ds, group);
          merged += group.length;
        } catch (err) {
          if (!isMissingObject(err)) throw err;
          this.quarantine.add({ key: err.key, kind: 'parquet', dataset: name, reason: 'listed in the catalog but missing from the store' });
        }
      }
    })();
    ds.compacting = work.finally(() => (ds.compacting = undefined));
    await ds.compacting;
    return merged;
  }

  async setRetention(name: string, rules: RetentionRule[]): Promise<DatasetMeta> {
    await this.require(name);
    const ds = this.dataset(name);
    const meta = { ...ds.meta, retention: rules };
    await this.store.putBytes(metaKey(name), encodeMeta(meta));
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
    await this.manifests.commit(ds, this.manifests.reserve(), {
      add: [],
      remove: expired.map((f) => f.key),
      walSegments: [],
      ingestedBytes: 0,
      deleted: expired.map((f) => ({ key: f.key, rows: f.rows, bytes: f.bytes, rawBytes: f.rawBytes ?? 0 })),
    });
    log.info('retention removed files', { dataset: name, files: expired.length, olderThan: new Date(cutoff).toISOString() });
    return expired.length;
  }

  /** Background work: flush on the time threshold, sync with the store, compaction, retention, GC. */
  start(): void {
    const every = (ms: number, fn: () => Promise<unknown> | void) => {
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
        try {
          await this.applyRetention(name);
          await this.compact(name);
        } catch (err) {
          log.warn('compaction or retention failed; will retry', { dataset: name, error: (err as Error).message });
        }
      }
    });
    every(Math.min(5000, this.settings.deleteGraceMs), () => this.gc.collect());
    every(this.settings.orphanSweepMs, () => this.sweepOrphans());
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
