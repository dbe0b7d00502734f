import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { TIME_COLUMN, type ColumnType } from '../../model.ts';
import { failpoint, faultpoint } from '../../failpoint.ts';
import { log } from '../../log.ts';
import type { FileEntry } from '../catalog.ts';
import { encodeSchema } from '../codec.ts';
import type { Dataset, StorageContext } from '../dataset/dataset.ts';
import { dataFileKey, flushFileStem, schemaKey, stagingDir } from '../layout.ts';
import type { Manifests } from '../manifests.ts';
import { writeParquet, writtenTypes } from './parquetWriter.ts';
import { uploadSeriesIndex } from './seriesIndex.ts';
import { traceBloomOf } from './traceIndex.ts';
import { flushDuration, flushes } from '../../metrics.ts';
import { consecutiveGroups, splitByRows } from '../stats.ts';
import { salvageSegments } from '../wal/walSalvage.ts';
import { classifyFailure } from '../../failures.ts';
import type { Segment } from '../wal/wal.ts';

const RECEIPT_TIME_COLUMN = TIME_COLUMN.json;

/**
 * One flush of a dataset: the sealed WAL segments become Parquet files in the store, then this
 * worker's schema object (when it has new columns), then one manifest naming the files and the
 * segments; the segments go in the same tick as the manifest is applied. A failure leaves the WAL as
 * it was (retried with backoff); objects uploaded before the failure are deleted, so a failed or
 * abandoned flush leaves nothing behind. A segment DuckDB cannot read is salvaged (walSalvage.ts)
 * instead of failing every flush for good. Says whether anything was flushed (an empty WAL is no flush).
 */
export async function flushDataset(ctx: StorageContext, manifests: Manifests, ds: Dataset, turn: Turn = (fn) => fn()): Promise<boolean> {
  const sealed = await ds.wal.seal();
  let flushed = false;
  ds.flushState.sealed();
  // A backlog (segments left by failed flushes, or at shutdown) goes about P_FLUSH_BYTES at a time,
  // each group a flush of its own: a flush's memory grows with what it converts (docs/performance.md "The memory bound").
  // Each group waits for its turn, so a dataset's backlog never holds up the others' flushes.
  for (const segments of segmentGroups(sealed, ctx.settings.flushBytes)) {
    if (ds.deleted) return flushed;
    try {
      await turn(() => flushSegments(ctx, manifests, ds, segments));
      flushed = true;
    } catch (err) {
      // Out of disk: a group's Parquet needs room before its segments can go. One segment at a time
      // needs the least, and each one flushed frees its own room for the next.
      if (segments.length < 2 || classifyFailure(err) !== 'disk') throw err;
      for (const s of segments) {
        if (ds.deleted) return flushed;
        await turn(() => flushSegments(ctx, manifests, ds, [s]));
        flushed = true;
      }
    }
  }
  return flushed;
}

/** Runs a flush step when it is its turn. */
export type Turn = <T>(fn: () => Promise<T>) => Promise<T>;

/**
 * Steps in turn, one at a time, first come first served: flushes of all datasets (and compaction's
 * merges) share one DuckDB memory budget, so running them one after another bounds a worker's flush
 * memory to one unit's, and a dataset whose flush keeps failing takes one turn per attempt, never
 * every turn.
 */
export function inTurn(): Turn {
  let tail: Promise<unknown> = Promise.resolve();
  return <T>(fn: () => Promise<T>): Promise<T> => {
    const run = tail.then(fn);
    tail = run.catch(() => undefined);
    return run;
  };
}

/** A receipt-timed dataset's rows appended within this span fall in a few minutes (see writeParquet). */
const FEW_MINUTES_SPAN_MS = 30 * 60_000;

/**
 * Whether the segments' rows surely fall in a few minutes, as every segment was written by this process
 * and either its time column is the time of receipt (p_timestamp, set when the request came in, seconds
 * before its append) and the segments were appended within half an hour, or every batch of them came
 * with the range of its rows' own times (a JSON dataset's time field) and those span under half an
 * hour. Segments recovered at start carry neither.
 */
export function fewMinutes(segments: Pick<Segment, 'firstAppendMs' | 'lastAppendMs' | 'minTimeMs' | 'maxTimeMs'>[], timeColumn: string): boolean {
  const receipt = timeColumn === RECEIPT_TIME_COLUMN;
  let first = Infinity;
  let last = -Infinity;
  for (const s of segments) {
    const [from, to] = receipt ? [s.firstAppendMs, s.lastAppendMs] : [s.minTimeMs, s.maxTimeMs];
    if (from === undefined || to === undefined) return false;
    first = Math.min(first, from);
    last = Math.max(last, to);
  }
  return last - first < FEW_MINUTES_SPAN_MS;
}

/** Consecutive segments in groups of at most `maxBytes` (a larger segment is a group of its own). */
export function segmentGroups<S extends { bytes: number }>(segments: S[], maxBytes: number): S[][] {
  return consecutiveGroups(segments, (s) => s.bytes, maxBytes);
}

