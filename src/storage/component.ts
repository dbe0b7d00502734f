import * as path from 'node:path';
import type { Component } from '../component.ts';
import type { Config } from '../config.ts';
import { IdleClosingDuckDB, openDuckDB, withConnection } from '../duckdb.ts';
import { log } from '../log.ts';
import { stateGauge } from '../metrics.ts';
import { StorageEngine } from './engine.ts';
import { LocalObjectStore, type ObjectStore } from './objects/objectStore.ts';

/**
 * The storage layer as one component of the process: the storage DuckDB, the object store and the
 * engine (loaded and its background work started), its gauges, and its stop (a last flush of every WAL).
 */
export class StorageComponent implements Component {
  readonly name = 'storage';
  readonly duck: IdleClosingDuckDB;
  #store?: ObjectStore;
  #storage?: StorageEngine;

  constructor(
    private readonly config: Config,
    tmp: string,
    private readonly nodeId: string,
  ) {
    const { idleMs: duckIdleMs, ...duckSettings } = config.storageDuckDB;
    this.duck = new IdleClosingDuckDB(() => openDuckDB({ dataDir: config.dataDir, ...duckSettings, tempDir: path.join(tmp, 'duckdb') }), duckIdleMs);
  }

  get store(): ObjectStore {
    if (!this.#store) throw new Error('storage used before it started');
    return this.#store;
  }
  get storage(): StorageEngine {
    if (!this.#storage) throw new Error('storage used before it started');
    return this.#storage;
  }

  async start(): Promise<void> {
    const { config } = this;
    const reserved = await withConnection(this.duck, async (conn) =>
      (await conn.runAndReadAll("SELECT keyword_name FROM duckdb_keywords() WHERE keyword_category = 'reserved'")).getRowObjects().map((r) => String(r.keyword_name)),
    );
    this.#store = await openStore(config);
    const storage = new StorageEngine(this.#store, this.duck, { ...config.engine, dataDir: config.dataDir, nodeId: this.nodeId, ...graceAndLake(config) });
    this.#storage = storage;
    log.info('memory budget', {
      bytes: config.memoryBudget.bytes,
      source: config.memoryBudget.source,
      storageMemoryLimit: config.storageDuckDB.memoryLimit,
      queryConcurrency: config.queryPool.concurrency,
      queryWorkerMaxBytes: config.queryPool.maxRssBytes,
      queryMemoryLimit: config.queryPool.memoryLimit,
      maxInflightBytes: config.ingest.maxInflightBytes,
      flushBytes: config.engine.flushBytes,
      ingestWorkerYoungGenerationMb: config.ingest.workerYoungGenerationMb,
      maxColumns: config.engine.maxColumns,
    });
    await storage.init(reserved);
    storage.start();
  }

  gauges(): void {
    const { storage, duck } = this;
    stateGauge('lakehouse_iceberg_lag_seconds', 'Seconds the oldest file of a dataset not yet in its Iceberg table has waited since this worker saw it (0: the table shows every file).', ['dataset'], () =>
      storage.list().map((m) => ({ labels: { dataset: m.name }, value: storage.icebergLagSeconds(m.name) })),
    );
    stateGauge('lakehouse_iceberg_push_lag_seconds', 'Seconds the external catalog\'s copy of a dataset\'s table (P_ICEBERG_PUSH_URI) has been behind this worker\'s (0: in step, or no push).', ['dataset'], () =>
      storage.list().map((m) => ({ labels: { dataset: m.name }, value: storage.icebergPushLagSeconds(m.name) })),
    );
    stateGauge('lakehouse_wal_bytes', 'Bytes in the write-ahead log (acknowledged, not yet Parquet), per dataset.', ['dataset'], () =>
      storage.list().map((m) => ({ labels: { dataset: m.name }, value: storage.stats(m.name).wal.bytes })),
    );
    stateGauge('lakehouse_storage_duckdb_open', 'Whether the storage DuckDB (flushes, compaction, query parsing) is open: it is closed after P_STORAGE_DUCKDB_IDLE unused.', [], () => [{ labels: {}, value: duck.isOpen ? 1 : 0 }]);
    stateGauge('lakehouse_storage_duckdb_opens', 'Times the storage DuckDB was opened since start (again on first use after each close).', [], () => [{ labels: {}, value: duck.opens }]);
  }

  stop(): Promise<void> {
    return this.storage.shutdown();
  }

  /** Readiness: storage reachable. Damaged objects do not make a worker unready (every worker reads the same bucket). */
  async readiness(): Promise<{ ready: boolean; reason?: string; details: Record<string, unknown> }> {
    const { quarantined } = this.storage.health();
    try {
      await this.store.ping();
      return { ready: true, details: { storage: 'reachable', quarantined } };
    } catch (err) {
      const reason = `storage unreachable: ${(err as Error).message}`;
      return { ready: false, reason, details: { storage: reason, quarantined } };
    }
  }
}

/**
 * A file removed from the catalog stays while a query (here or on a worker that has not refreshed) may
 * still read it, and while a retained Iceberg snapshot may still list it (checked against each other here).
 */
function graceAndLake(config: Config) {
  const queryGraceMs = 2 * config.queryLimits.timeoutMs + 2 * config.engine.catalogRefreshMs + 5000;
  const iceberg = config.iceberg && { ...config.iceberg, baseUri: storeBaseUri(config) };
  const deleteGraceMs = Math.max(queryGraceMs, iceberg ? iceberg.snapshotRetentionMs + 2 * iceberg.intervalMs : 0);
  if (deleteGraceMs > queryGraceMs) log.info('delete grace period raised to outlast retained Iceberg snapshots', { deleteGraceMs, snapshotRetentionMs: iceberg?.snapshotRetentionMs });
  return { deleteGraceMs, iceberg };
}

/** Where readers find the store's objects: `{base}/{key}` (Iceberg locations). */
function storeBaseUri(config: Config): string {
  if (config.storage === 'local') return `file://${path.join(config.dataDir, 'store')}`;
  return `s3://${config.s3.bucket}`;
}

async function openStore(config: Config): Promise<ObjectStore> {
  if (config.storage === 'local') return new LocalObjectStore(path.join(config.dataDir, 'store'));
  const { S3ObjectStore } = await import('./objects/s3Store.ts');
  return new S3ObjectStore({
    endpoint: config.s3.url,
    bucket: config.s3.bucket,
    region: config.s3.region,
    accessKeyId: config.s3.accessKey,
    secretAccessKey: config.s3.secretKey,
    cacheDir: path.join(config.dataDir, 'cache'),
    cacheBytes: config.cacheBytes,
  });
}
