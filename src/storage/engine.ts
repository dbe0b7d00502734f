import { unavailable } from '../errors.ts';
import type { DuckDBSource } from '../duckdb.ts';
import { log } from '../log.ts';
import type { ColumnType, TimeRange } from '../model.ts';
import { encodeMeta, type DatasetKind, type DatasetMeta, type RetentionRule } from './codec.ts';
import { compactDataset } from './files/compaction.ts';
import type { Dataset, Snapshot, StorageContext, StorageSettings } from './dataset/dataset.ts';
import { DatasetSet, type TimeField } from './dataset/datasetSet.ts';
import { DiskGuard } from './diskSpace.ts';
import { flushDataset, inTurn } from './files/flush.ts';
import { GarbageCollector } from './files/gc.ts';
import { IcebergPublisher } from './iceberg/publisher.ts';
import type { TableMetadata } from './iceberg/metadata.ts';
import { metaKey, seriesIndexKey } from './layout.ts';
import { Manifests } from './manifests.ts';
import { MetricMetadataStore, type IncomingFamily, type MetricFamilyMeta } from './metricMetadata.ts';
import type { ObjectStore } from './objects/objectStore.ts';
import { Quarantine, type QuarantinedObject } from './files/quarantine.ts';
import { applyRetention } from './files/retention.ts';
import { Scheduler } from './scheduler.ts';
import { planSchema, type Schema, type TypeSummary } from './dataset/schema.ts';
import { evolveSchema } from './dataset/schemaState.ts';
import { takeSnapshot } from './snapshot.ts';
import { indexUsable, seriesIndexColumns } from './files/seriesIndex.ts';
import type { FileEntry } from './catalog.ts';
import { datasetStats, dateTotals, type DatasetStats, type Totals } from './stats.ts';

export type { DatasetKind, DatasetMeta, DatasetStats, IncomingFamily, MetricFamilyMeta, RetentionRule, Snapshot, StorageSettings, TimeField, Totals };

/** A batch of rows an ingest worker serialised as WAL lines, placed against the schema it was given. */
export interface SerializedRows {
  /** UTF-8 bytes when they come from an ingest worker (transferred, not copied). */
  lines: string | Uint8Array;
  rows: number;
  types: TypeSummary;
  /** Columns whose type the batch fixed (they may not be widened by it). */
  fixed: string[];
  /** The rows' range in the dataset's time column, when the ingest side knows it (see TimeRange). */
  timeRange?: TimeRange;
}

/**
 * The storage engine: the one facade the rest of the service uses. Datasets (their lifecycle across
 * workers lives in DatasetSet), the one ingest sink (`append`), consistent snapshots for queries,
 * stats as numbers, and the background work (flush, sync, compaction, retention, garbage collection)
 * run by one scheduler. Each concern is its own module; this file only wires them together.
 */
export class StorageEngine {
  readonly quarantine = new Quarantine();
  private readonly ctx: StorageContext;
  private readonly gc: GarbageCollector;
  private readonly manifests: Manifests;
  private readonly datasets: DatasetSet;
  private readonly scheduler = new Scheduler();
  private readonly metricMetadata: MetricMetadataStore;
  /** Flushes of every dataset and compaction's merges, one at a time (see inTurn). */
  private readonly flushTurn = inTurn();
  /** Shutting down: compaction starts no further merge. */
  private closing = false;
  /** Free space kept for flushes (see diskSpace.ts). */
  private readonly disk: DiskGuard;
  /** The Iceberg publisher, unless P_ICEBERG=off. */
  private readonly iceberg?: IcebergPublisher;