/** The worker's own schema object, when a flush added columns to it (written before the manifest names them). */
async function writeSchemaIfChanged(ctx: StorageContext, ds: Dataset): Promise<void> {
  const own = ds.schemaState.takeDirty();
  if (!own) return;
  try {
    faultpoint('flush-schema');
    await ctx.store.putBytes(schemaKey(ds.meta.name, ds.meta.generation, ctx.settings.nodeId), encodeSchema(own));
  } catch (err) {
    ds.schemaState.uploadFailed();
    throw err;
  }
}

/** A failed flush: counted, retried with backoff, and damaged WAL bytes cut at once. */
async function flushFailed(ctx: StorageContext, ds: Dataset, segments: Segment[], stage: string, err: unknown): Promise<void> {
  flushes.inc({ result: 'failed' });
  const retryInMs = ds.flushState.failed(ctx.settings.flushRetryBaseMs ?? 500);
  log.error('flush failed; will retry', { dataset: ds.meta.name, stage, attempt: ds.flushState.failures, retryInMs, error: (err as Error).message });
  // DuckDB could not parse a segment's bytes: cut the damaged one and go on at once. Any other failure
  // (out of memory, no file descriptor, a full disk) is retried as it is: never taken for damage.
  const damaged = stage === 'parquet' && !ds.deleted && classifyFailure(err, segments.map((s) => s.path)) === 'damaged';
  if (damaged && (await salvageSegments(ctx, ds, segments).catch(() => 0)) > 0) ds.flushState.retryNow();
}

async function flushSegments(ctx: StorageContext, manifests: Manifests, ds: Dataset, segments: Segment[]): Promise<void> {
  const started = Date.now();
  const { nodeId } = ctx.settings;
  const seq = manifests.reserve(segments[segments.length - 1].seq);
  const { generation, name, timeColumn } = ds.meta;
  const staging = stagingDir(ctx.settings.dataDir, `flush-${name}-${generation}-${seq}-${randomUUID().slice(0, 8)}`);
  const uploaded: string[] = [];
  let committed = false;
  let stage = 'parquet';
  try {
    const columns = Object.entries(ds.schema) as [string, ColumnType][];
    faultpoint('flush-parquet');
    const written = await writeParquet(ctx.duck, {
      segmentPaths: segments.map((s) => s.path),
      columns,
      timeColumn,
      stagingDir: staging,
      filePrefix: flushFileStem(generation, nodeId, seq),
      zstdLevel: ctx.settings.zstdLevel,
      rowGroupRows: ctx.settings.rowGroupRows,
      beforeUnit: () => faultpoint('flush-unit'),
      fewMinutes: fewMinutes(segments, timeColumn),
    });
    stage = 'upload';
    const add: FileEntry[] = [];
    const ingestedBytes = segments.reduce((sum, s) => sum + s.rawBytes, 0);
    const rawShares = splitByRows(ingestedBytes, written.map((f) => f.rows));
    for (const [i, f] of written.entries()) {
      const key = dataFileKey(name, f.partition, path.basename(f.path));
      uploaded.push(key);
      faultpoint('flush-upload');
      await ctx.store.putFile(key, f.path);
      const seriesIndex = await uploadSeriesIndex(ctx, key, f.path, columns, timeColumn, uploaded);
      const traceBloom = await traceBloomOf(ctx.duck, key, f.path, columns);
      add.push({ key, rows: f.rows, bytes: f.bytes, minMs: f.minMs, maxMs: f.maxMs, columns: columns.map(([n]) => n), nodeId, rawBytes: rawShares[i], ...(seriesIndex ? { seriesIndex } : {}), ...(traceBloom ? { traceBloom } : {}) });
    }
    failpoint('flush-after-upload');
    if (ds.deleted) return;
    await writeSchemaIfChanged(ctx, ds);
    // Catalog and WAL change in the same tick: a query sees these rows in Parquet or in the WAL, never both.
    let removal: Promise<void> = Promise.resolve();
    stage = 'manifest';
    faultpoint('flush-manifest');
    await manifests.commit(
      ds,
      seq,
      { add, remove: [], walSegments: segments.map((s) => s.seq), ingestedBytes },
      (m) => {
        committed = true;
        failpoint('flush-after-manifest');
        removal = ds.wal.remove(m.walSegments);
      },
    );
    await removal;
    for (const f of add) ctx.written?.(f.key, writtenTypes(columns, timeColumn));
    ds.flushState.succeeded();
    flushes.inc({ result: 'ok' });
    flushDuration.observe((Date.now() - started) / 1000);
    log.info('flushed', { dataset: name, rows: add.reduce((s, f) => s + f.rows, 0), files: add.length, ms: Date.now() - started });
  } catch (err) {
    await flushFailed(ctx, ds, segments, stage, err);
    throw err;
  } finally {
    await fs.rm(staging, { recursive: true, force: true });
    // Uploaded but never in a manifest (a failure, or the dataset deleted meanwhile): never read, so delete.
    if (!committed && uploaded.length) {
      await ctx.store.delete(uploaded).catch((err) => log.warn('deleting the uploads of a failed flush failed', { dataset: name, error: (err as Error).message }));
    }
  }
}
