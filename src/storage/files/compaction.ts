import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs/promises';
import type { ColumnType } from '../../model.ts';
import { failpoint } from '../../failpoint.ts';
import { log } from '../../log.ts';
import { castProjection, listLiteral, releaseDuckDB, sqlIdent, sqlString, withConnection, type DuckDBSource } from '../../duckdb.ts';
import type { FileEntry } from '../catalog.ts';
import type { Dataset, StorageContext } from '../dataset/dataset.ts';
import { compactedFileName, dataFileKey, hourPartition, stagingDir } from '../layout.ts';
import type { Manifests } from '../manifests.ts';
import { isMissingObject } from '../objects/objectStore.ts';
import { timestampLiteral } from '../scan.ts';
import { uploadSeriesIndex } from './seriesIndex.ts';
import { traceBloomOf } from './traceIndex.ts';
import type { Turn } from './flush.ts';
import { compactionDuration, compactions } from '../../metrics.ts';
import { fileStatsFromCopy, timeShadow, writtenTypes, type WrittenFile } from './parquetWriter.ts';

export { hourPartition };

/**
 * Groups of files to merge: per hour partition, this worker's files smaller than the target size, when
 * there are at least two. Only a worker's own files are merged, so compactors on several workers never
 * pick the same file and their manifests never conflict. Files that reached the target are left alone,
 * so a file is rewritten only while it is small (bounded write amplification).
 */
export function planCompaction(files: FileEntry[], nodeId: string, targetBytes: number, rewrite: (f: FileEntry) => boolean = () => false): FileEntry[][] {
  const groups = new Map<string, FileEntry[]>();
  // Files that must be rewritten whatever their size (see UPGRADES_PER_PASS): each alone, a few a pass.
  const upgrades: FileEntry[][] = [];
  for (const f of files) {
    if (f.nodeId !== nodeId) continue;
    if (f.bytes >= targetBytes) {
      if (upgrades.length < UPGRADES_PER_PASS && hourPartition(f.key) && rewrite(f)) upgrades.push([f]);
      continue;
    }
    const hour = hourPartition(f.key);
    if (!hour) continue;
    const list = groups.get(hour) ?? [];
    list.push(f);
    groups.set(hour, list);
  }
  const out: FileEntry[][] = [];
  for (const list of groups.values()) {
    list.sort((a, b) => a.minMs - b.minMs);
    // Split into runs whose summed size stays near the target.
    let run: FileEntry[] = [];
    let size = 0;
    for (const f of list) {
      if (run.length >= 2 && size + f.bytes > targetBytes) {
        out.push(run);
        run = [];
        size = 0;
      }
      run.push(f);
      size += f.bytes;
    }
    if (run.length >= 2) out.push(run);
  }
  return [...out, ...upgrades];
}

/**
 * Large files rewritten alone per compaction pass when `rewrite` asks for it: a nanosecond-timed file
 * written before the microsecond copy for Iceberg readers existed (docs/lake.md "Old files") is read
 * and written again once, with the copy, a few a pass so the pass stays bounded. Small ones need no
 * such step: the ordinary merge rewrites them with the copy.
 */
export const UPGRADES_PER_PASS = 2;

/**
 * Splits files, listed by their first time (as planCompaction lists a group), into runs: a run is a
 * file alone, or files whose time ranges overlap one another (directly or through a file between
 * them); each run starts no earlier than the run before it ends (to the millisecond of the catalog's
 * time range; touching is following). Returns each run's indexes into `files`.
 */
export function timeRuns(files: Pick<FileEntry, 'minMs' | 'maxMs'>[]): number[][] {
  const runs: number[][] = [];
  let end = -Infinity;
  files.forEach((f, i) => {
    if (runs.length && f.minMs < end) runs[runs.length - 1].push(i);
    else runs.push([i]);
    end = Math.max(end, f.maxMs);
  });
  return runs;
}

/** A file to merge: its local path, its time range (the catalog's, to the millisecond) and its columns. */
export interface MergeInput {
  path: string;
  minMs: number;
  maxMs: number;
  columns: string[];
}

/**
 * The parts of one run of overlapping files (see timeRuns), in time order, as [files, condition,
 * sorted]: the first file's rows before any other file starts, as stored; the rows of the window
 * where the files overlap, sorted; the rows of the file that ends last after every other one has
 * ended, as stored. The condition is on the time column (`t`); the catalog's times are truncated to
 * the millisecond, so the window ends a millisecond after the latest end among the other files.
 */
export function runParts(run: Omit<MergeInput, 'columns'>[], t: string): [string[], string, boolean][] {
  if (run.length === 1) return [[[run[0].path], '', false]];
  const from = Math.min(...run.slice(1).map((f) => f.minMs));
  let last = 0;
  run.forEach((f, i) => {
    if (f.maxMs > run[last].maxMs) last = i;
  });
  const to = Math.max(...run.filter((_, i) => i !== last).map((f) => f.maxMs)) + 1;
  return [
    [[run[0].path], `${t} < ${timestampLiteral(from)}`, false],
    [run.map((f) => f.path), `${t} >= ${timestampLiteral(from)} AND ${t} < ${timestampLiteral(to)}`, true],
    [[run[last].path], `${t} >= ${timestampLiteral(to)}`, false],
  ];
}