  constructor(
    readonly store: ObjectStore,
    duck: DuckDBSource,
    readonly settings: StorageSettings,
  ) {
    this.ctx = { store, duck, settings, quarantine: this.quarantine };
    this.gc = new GarbageCollector(this.ctx);
    if (settings.iceberg) {
      const iceberg = new IcebergPublisher(this.ctx, settings.iceberg);
      this.iceberg = iceberg;
      this.gc.keep = (key) => iceberg.referenced(key);
      // Files this worker writes need no footer read to be published: their types are known.
      this.ctx.written = (key, types) => iceberg.knowTypes(key, types);
    }
    // A removed file's series index goes with it (deleting one a file never had is harmless).
    this.manifests = new Manifests(this.ctx, (keys, at) => this.gc.schedule([...keys, ...keys.map(seriesIndexKey)], at));
    this.datasets = new DatasetSet(this.ctx, this.manifests, this.gc);
    this.metricMetadata = new MetricMetadataStore(this.ctx);
    this.disk = new DiskGuard(settings.dataDir, settings.diskReserveBytes, settings.flushBytes, () => {
      for (const ds of this.datasets.all()) {
        if (ds.wal.size.rows === 0) continue;
        ds.flushState.retryNow();
        this.flushSoon(ds);
      }
    });
  }

  /** Loads every dataset from the store and recovers this worker's WAL. */
  async init(reservedWords: string[]): Promise<void> {
    await this.disk.refresh();
    await this.datasets.init(reservedWords);
  }

  list(): DatasetMeta[] {
    return this.datasets.all().map((d) => d.meta).sort((a, b) => a.name.localeCompare(b.name));
  }

  /** A dataset this worker knows, without asking the store (SQL lookups are case-insensitive). */
  find(name: string, caseInsensitive = false): DatasetMeta | undefined {
    return this.datasets.find(name, caseInsensitive);
  }

  /** Like find, but a miss looks in the store first. Use it wherever a miss would answer 404. */
  resolve(name: string, caseInsensitive = false): Promise<DatasetMeta | undefined> {
    return this.datasets.resolve(name, caseInsensitive);
  }

  /** `resolve`, or notFound. */
  require(name: string): Promise<DatasetMeta> {
    return this.datasets.require(name);
  }

  /**
   * Creates a dataset (or finds it: created false). Its time column is the kind's own, or for a JSON
   * dataset the time field of its events when one is given; it never changes.
   */
  create(name: string, kind: DatasetKind, time?: TimeField): Promise<{ meta: DatasetMeta; created: boolean }> {
    return this.datasets.create(name, kind, time);
  }

  delete(name: string): Promise<void> {
    return this.datasets.delete(name);
  }

  schemaOf(name: string): { meta: DatasetMeta; schema: Record<string, ColumnType> } {
    const ds = this.datasets.dataset(name);
    return { meta: ds.meta, schema: ds.schema };
  }

  /**
   * The one ingest sink. Stores rows already serialised as WAL lines by an ingest worker, which placed
   * every value against the schema as it was when the job started. If the schema has changed since in
   * a way the batch does not fit (another request added the same new column with another type, or
   * reached P_MAX_COLUMNS), nothing is stored and the current schema comes back: the caller has the
   * batch placed again. Otherwise the schema evolves (persisted before anything that depends on it is
   * acknowledged) and the lines are appended; resolves once they are durable.
   */
  async append(name: string, batch: SerializedRows, rawBytes: number): Promise<{ count: number } | { conflict: string; schema: Schema }> {
    const ds = this.datasets.dataset(name);
    if (batch.rows === 0) return { count: 0 };
    const plan = planSchema(ds.schema, batch.types, this.settings.maxColumns, new Set(batch.fixed));
    if (plan.conflict !== undefined) return { conflict: plan.conflict, schema: ds.schema };
    if (ds.wal.size.bytes > this.settings.walMaxBytes) {
      throw unavailable('write-ahead log is full (storage is behind); retry later', 5);
    }
    const bytes = typeof batch.lines === 'string' ? Buffer.byteLength(batch.lines) : batch.lines.byteLength;
    try {
      this.disk.admit(bytes);
    } catch (err) {
      // The WAL is what a flush turns into Parquet and then deletes: flushing is how the room comes back.
      for (const d of this.datasets.all()) if (d.wal.size.rows > 0) this.flushSoon(d);
      throw err;
    }
    // No acknowledged row may have a column the durable schema lacks.
    if (plan.next) await evolveSchema(this.ctx, ds, plan.next);
    this.disk.appended(bytes);
    await ds.wal.append(batch.lines, batch.rows, rawBytes, batch.timeRange);
    ds.flushState.appended();
    if (ds.wal.size.bytes >= this.settings.flushBytes) this.flushSoon(ds);
    return { count: batch.rows };
  }

