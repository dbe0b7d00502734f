import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { conflict, invalidInput, notFound, unavailable } from '../../errors.ts';
import { TIME_COLUMN } from '../../model.ts';
import { log } from '../../log.ts';
import { encodeMeta, isCorruptObject, type DatasetKind, type DatasetMeta } from '../codec.ts';
import type { Dataset, StorageContext } from './dataset.ts';
import { validateDatasetName } from './datasetName.ts';
import type { GarbageCollector } from '../files/gc.ts';
import { metaKey, quarantineDir, walDir, walRoot } from '../layout.ts';
import { listMetas, openDataset, readMeta } from './load.ts';
import type { Manifests } from '../manifests.ts';
import { refreshSchema } from './schemaState.ts';

/** A JSON dataset's time field (X-P-Time-Partition) and its limit in days (X-P-Time-Partition-Limit). */
export interface TimeField {
  field: string;
  limitDays?: number;
}

/** A miss looks in the store at most this often (a client naming unknown datasets costs one LIST per period). */
const DISCOVER_MIN_INTERVAL_MS = 250;

/**
 * The datasets this worker serves and their lifecycle across workers: loading from the store,
 * creation (exactly once across workers, by a conditional write of the metadata object), deletion,
 * discovery of datasets created elsewhere, and the periodic sync that drops what other workers
 * deleted. Nothing here reads or writes rows; the engine does that on the `Dataset`s this hands out.
 */
export class DatasetSet {
  private datasets = new Map<string, Dataset>();
  private creating = new Map<string, Promise<DatasetMeta>>();
  private loading = new Map<string, Promise<Dataset>>();
  private reserved = new Set<string>();
  /** Generations deleted here: a listing of the store taken before the delete must not bring one back. */
  private deletedGenerations = new Set<string>();
  private discovering?: Promise<void>;
  private discoveredAt = 0;

  constructor(
    private readonly ctx: StorageContext,
    private readonly manifests: Manifests,
    private readonly gc: GarbageCollector,
  ) {}

