import type { Catalog, FileEntry } from './catalog.ts';
import type { DuckDBSource } from '../duckdb.ts';
import type { DatasetMeta, Schema } from './codec.ts';
import type { ObjectStore } from './objectStore.ts';
import type { Quarantine } from './quarantine.ts';
import type { Segment, Wal } from './wal.ts';

export interface StorageSettings {
  dataDir: string;
  nodeId: string;
  maxColumns: number;
  flushIntervalMs: number;
  flushBytes: number;
  walMaxBytes: number;
  /** Free disk space kept for flushes (P_DISK_RESERVE); undefined: sized from the file system. */
  diskReserveBytes?: number;
  zstdLevel: number;
  rowGroupRows: number;
  catalogRefreshMs: number;
  compactionIntervalMs: number;
  compactionTargetBytes: number;
  /** How long a file removed from the catalog stays, for queries (here and on other workers) still reading it. */
  deleteGraceMs: number;
  /** How often the whole store is swept for objects of removed dataset generations. */
  orphanSweepMs: number;
  /** Memory all datasets' remembered remote-write metadata may hold (P_METRIC_METADATA_MEMORY); unset: 16 MiB. */
  metricMetadataBytes?: number;
  /** Iceberg publishing (storage/iceberg/); undefined: off. */
  iceberg?: import('./iceberg/publisher.ts').IcebergSettings;
  /** First wait before a failed flush is tried again, doubling to 30 s (default 500 ms; tests shorten it). */
  flushRetryBaseMs?: number;
}

/** What every part of the storage layer shares. */
export interface StorageContext {
  store: ObjectStore;
  duck: DuckDBSource;
  settings: StorageSettings;
  quarantine: Quarantine;
  /** Told of each data file this worker writes, with the column types it holds (the Iceberg publisher). */
  written?: (key: string, types: Record<string, import('../model.ts').ColumnType>) => void;
}

export interface Snapshot {
  meta: DatasetMeta;
  schema: Schema;
  /** `index`: `path` is the file's series index, not the file (a snapshot taken for series calls). */
  files: (FileEntry & { path: string; index?: boolean })[];
  segments: Segment[];
  release: () => void;
}

/** One dataset generation as this worker holds it: metadata, catalog, WAL and schema state. */
export class Dataset {
  /** Union of every worker's schema: what queries see. Changed only after the local copy is on disk. */
  schema: Schema = {};
  /** This worker's own schema object in the store. */
  ownSchema: Schema = {};
  /** Serialises schema changes, so each local write holds every column acknowledged before it. */
  schemaLock: Promise<void> = Promise.resolve();
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