  /**
   * Remembers remote-write metric metadata of a dataset (see metricMetadata.ts); resolves once it is in
   * the store. `dropped`: families past the bounds, not remembered.
   */
  async rememberMetricMetadata(name: string, families: IncomingFamily[]): Promise<{ dropped: number }> {
    return this.metricMetadata.remember(this.datasets.dataset(name).meta, families);
  }

  /** Every worker's remembered metric metadata of a dataset, by family name. */
  async metricMetadataOf(name: string): Promise<Map<string, MetricFamilyMeta>> {
    return this.metricMetadata.read(await this.require(name));
  }

  /** Starts a flush unless one runs or a failed one is backing off. */
  private flushSoon(ds: Dataset): void {
    if (ds.flushState.mayStart()) void this.flush(ds).catch(() => undefined);
  }

  /** Turns everything acknowledged so far into Parquet; one flush per dataset at a time. */
  private async flush(ds: Dataset): Promise<void> {
    while (ds.flushing) await ds.flushing.catch(() => undefined);
    return ds.flushState.run.track(
      flushDataset(this.ctx, this.manifests, ds, this.flushTurn)
        .then(
          // Only a flush that wrote something tells about the disk: an empty one after another dataset's
          // flush failed for lack of space logged "a flush succeeded" though none had (issue 30 A15).
          (flushed) => {
            if (flushed) this.disk.flushSucceeded();
          },
          (err) => {
            this.disk.flushFailed(err);
            throw err;
          },
        ),
    );
  }

  /**
   * A consistent view for a query (see snapshot.ts): notFound for a dataset deleted meanwhile,
   * `unavailable` while the store cannot be reached, damaged files set aside.
   */
  async snapshot(name: string, startMs: number, endMs: number): Promise<Snapshot> {
    await this.require(name);
    return takeSnapshot(this.ctx, () => this.datasets.dataset(name), startMs, endMs, (ds) => this.datasets.stillCurrent(ds));
  }

  /** Data files whose series index was found missing or damaged: series calls read the file instead. */
  private readonly brokenIndexes = new Set<string>();

  /**
   * Like `snapshot`, for the series, labels and label values calls: each file is read through its
   * series index where it has a usable one (`index` set on the file, `path` the index's), else itself.
   * A missing or damaged index never fails the call: its file is read instead, from then on.
   */
  async seriesSnapshot(name: string, startMs: number, endMs: number): Promise<Snapshot> {
    await this.require(name);
    const usable = (schema: Schema) => {
      const columns = seriesIndexColumns(schema);
      return (f: FileEntry) => indexUsable(f, columns);
    };
    const series = { usable, broken: this.brokenIndexes };
    return takeSnapshot(this.ctx, () => this.datasets.dataset(name), startMs, endMs, (ds) => this.datasets.stillCurrent(ds), series);
  }

  /** A series index a query could not read (`dataKey`: its data file's key): its file is read instead. */
  seriesIndexDamaged(name: string, dataKey: string, reason: string): void {
    if (this.brokenIndexes.has(dataKey)) return;
    this.brokenIndexes.add(dataKey);
    log.warn('series index damaged: its data file is read instead', { dataset: name, key: seriesIndexKey(dataKey), reason });
  }

  /** Data files a query found damaged and whose cached copy was dropped once already (S3). */
  private readonly refetched = new Set<string>();

  /**
   * A data file a query could not decode (DuckDB's checksum, decompression or metadata errors). On a
   * store with a local cache the copy is dropped first and the object downloaded again by the next
   * query; a file that fails again (or any on local disk) is set aside like other damaged objects:
   * left out of what is served, listed in readiness details and the dataset's stats.
   */
  async setAsideDamaged(name: string, key: string, reason: string): Promise<void> {
    if (this.store.dropCached && !this.refetched.has(key)) {
      this.refetched.add(key);
      await this.store.dropCached(key);
      return;
    }
    this.refetched.delete(key);
    this.quarantine.add({ key, kind: 'parquet', dataset: name, reason });
  }

  /** Counts and sizes of a dataset, as numbers (see stats.ts). */
  stats(name: string): DatasetStats {
    return datasetStats(this.datasets.dataset(name), this.quarantine.list(name));
  }

