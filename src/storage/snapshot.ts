import * as fs from 'node:fs/promises';
import { notFound, unavailable } from '../errors.ts';
import type { FileEntry } from './catalog.ts';
import type { Dataset, Snapshot, StorageContext } from './dataset.ts';
import { isMissingObject } from './objectStore.ts';

/**
 * Files whose local copy does not have the size the catalog recorded (truncated or replaced). `sizes`
 * are the ones the store found while acquiring the files, if it reported them (one stat per file and
 * query, not two: part of every query's fixed cost).
 */
async function damagedFiles(files: FileEntry[], paths: string[], sizes?: number[]): Promise<{ key: string; reason: string }[]> {
  const out: { key: string; reason: string }[] = [];
  await Promise.all(
    files.map(async (f, i) => {
      const size = sizes ? sizes[i] : await fs.stat(paths[i]).then(
        (st) => st.size,
        () => -1,
      );
      if (size < 0) out.push({ key: f.key, reason: 'missing from the store' });
      else if (size !== f.bytes) out.push({ key: f.key, reason: `size ${size} bytes, the catalog recorded ${f.bytes} (truncated or overwritten)` });
    }),
  );
  return out;
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
): Promise<Snapshot> {
  for (let attempt = 0; ; attempt++) {
    const ds = current();
    const name = ds.meta.name;
    await ds.wal.seal();
    // No await between reading the catalog and the WAL: a flush swaps them in one tick.
    const files = ds.catalog.select(startMs, endMs).filter((f) => !ctx.quarantine.has(f.key));
    const segments = ds.wal.sealedSegments();
    const releaseSegments = ds.wal.retain(segments);
    let held: { paths: string[]; sizes?: number[]; release: () => void } | undefined;
    try {
      held = await ctx.store.acquire(files.map((f) => f.key));
      const damaged = await damagedFiles(files, held.paths, held.sizes);
      if (damaged.length === 0) {
        const h = held;
        return {
          meta: ds.meta,
          schema: ds.schema,
          files: files.map((f, i) => ({ ...f, path: h.paths[i] })),
          segments,
          release: () => {
            releaseSegments();
            h.release();
          },
        };
      }
      for (const d of damaged) ctx.quarantine.add({ key: d.key, kind: 'parquet', dataset: name, reason: d.reason });
    } catch (err) {
      releaseSegments();
      held?.release();
      if (!isMissingObject(err)) throw err;
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