  /** Loads every dataset from the store and recovers this worker's WAL. */
  async init(reservedWords: string[]): Promise<void> {
    this.reserved = new Set(reservedWords.map((w) => w.toLowerCase()));
    const { metas, damaged } = await listMetas(this.ctx);
    for (const meta of metas.values()) await this.loadSafely(meta);
    // WAL directories of datasets (or generations) that no longer exist are leftovers of a delete; a
    // crash during a late flush may also have left objects of that generation in the store.
    const root = walRoot(this.ctx.settings.dataDir);
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

  all(): Dataset[] {
    return [...this.datasets.values()];
  }

  /** The dataset of that exact name, if this worker holds it (no store access). */
  get(name: string): Dataset | undefined {
    return this.datasets.get(name);
  }

  /** `get`, or notFound. */
  dataset(name: string): Dataset {
    const ds = this.datasets.get(name);
    if (!ds) throw notFound(`dataset "${name}" does not exist`);
    return ds;
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
        for (const meta of metas.values()) if (this.isNew(meta)) await this.loadSafely(meta);
      } finally {
        this.discoveredAt = Date.now();
        this.discovering = undefined;
      }
    })();
    return this.discovering;
  }

  private isNew(meta: DatasetMeta): boolean {
    return !this.datasets.has(meta.name) && !this.creating.has(meta.name) && !this.deletedGenerations.has(meta.generation);
  }

  /**
   * Creates a dataset; a second create of the same name returns the existing one (created: false).
   * Across workers the metadata object is written only if absent (a conditional write), so of several
   * workers creating one dataset at once exactly one generation wins and every other adopts it: rows
   * each acknowledges land in that one generation.
   */
  async create(name: string, kind: DatasetKind, time?: TimeField): Promise<{ meta: DatasetMeta; created: boolean }> {
    validateDatasetName(name, this.reserved);
    const result = await this.createOnce(name, kind, time);
    // A time field is chosen once: asking for another one is refused, asking for the same one is "exists".
    if (time && result.meta.timeColumn !== time.field) {
      throw invalidInput(`dataset "${name}" exists with time column "${result.meta.timeColumn}"; a dataset's time partition cannot change`);
    }
    return result;
  }

  private async createOnce(name: string, kind: DatasetKind, time: TimeField | undefined): Promise<{ meta: DatasetMeta; created: boolean }> {
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
        const meta: DatasetMeta = {
          name,
          generation: randomUUID().replaceAll('-', '').slice(0, 16),
          kind,
          // The kind's own time column unless the dataset was created with a time field of its events.
          timeColumn: time?.field ?? TIME_COLUMN[kind],
          ...(time?.limitDays !== undefined ? { timeLimitDays: time.limitDays } : {}),
          createdAt: new Date().toISOString(),
        };
        if (await this.ctx.store.putIfAbsent(metaKey(name), encodeMeta(meta))) {
          created = true;
          await this.load(meta);
          log.info('dataset created', { dataset: name, kind, generation: meta.generation, timeColumn: meta.timeColumn });
          return meta;
        }
        // Another worker created it first; read and adopt it (unless it was deleted again meanwhile).
      }
      throw unavailable(`dataset "${name}" is being created and deleted concurrently; retry`, 1);
    })();
    this.creating.set(name, work);
    try {
      return { meta: await work, created };
    } catch (err) {
      // A full local disk is temporary, as it is for ingestion into existing datasets: 503, retry later.
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOSPC' || code === 'EDQUOT') {
        log.error('dataset creation failed: the local disk is full', { dataset: name, error: err as Error });
        throw unavailable(`dataset "${name}" could not be created: the local disk is full; retry later`, 10);
      }
      throw err;
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
    await this.ctx.store.delete([metaKey(name)]);
    await this.drop(ds, 'deleted');
  }

  /** Forgets a deleted generation here and removes what is left of it, once this worker's own work on it is over. */
  private async drop(ds: Dataset, why: string): Promise<void> {
    const { name, generation } = ds.meta;
    const { dataDir } = this.ctx.settings;
    ds.lifecycle.markDeleted();
    this.deletedGenerations.add(generation);
    if (this.datasets.get(name) === ds) this.datasets.delete(name);
    this.ctx.quarantine.forgetDataset(name);
    await ds.wal.destroy();
    await fs.rm(walDir(dataDir, name, generation), { recursive: true, force: true });
    await fs.rm(path.join(quarantineDir(dataDir), 'wal', name, generation), { recursive: true, force: true });
    await ds.flushing?.catch(() => undefined);
    await ds.compacting?.catch(() => undefined);
    await this.gc.purgeGeneration(name, generation);
    log.info(`dataset ${why}`, { dataset: name, generation });
  }

  private dropLater(ds: Dataset): void {
    void this.drop(ds, 'removed by another worker').catch((err) => log.warn('dropping a removed dataset failed', { dataset: ds.meta.name, error: (err as Error).message }));
  }

  /** Is this generation still the dataset's current one in the store? If not, it is dropped here now. */
  async stillCurrent(ds: Dataset): Promise<boolean> {
    const stored = await readMeta(this.ctx, ds.meta.name).catch((err) => {
      if (isCorruptObject(err)) return ds.meta;
      throw err;
    });
    if (stored?.generation === ds.meta.generation) return true;
    this.dropLater(ds);
    return false;
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
        ds.lifecycle.updated(current); // retention may have changed
        continue;
      }
      // Unreadable metadata is not a delete; created here after the listing was taken is not either.
      if (damaged.has(name) || this.creating.has(name) || ds.loadedAt >= listedAt) continue;
      // Deleted (or deleted and re-created) elsewhere: what this worker still buffers for it goes
      // with it (docs/scale-out.md "Deletion across workers"), and so does anything its late flush uploaded.
      await this.drop(ds, 'removed by another worker').catch((err) => log.warn('dropping a removed dataset failed', { dataset: name, error: (err as Error).message }));
    }
    for (const meta of listed.values()) if (this.isNew(meta)) await this.loadSafely(meta);
    for (const ds of this.all()) {
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
}
