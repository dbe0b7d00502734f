import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { log } from '../../log.ts';
import { Catalog } from '../catalog.ts';
import { CorruptObjectError, decodeMeta, isCorruptObject, type DatasetMeta } from '../codec.ts';
import { Dataset, type StorageContext } from './dataset.ts';
import { metaKey, META_PREFIX, parseMetaKey, quarantineDir, walDir } from '../layout.ts';
import type { Manifests } from '../manifests.ts';
import { refreshSchema } from './schemaState.ts';
import { Wal } from '../wal/wal.ts';
import { salvageSegments } from '../wal/walSalvage.ts';

/** The stored metadata of a dataset, or undefined when it does not exist; a damaged one is set aside (and thrown). */
export async function readMeta(ctx: StorageContext, name: string): Promise<DatasetMeta | undefined> {
  const key = metaKey(name);
  const body = await ctx.store.getBytes(key);
  if (!body) return undefined;
  try {
    const meta = decodeMeta(key, body);
    // A copied or renamed object names another dataset: damaged like any unreadable one (set aside, the
    // other datasets served), never an error that stops the start-up.
    if (meta.name !== name) throw new CorruptObjectError(key, `names dataset "${meta.name}", not "${name}"`);
    ctx.quarantine.clear(key);
    return meta;
  } catch (err) {
    if (isCorruptObject(err)) ctx.quarantine.add({ key, kind: 'metadata', dataset: name, reason: err.reason });
    throw err;
  }
}

/** Every readable metadata object in the store; the names whose metadata is damaged, apart. */
export async function listMetas(ctx: StorageContext): Promise<{ metas: Map<string, DatasetMeta>; damaged: Set<string> }> {
  const metas = new Map<string, DatasetMeta>();
  const damaged = new Set<string>();
  for (const { key } of await ctx.store.list(META_PREFIX)) {
    const name = parseMetaKey(key);
    if (name === undefined) continue;
    const meta = await readMeta(ctx, name).catch((err) => {
      if (!isCorruptObject(err)) throw err;
      damaged.add(name);
      return undefined;
    });
    if (meta) metas.set(meta.name, meta);
  }
  return { metas, damaged };
}

/**
 * Opens one dataset generation on this worker: its catalog from the manifests, its WAL (recovered:
 * torn tails cut, segments already in Parquet dropped, damaged segments salvaged before anything reads
 * them) and its schema.
 */
export async function openDataset(ctx: StorageContext, manifests: Manifests, meta: DatasetMeta): Promise<Dataset> {
  const { dataDir, nodeId, flushBytes } = ctx.settings;
  const catalog = new Catalog();
  await manifests.read(meta, catalog);
  // A flush's manifest number is at least its last segment's, so the worker's highest manifest number
  // also covers segments named only in a manifest that cannot be read right now: never reused.
  const wal = await Wal.open(walDir(dataDir, meta.name, meta.generation), Math.max(catalog.maxFlushedSegment(nodeId), manifests.highest) + 1, flushBytes);
  const ds = new Dataset(meta, wal, catalog);
  await refreshSchema(ctx, ds);
  // Segments already stored as Parquet (crash after the manifest, before the WAL cleanup) go now.
  const sealed = await wal.seal();
  const flushed = sealed.filter((s) => catalog.isSegmentFlushed(nodeId, s.seq)).map((s) => s.seq);
  if (flushed.length) {
    log.info('wal: dropping segments already in parquet', { dataset: meta.name, segments: flushed });
    await wal.remove(flushed);
  }
  // A resource error here (out of memory, EMFILE) is not damage: the dataset opens, and its flush checks again.
  await salvageSegments(ctx, ds, wal.sealedSegments()).catch((err) => log.warn('wal: checking segments failed; the flush will check again', { dataset: meta.name, error: (err as Error).message }));
  // WAL data set aside before a restart is still reported.
  const aside = path.join(quarantineDir(dataDir), 'wal', meta.name, meta.generation);
  for (const f of await fs.readdir(aside).catch(() => [] as string[])) {
    const file = path.join(aside, f);
    if (!ctx.quarantine.list(meta.name).some((q) => q.setAsideTo === file)) {
      ctx.quarantine.add({ key: file, kind: 'wal', dataset: meta.name, reason: 'set aside earlier (unreadable WAL data)', setAsideTo: file });
    }
  }
  if (wal.size.rows > 0) ds.flushState.appended();
  return ds;
}
