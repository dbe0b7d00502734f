import type { DuckDBInstance } from '@duckdb/node-api';
import type { ColumnType } from '../ingest/types.ts';
import { castProjection, listLiteral, sqlIdent, sqlString, withConnection } from '../duckdb.ts';
import type { FileEntry } from './catalog.ts';
import { fileStatsFromCopy, type WrittenFile } from './parquetWriter.ts';

/** `date=…/hour=…` of a file key `{dataset}/date=…/hour=…/[minute=…/]name.parquet`. */
export function hourPartition(key: string): string | undefined {
  return /\/(date=[^/]+\/hour=[^/]+)\//.exec(key)?.[1];
}

/**
 * Groups of files to merge: per hour partition, this worker's files smaller than the target size, when
 * there are at least two. Only a worker's own files are merged, so compactors on several workers never
 * pick the same file and their manifests never conflict. Files that reached the target are left alone,
 * so a file is rewritten only while it is small (bounded write amplification).
 */
export function planCompaction(files: FileEntry[], nodeId: string, targetBytes: number): FileEntry[][] {
  const groups = new Map<string, FileEntry[]>();
  for (const f of files) {
    if (f.nodeId !== nodeId || f.bytes >= targetBytes) continue;
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
  return out;
}

/** Merges Parquet files into one, sorted by time, every column cast to the dataset's current type. */
export async function mergeParquet(
  instance: DuckDBInstance,
  opts: {
    paths: string[];
    presentColumns: Set<string>;
    columns: [string, ColumnType][];
    timeColumn: string;
    target: string;
    zstdLevel: number;
    rowGroupRows: number;
  },
): Promise<Omit<WrittenFile, 'partition'>> {
  const proj = castProjection(opts.columns, opts.presentColumns);
  const sql =
    `COPY (SELECT ${proj} FROM read_parquet(${listLiteral(opts.paths)}, hive_partitioning = false, union_by_name = true) ` +
    `ORDER BY ${sqlIdent(opts.timeColumn)}) TO ${sqlString(opts.target)} (FORMAT parquet, COMPRESSION zstd, ` +
    `COMPRESSION_LEVEL ${opts.zstdLevel}, ROW_GROUP_SIZE ${opts.rowGroupRows}, RETURN_STATS)`;
  return withConnection(instance, async (conn) => {
    const [row] = (await conn.runAndReadAll(sql)).getRowObjectsJson();
    return { ...fileStatsFromCopy(row, opts.timeColumn), path: opts.target };
  });
}
