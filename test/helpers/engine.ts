import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import type { DuckDBInstance } from '@duckdb/node-api';
import { openDuckDB } from '../../src/duckdb.ts';
import type { ColumnType, TypeSummary } from '../../src/model.ts';
import type { DatasetKind, SerializedRows, StorageSettings } from '../../src/storage/engine.ts';
import { StorageEngine } from '../../src/storage/engine.ts';
import type { StorageContext } from '../../src/storage/dataset/dataset.ts';
import { DatasetSet } from '../../src/storage/dataset/datasetSet.ts';
import { GarbageCollector } from '../../src/storage/files/gc.ts';
import { Manifests } from '../../src/storage/manifests.ts';
import { LocalObjectStore } from '../../src/storage/objects/objectStore.ts';
import { Quarantine } from '../../src/storage/files/quarantine.ts';
import { tempDir } from './server.ts';

/**
 * The storage engine in this process, over a LocalObjectStore in a temp dir: the seam every protocol
 * writes through, tested without a server. `restart` opens a second engine on the same directories, as
 * the service does after a crash or a restart (the WAL is recovered, the catalog read from manifests).
 */
export interface EngineFixture {
  dir: string;
  store: LocalObjectStore;
  duck: DuckDBInstance;
  engine: StorageEngine;
  settings: StorageSettings;
  /** A new engine on the same data dir and store (the old one is dropped without a shutdown: a crash). */
  restart: (over?: Partial<StorageSettings>) => Promise<StorageEngine>;
  cleanup: () => Promise<void>;
}

export async function openEngine(over: Partial<StorageSettings> = {}, nodeId = 'n1', shared?: { dir: string }): Promise<EngineFixture> {
  const dir = shared?.dir ?? (await tempDir('lakehouse-engine-'));
  const nodeDir = path.join(dir, nodeId);
  await fs.mkdir(path.join(nodeDir, 'tmp'), { recursive: true });
  const duck = await openDuckDB({ dataDir: dir, threads: 1, memoryLimit: '512MB', tempDir: path.join(nodeDir, 'tmp', 'duckdb') });
  const store = new LocalObjectStore(path.join(dir, 'store'));
  const settings: StorageSettings = {
    dataDir: nodeDir,
    nodeId,
    maxColumns: 100,
    // Nothing runs by itself: engine.start() is never called; a test flushes, syncs and collects itself.
    flushIntervalMs: 3_600_000,
    flushBytes: 16 * 1024 * 1024,
    walMaxBytes: 1024 * 1024 * 1024,
    zstdLevel: 1,
    rowGroupRows: 122_880,
    catalogRefreshMs: 3_600_000,
    compactionIntervalMs: 3_600_000,
    compactionTargetBytes: 128 * 1024 * 1024,
    deleteGraceMs: 0,
    orphanSweepMs: 3_600_000,
    ...over,
  };
  const open = async (s: StorageSettings) => {
    const e = new StorageEngine(store, duck, s);
    await e.init(['select', 'from']);
    return e;
  };
  const fixture: EngineFixture = {
    dir,
    store,
    duck,
    settings,
    engine: await open(settings),
    restart: async (more = {}) => (fixture.engine = await open({ ...settings, ...more })),
    cleanup: async () => {
      duck.closeSync();
      if (!shared) await fs.rm(dir, { recursive: true, force: true });
    },
  };
  return fixture;
}

/** Creates a JSON (or other kind of) dataset the way the service does, timed by its kind's default column. */
export function createDataset(engine: StorageEngine, name: string, kind: DatasetKind = 'json') {
  return engine.create(name, kind);
}

/** Rows as an ingest worker would hand them to the engine: WAL lines, their count and type summary. */
export function rows(records: Record<string, string | number | boolean>[], atMs = Date.now()): SerializedRows {
  const types: TypeSummary = new Map();
  const note = (name: string, type: ColumnType) => {
    const have = types.get(name) ?? [];
    if (!have.includes(type)) have.push(type);
    types.set(name, have);
  };
  let lines = '';
  records.forEach((r, i) => {
    const row: Record<string, unknown> = { ...r, p_timestamp: new Date(atMs + i).toISOString() };
    for (const [k, v] of Object.entries(r)) note(k, typeof v === 'string' ? 'VARCHAR' : typeof v === 'boolean' ? 'BOOLEAN' : Number.isInteger(v) ? 'BIGINT' : 'DOUBLE');
    note('p_timestamp', 'TIMESTAMP');
    lines += `${JSON.stringify(row)}\n`;
  });
  return { lines, rows: records.length, types, fixed: [] };
}

/**
 * The storage layer's parts without the engine facade, over a fixture's store and settings: for tests
 * of one part (DatasetSet, Manifests, the garbage collector) that drive it step by step.
 */
export function storageParts(f: Pick<EngineFixture, 'store' | 'duck' | 'settings'>) {
  const quarantine = new Quarantine();
  const ctx: StorageContext = { store: f.store, duck: f.duck, settings: f.settings, quarantine };
  const gc = new GarbageCollector(ctx);
  const manifests = new Manifests(ctx, (keys, at) => gc.schedule(keys, at));
  const datasets = new DatasetSet(ctx, manifests, gc);
  return { ctx, quarantine, gc, manifests, datasets };
}
