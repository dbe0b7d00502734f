import type { Catalog, FileEntry } from '../catalog.ts';
import { FlushState, Lifecycle, Running, SchemaState } from './datasetState.ts';
import type { DuckDBSource } from '../../duckdb.ts';
import type { DatasetMeta, Schema } from '../codec.ts';
import type { ObjectStore } from '../objects/objectStore.ts';
import type { Quarantine } from '../files/quarantine.ts';
import type { Segment, Wal } from '../wal/wal.ts';

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
  iceberg?: import('../iceberg/publisher.ts').IcebergSettings;
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
  written?: (key: string, types: Record<string, import('../../model.ts').ColumnType>) => void;
}

export interface Snapshot {
  meta: DatasetMeta;
  schema: Schema;
  /** `index`: `path` is the file's series index, not the file (a snapshot taken for series calls). */
  files: (FileEntry & { path: string; index?: boolean })[];
  segments: Segment[];
  release: () => void;
}

/**
 * One dataset generation as this worker holds it: metadata, catalog, WAL, and its state, each part
 * owned by an object of datasetState.ts that makes its transitions; the getters are readonly views.
 */
export class Dataset {
  readonly lifecycle: Lifecycle;
  readonly flushState = new FlushState();
  readonly schemaState = new SchemaState();
  /** The compaction (and retention) running, if any. */
  readonly compaction = new Running();
  constructor(
    meta: DatasetMeta,
    readonly wal: Wal,
    readonly catalog: Catalog,
  ) {
    this.lifecycle = new Lifecycle(meta);
  }

  get meta(): DatasetMeta {
    return this.lifecycle.meta;
  }
  get deleted(): boolean {
    return this.lifecycle.deleted;
  }
  get loadedAt(): number {
    return this.lifecycle.loadedAt;
  }
  /** Union of every worker's schema: what queries see. Changed only after the local copy is on disk. */
  get schema(): Readonly<Schema> {
    return this.schemaState.schema;
  }
  get flushing(): Promise<void> | undefined {
    return this.flushState.running;
  }
  get compacting(): Promise<void> | undefined {
    return this.compaction.current;
  }
}
