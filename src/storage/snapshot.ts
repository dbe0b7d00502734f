import * as fs from 'node:fs/promises';
import { notFound, unavailable } from '../errors.ts';
import type { FileEntry } from './catalog.ts';
import type { Schema } from './codec.ts';
import type { Dataset, Snapshot, StorageContext } from './dataset/dataset.ts';
import { parseKey, seriesIndexKey } from './layout.ts';
import { log } from '../log.ts';
import { isMissingObject } from './objects/objectStore.ts';

/**
 * Files whose local copy does not have the size the catalog recorded (truncated or replaced). `sizes`
 * are the ones the store found while acquiring the files, if it reported them (one stat per file and
 * query, not two: part of every query's fixed cost).
 */
async function damagedFiles(files: Pick<FileEntry, 'key' | 'bytes'>[], paths: string[], sizes?: number[]): Promise<{ key: string; reason: string }[]> {
  // Sizes the store reported are compared in one loop: a promise per file cost more than the compare
  // (a dashboard panel's snapshot holds 100+ minute files).
  const found = sizes ?? (await Promise.all(paths.map((p) => fs.stat(p).then((st) => st.size, () => -1))));
  const out: { key: string; reason: string }[] = [];
  files.forEach((f, i) => {
    const size = found[i];
    if (size < 0) out.push({ key: f.key, reason: 'missing from the store' });
    else if (size !== f.bytes) out.push({ key: f.key, reason: `size ${size} bytes, the catalog recorded ${f.bytes} (truncated or overwritten)` });
  });
  return out;
}

type SnapshotFile = Snapshot['files'][number];

/**
 * Each catalog entry's snapshot form, kept while the entry lives (never changed by a reader): a
 * dashboard panel's snapshot spread ~180 entries anew, ~70 µs of every panel.
 */
const snapshotForms = new WeakMap<FileEntry, SnapshotFile>();

function snapshotFile(f: FileEntry, path: string, index: boolean): SnapshotFile {
  const memo = snapshotForms.get(f);
  if (memo && memo.path === path && (memo.index === true) === index) return memo;
  const form: SnapshotFile = { ...f, path, ...(index ? { index: true } : {}) };
  snapshotForms.set(f, form);
  return form;
}

/** A snapshot that reads files' series indexes (seriesIndex.ts) where it can. */
export interface SeriesIndexes {
  /** Whether a file's index can answer for it under this schema. */
  usable: (schema: Schema) => (f: FileEntry) => boolean;
  /** Data file keys whose index was found missing or damaged: their files are read instead. */
  broken: Set<string>;
}

/**
 * A damaged or missing object of a snapshot: a series index is only left unused (its file is read
 * instead; true), a data file is set aside.
 */
function setAside(ctx: StorageContext, name: string, key: string, reason: string, series: SeriesIndexes | undefined): boolean {
  const parsed = parseKey(key);
  if (parsed?.role === 'series-index' && series) {
    series.broken.add(key.slice(0, -seriesIndexKey('').length));
    log.warn('series index missing or damaged: its data file is read instead', { dataset: name, key, reason });
    return true;
  }
  ctx.quarantine.add({ key, kind: 'parquet', dataset: name, reason });
  return false;
}

/**
 * A consistent view for a query: Parquet files overlapping the range plus the sealed WAL segments
 * holding every acknowledged row not yet in Parquet. Held segments and files stay until release.
 * A file that is missing or damaged is set aside and the rest served; a dataset deleted meanwhile is
 * notFound (`stillCurrent` asks the store); a store that cannot be reached is `unavailable`.
 */
export async function takeSnapshot(
  ctx: StorageContext,
  current: () => Dataset,
  startMs: number,
  endMs: number,
  stillCurrent: (ds: Dataset) => Promise<boolean>,
  series?: SeriesIndexes,
): Promise<Snapshot> {
  for (let attempt = 0; ; attempt++) {
    const ds = current();
    const name = ds.meta.name;
    await ds.wal.seal();
    // No await between reading the catalog and the WAL: a flush swaps them in one tick.
    const files = ds.catalog.select(startMs, endMs).filter((f) => !ctx.quarantine.has(f.key));
    const segments = ds.wal.sealedSegments();
    const releaseSegments = ds.wal.retain(segments);
    // What is read of each file: its series index where one is asked for and can be used, else the file.
    const usable = series ? series.usable(ds.schema) : () => false;
    const index = files.map((f) => usable(f) && !series!.broken.has(f.key));
    const objects = files.map((f, i) => (index[i] ? { key: seriesIndexKey(f.key), bytes: f.seriesIndex!.bytes } : f));
    let held: { paths: string[]; sizes?: number[]; release: () => void } | undefined;
    try {
      held = await ctx.store.acquire(objects.map((f) => f.key));
      const damaged = await damagedFiles(objects, held.paths, held.sizes);
      if (damaged.length === 0) {
        const h = held;
        return {
          meta: ds.meta,
          schema: ds.schema,
          files: files.map((f, i) => snapshotFile(f, h.paths[i], index[i])),
          segments,
          release: () => {
            releaseSegments();
            h.release();
          },
        };
      }
      for (const d of damaged) setAside(ctx, name, d.key, d.reason, series);
    } catch (err) {
      releaseSegments();
      held?.release();
      if (!isMissingObject(err)) throw err;
      // A lost series index only means reading its file (no dataset-level conclusion to draw).
      if (series && parseKey(err.key)?.role === 'series-index') {
        setAside(ctx, name, err.key, 'missing from the store', series);
        continue;
      }
      // Gone from the store: the dataset was deleted (answer 404), or this one file is lost.
      if (ds.deleted || !(await stillCurrent(ds))) throw notFound(`dataset "${name}" does not exist (deleted)`);
      ctx.quarantine.add({ key: err.key, kind: 'parquet', dataset: name, reason: 'listed in the catalog but missing from the store' });
      continue;
    }
    releaseSegments();
    held.release();
    if (attempt >= 20) throw unavailable(`dataset "${name}": too many damaged files found at once; retry`, 1);
  }
}