/**
 * Merges Parquet files into one, every column cast to the dataset's current type, in time order. The
 * files come in runs (see timeRuns): a file whose time range overlaps no other is joined as stored
 * (its rows in the order it stored them); of a run of overlapping files only the rows of the window
 * where they overlap are sorted (see runParts). Flushes of a dataset timed by receipt follow one
 * another but for a few milliseconds where concurrent requests' commits interleave, and sorting the
 * whole group for such an overlap held every row of it in DuckDB's sort (measured on the benchmark's
 * hour of 500,000 JSON events in 10 files: +146 MB of RSS, against +55 MB joined as stored). A sort is
 * held in memory up to P_STORAGE_MEMORY_LIMIT before DuckDB spills it to disk.
 */
export async function mergeParquet(
  instance: DuckDBSource,
  opts: {
    /** The group's files in runs (see timeRuns), in time order. */
    runs: MergeInput[][];
    columns: [string, ColumnType][];
    timeColumn: string;
    target: string;
    zstdLevel: number;
    rowGroupRows: number;
  },
): Promise<Omit<WrittenFile, 'partition'>> {
  const t = sqlIdent(opts.timeColumn);
  // A nanosecond-timed dataset's files carry a microsecond copy of the time column for Iceberg readers (parquetWriter.ts).
  const columnsOf = new Map(opts.runs.flat().map((f) => [f.path, f.columns]));
  // Each read names only the columns its own files hold (a NULL for the others): files of one hour
  // differ in columns when a label or an attribute appears mid-hour, and a column the read's files
  // lack, named in its projection, is a binder error that failed the merge on every pass (issue 36).
  const read = (paths: string[]) => {
    const present = new Set(paths.flatMap((p) => columnsOf.get(p) ?? []));
    return `SELECT ${castProjection(opts.columns, present)}${timeShadow(opts.columns, opts.timeColumn)} FROM read_parquet(${listLiteral(paths)}, hive_partitioning = false, union_by_name = true)`;
  };
  // DuckDB reads a file list in order, a UNION ALL's branches one after another, and COPY keeps that
  // order (preserve_insertion_order, the default). Files that overlap no other are read together.
  const parts: string[] = [];
  let alone: string[] = [];
  for (const run of opts.runs) {
    if (run.length === 1) {
      alone.push(run[0].path);
      continue;
    }
    if (alone.length) parts.push(`(${read(alone)})`);
    alone = [];
    for (const [paths, where, sorted] of runParts(run, t)) {
      parts.push(`(SELECT * FROM (${read(paths)}) WHERE ${where}${sorted ? ` ORDER BY ${t}` : ''})`);
    }
  }
  if (alone.length) parts.push(`(${read(alone)})`);
  const sql =
    `COPY (${parts.length === 1 ? parts[0].slice(1, -1) : parts.join(' UNION ALL ')}) TO ${sqlString(opts.target)} (FORMAT parquet, COMPRESSION zstd, ` +
    `COMPRESSION_LEVEL ${opts.zstdLevel}, ROW_GROUP_SIZE ${opts.rowGroupRows}, RETURN_STATS)`;
  return withConnection(instance, async (conn) => {
    const [row] = (await conn.runAndReadAll(sql)).getRowObjectsJson();
    return { ...fileStatsFromCopy(row, opts.timeColumn), path: opts.target };
  });
}

/**
 * Merges one group of a worker's own small files into one file. One manifest adds the merged file
 * and removes its inputs, so readers switch atomically; the inputs stay in storage for the grace
 * period, for queries that picked them before. A merged file that never made it into a manifest is
 * deleted again.
 */