  /** What one UTC day (`YYYY-MM-DD`) of a dataset holds. */
  statsForDate(name: string, date: string, now = Date.now()): Totals {
    return dateTotals(this.datasets.dataset(name), date, now);
  }

  /** What readiness reports to a caller with a key: damaged objects set aside, by key. */
  health(): { quarantined: QuarantinedObject[] } {
    return { quarantined: this.quarantine.list() };
  }

  async setRetention(name: string, rules: RetentionRule[]): Promise<DatasetMeta> {
    await this.require(name);
    const ds = this.datasets.dataset(name);
    const meta = { ...ds.meta, retention: rules };
    await this.store.putBytes(metaKey(name), encodeMeta(meta));
    ds.lifecycle.updated(meta);
    return meta;
  }

  /** Retention, then compaction of this worker's small files; one compaction per dataset at a time. */
  private async maintain(ds: Dataset): Promise<void> {
    if (ds.compacting || ds.deleted || this.closing) return;
    // The Iceberg publisher names the old nanosecond-timed files it cannot publish: rewritten with the copy.
    const rewrite = this.iceberg && ((f: { key: string }) => this.iceberg!.lacksTimeCopy(f.key));
    const work = applyRetention(this.manifests, ds).then(() => compactDataset(this.ctx, this.manifests, ds, this.flushTurn, () => this.closing, rewrite));
    await ds.compaction.track(work.then(() => undefined));
  }

  /** Whether datasets are published as Iceberg tables (P_ICEBERG). */
  get icebergEnabled(): boolean {
    return this.iceberg !== undefined;
  }

  /** A dataset's Iceberg table as readers load it (its newest metadata and where it is), or undefined when off. */
  async icebergTable(name: string): Promise<{ location: string; metadata: TableMetadata } | undefined> {
    await this.require(name);
    return this.iceberg?.current(this.datasets.dataset(name));
  }

  /** Seconds the oldest file not yet in a dataset's Iceberg table has waited (0 when off or none waits). */
  icebergLagSeconds(name: string): number {
    return this.iceberg?.lagSeconds(name) ?? 0;
  }

  /** How long the external catalog's copy of the table has been behind (P_ICEBERG_PUSH_URI; 0 without). */
  icebergPushLagSeconds(name: string): number {
    return this.iceberg?.push?.lagSeconds(name) ?? 0;
  }

  /** Background work, one timer per task (see scheduler.ts). */
  start(): void {
    const { flushIntervalMs, catalogRefreshMs, compactionIntervalMs, deleteGraceMs, orphanSweepMs } = this.settings;
    this.scheduler.every('flush', Math.min(1000, flushIntervalMs), () => {
      for (const ds of this.datasets.all()) {
        if (ds.flushState.overdue(flushIntervalMs)) this.flushSoon(ds);
      }
    });
    this.scheduler.every('disk space', 1000, () => this.disk.refresh());
    this.scheduler.every('sync', catalogRefreshMs, () => this.datasets.sync());
    this.scheduler.every('compaction', compactionIntervalMs, async () => {
      for (const ds of this.datasets.all()) {
        await this.maintain(ds).catch((err) => log.warn('compaction or retention failed; will retry', { dataset: ds.meta.name, error: (err as Error).message }));
      }
    });
    this.scheduler.every('gc', Math.min(5000, deleteGraceMs), () => this.gc.collect());
    this.scheduler.every('orphan sweep', orphanSweepMs, () => this.datasets.sweepOrphans());
    const iceberg = this.iceberg;
    if (iceberg) this.scheduler.every('iceberg', iceberg.settings.intervalMs, () => iceberg.publishAll(this.datasets.all()));
  }

  /** Graceful shutdown: stop the timers, flush everything, close the logs. */
  async shutdown(): Promise<void> {
    // A compaction pass under way starts no further merge (see maintain and compactDataset).
    this.closing = true;
    this.scheduler.stop();
    for (const ds of this.datasets.all()) {
      await ds.compacting?.catch(() => undefined);
      await this.flush(ds).catch((err) => log.error('flush on shutdown failed; data stays in the WAL', { dataset: ds.meta.name, error: err as Error }));
      await ds.wal.close();
    }
  }
}
