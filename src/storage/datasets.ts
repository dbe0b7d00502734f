import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import type { DuckDBInstance } from '@duckdb/node-api';
import { badRequest, HttpError, notFound } from '../http/errors.ts';
import type { ColumnType, RowBatch } from '../ingest/types.ts';
import { log } from '../log.ts';
import { Catalog, type FileEntry, type Manifest } from './catalog.ts';
import type { ObjectStore } from './objectStore.ts';
import { writeParquet } from './parquetWriter.ts';
import { evolveSchema, rowToJsonLine, unionSchemas, type Schema } from './schema.ts';
import { Wal, type Segment } from './wal.ts';

/** What a dataset holds; it keeps the kind it was created with (OTLP signals do not mix). */
export type DatasetKind = 'json' | 'otel-logs' | 'otel-traces' | 'otel-metrics';

export interface DatasetMeta {
  name: string;
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
}

/** Reserved columns every JSON dataset has. */
export const JSON_KNOWN_TYPES: Record<string, ColumnType> = { p_timestamp: 'TIMESTAMP', p_metadata: 'VARCHAR', p_tags: 'VARCHAR' };

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
  catalog = new Catalog();
  flushing?: Promise<void>;
  oldestUnflushedAt?: number;
  deleted = false;
  constructor(
    readonly meta: DatasetMeta,
    readonly wal: Wal,
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
  private timer?: NodeJS.Timeout;

  constructor(
    readonly store: ObjectStore,
    private readonly duck: DuckDBInstance,
    readonly settings: StorageSettings,
  ) {}

  private walDir(m: DatasetMeta): string {
    return path.join(this.settings.dataDir, 'wal', m.name, m.generation);
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
    const wal = await Wal.open(this.walDir(meta));
    const ds = new Dataset(meta, wal);
    await this.refreshCatalog(ds);
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

  /** Reads manifests not yet applied. */
  async refreshCatalog(ds: Dataset): Promise<void> {
    const entries = await this.store.list(manifestPrefix(ds.meta));
    for (const { key } of entries) {
      if (ds.catalog.hasManifest(key)) continue;
      const body = await this.store.getBytes(key);
      if (body) ds.catalog.apply(key, JSON.parse(body.toString()) as Manifest);
    }
  }

  async refreshSchema(ds: Dataset): Promise<void> {
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
    if (name.length === 0) throw badRequest('dataset name must not be empty');
    if (name.length > MAX_NAME_LENGTH) throw badRequest(`dataset name must be at most ${MAX_NAME_LENGTH} characters`);
    if (!NAME_RE.test(name)) {
      throw badRequest('dataset name must start with a letter and contain only letters, digits, "_" and "-"');
    }
    if (this.reserved.has(name.toLowerCase())) throw badRequest(`dataset name "${name}" is a reserved SQL keyword`);
    if (name.toLowerCase().startsWith('p_')) throw badRequest('dataset names starting with "p_" are reserved');
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
    const clash = this.find(name, true);
    if (clash) throw new HttpError(409, `dataset "${clash.name}" already exists (names are case-insensitive)`);
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
   * Stores a batch: evolves the schema (persisted before anything that depends on it is acknowledged),
   * then appends the rows to the WAL; resolves once they are durable.
   */
  async ingest(name: string, batch: RowBatch, rawBytes: number): Promise<number> {
    const ds = this.dataset(name);
    if (batch.rows.length === 0) return 0;
    const walSize = ds.wal.size.bytes;
    if (walSize > this.settings.walMaxBytes) {
      throw new HttpError(503, 'write-ahead log is full (storage is behind); retry later', { 'Retry-After': '5' });
    }
    const { next } = evolveSchema(ds.schema, batch, this.settings.maxColumns);
    if (next) {
      ds.schema = next;
      ds.ownSchema = unionSchemas([ds.ownSchema, Object.fromEntries(Object.entries(next).filter(([k]) => !(k in ds.ownSchema) || ds.ownSchema[k] !== next[k]))]);
      const own = ds.ownSchema;
      ds.schemaWrite = ds.schemaWrite
        .catch(() => undefined)
        .then(() => this.store.putBytes(schemaKey(ds.meta, this.settings.nodeId), JSON.stringify(own)));
    }
    // Every append waits for the latest schema write, so no acknowledged row has an unrecorded column.
    await ds.schemaWrite;
    let lines = '';
    for (const row of batch.rows) lines += `${rowToJsonLine(row)}\n`;
    await ds.wal.append(lines, batch.rows.length, rawBytes);
    ds.oldestUnflushedAt ??= Date.now();
    if (ds.wal.size.bytes >= this.settings.flushBytes) void this.flush(name).catch(() => undefined);
    return batch.rows.length;
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
    const seq = segments[segments.length - 1].seq;
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
      if (ds.deleted) return;
      const manifest: Manifest = {
        version: 1,
        generation,
        nodeId: this.settings.nodeId,
        seq,
        createdAt: new Date().toISOString(),
        add,
        remove: [],
        walSegments: segments.map((s) => s.seq),
        ingestedBytes: segments.reduce((sum, s) => sum + s.rawBytes, 0),
      };
      const key = `${manifestPrefix(ds.meta)}${this.settings.nodeId}.${String(seq).padStart(12, '0')}.json`;
      await this.store.putBytes(key, JSON.stringify(manifest));
      // Catalog and WAL change in the same tick: a query sees these rows in Parquet or in the WAL, never both.
      ds.catalog.apply(key, manifest);
      await ds.wal.remove(manifest.walSegments);
      log.info('flushed', { dataset: name, rows: add.reduce((s, f) => s + f.rows, 0), files: add.length, ms: Date.now() - started });
    } catch (err) {
      ds.oldestUnflushedAt ??= Date.now();
      log.error('flush failed', { dataset: name, error: err as Error });
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
    const release = ds.wal.retain(segments);
    const withPaths = await Promise.all(files.map(async (f) => ({ ...f, path: await this.store.localPath(f.key) })));
    return { meta: ds.meta, schema: ds.schema, files: withPaths, segments, release };
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

  /** Background flushing on the time threshold. */
  start(): void {
    this.timer = setInterval(() => {
      const now = Date.now();
      for (const ds of this.datasets.values()) {
        if (ds.oldestUnflushedAt !== undefined && now - ds.oldestUnflushedAt >= this.settings.flushIntervalMs && !ds.flushing) {
          void this.flush(ds.meta.name).catch(() => undefined);
        }
      }
    }, Math.min(1000, this.settings.flushIntervalMs));
    this.timer.unref();
  }

  /** Graceful shutdown: flush everything, close the logs. */
  async shutdown(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    for (const ds of this.datasets.values()) {
      await this.flush(ds.meta.name).catch((err) => log.error('flush on shutdown failed; data stays in the WAL', { dataset: ds.meta.name, error: err as Error }));
      await ds.wal.close();
    }
  }
}