export async function mergeGroup(ctx: StorageContext, manifests: Manifests, ds: Dataset, group: FileEntry[]): Promise<void> {
  const started = Date.now();
  const { nodeId } = ctx.settings;
  const columns = Object.entries(ds.schema) as [string, ColumnType][];
  const seq = manifests.reserve();
  const name = compactedFileName(ds.meta.generation, nodeId, seq);
  const staging = stagingDir(ctx.settings.dataDir, `compact-${randomUUID().slice(0, 8)}-${name}`);
  // planCompaction lists a group's files by their first time.
  const runs = timeRuns(group);
  const held = await ctx.store.acquire(group.map((f) => f.key));
  const key = dataFileKey(ds.meta.name, hourPartition(group[0].key)!, name);
  let uploaded = false;
  const indexUploads: string[] = [];
  let committed = false;
  try {
    const written = await mergeParquet(ctx.duck, {
      runs: runs.map((run) => run.map((i) => ({ path: held.paths[i], minMs: group[i].minMs, maxMs: group[i].maxMs, columns: group[i].columns }))),
      columns,
      timeColumn: ds.meta.timeColumn,
      target: staging,
      zstdLevel: ctx.settings.zstdLevel,
      rowGroupRows: ctx.settings.rowGroupRows,
    });
    uploaded = true;
    await ctx.store.putFile(key, staging);
    const seriesIndex = await uploadSeriesIndex(ctx, key, staging, columns, ds.meta.timeColumn, indexUploads);
    const traceBloom = await traceBloomOf(ctx.duck, key, staging, columns);
    failpoint('compaction-after-upload');
    if (ds.deleted) return;
    await manifests.commit(ds, seq, {
      add: [
        {
          key,
          rows: written.rows,
          bytes: written.bytes,
          minMs: written.minMs,
          maxMs: written.maxMs,
          columns: columns.map(([n]) => n),
          nodeId,
          rawBytes: group.reduce((sum, f) => sum + (f.rawBytes ?? 0), 0),
          ...(seriesIndex ? { seriesIndex } : {}),
          ...(traceBloom ? { traceBloom } : {}),
        },
      ],
      remove: group.map((f) => f.key),
      walSegments: [],
      ingestedBytes: 0,
    });
    committed = true;
    ctx.written?.(key, writtenTypes(columns, ds.meta.timeColumn));
    failpoint('compaction-after-manifest');
    compactions.inc({ result: 'ok' });
    compactionDuration.observe((Date.now() - started) / 1000);
    log.info('compacted', { dataset: ds.meta.name, files: group.length, sortedFiles: runs.filter((r) => r.length > 1).reduce((n, r) => n + r.length, 0), rows: written.rows, bytes: written.bytes, ms: Date.now() - started });
  } finally {
    held.release();
    await fs.rm(staging, { force: true });
    await fs.rm(`${staging}.series`, { force: true });
    if (uploaded && !committed) await ctx.store.delete([key, ...indexUploads]).catch(() => undefined);
  }
}

/**
 * Pause after each merge before the next one. DuckDB's allocator (jemalloc, with background threads)
 * returns a merge's freed memory to the system only as it ages, over a second or two, and each merge
 * runs on whichever thread of Node's pool is free, so merges run back to back (every dataset's hour,
 * one after another) stacked their freed memory: measured on four merges of the benchmark's files,
 * +175–199 MB of RSS back to back against +82–118 MB with a pause of 1–2 s between them (what a
 * merge left unreturned after the pause: 24–104 MB after 1 s, 12–46 MB after 2 s; in the service a
 * merge 1.1 s after another still found 65 MB of it).
 */
export const MERGE_SETTLE_MS = 2000;

/**
 * One compaction pass over a dataset: merges each group `planCompaction` picks, skipping quarantined
 * files. A file the catalog lists but the store has lost is quarantined (so the next pass leaves it
 * out) instead of failing the pass forever. Returns how many files were merged. Each merge takes its
 * `turn` among the flushes (see inTurn), so a merge and a flush never hold the storage DuckDB's
 * memory at the same time (measured: a flush of OTLP spans beside a merge took the main process to
 * 408 MB of RSS, each alone +50–130 MB over ~280 MB).
 */
export async function compactDataset(
  ctx: StorageContext,
  manifests: Manifests,
  ds: Dataset,
  turn: Turn = (fn) => fn(),
  /** The service is shutting down: no further merge, and no pause after the last one. */
  stopped: () => boolean = () => false,
  /** A large file to rewrite anyway (see UPGRADES_PER_PASS). */
  rewrite?: (f: FileEntry) => boolean,
): Promise<number> {
  let merged = 0;
  const files = ds.catalog.all().filter((f) => !ctx.quarantine.has(f.key));
  for (const group of planCompaction(files, ctx.settings.nodeId, ctx.settings.compactionTargetBytes, rewrite)) {
    if (ds.deleted || stopped()) break;
    try {
      await turn(() => mergeGroup(ctx, manifests, ds, group));
      merged += group.length;
      // What a merge leaves in the storage DuckDB stays until the instance closes: close it once unused.
      releaseDuckDB(ctx.duck);
      // The pause is cut short by a shutdown, which waits for the compaction under way: a pass over
      // hundreds of groups would otherwise hold the shutdown for minutes.
      for (let waited = 0; waited < MERGE_SETTLE_MS && !stopped(); waited += 100) await new Promise((r) => setTimeout(r, 100));
    } catch (err) {
      if (isMissingObject(err)) {
        ctx.quarantine.add({ key: err.key, kind: 'parquet', dataset: ds.meta.name, reason: 'listed in the catalog but missing from the store' });
        continue;
      }
      // A failing group ends only itself: one pass's error used to end the dataset's whole pass, and
      // the same group failing first on every pass left every other hour uncompacted for good (issue
      // 36). The group is planned again on the next pass.
      compactions.inc({ result: 'failed' });
      log.warn('compaction of a group failed; the other groups go on, this one is tried again next pass', {
        dataset: ds.meta.name,
        hour: hourPartition(group[0].key),
        files: group.length,
        error: (err as Error).message,
      });
    }
  }
  return merged;
}
