import * as fs from 'node:fs';
import * as os from 'node:os';

/**
 * The memory this process (and its query workers) may use: the limit of its memory cgroup (v2
 * `memory.max`, v1 `memory.limit_in_bytes`), else the machine's total memory. Every default that
 * grows with memory is sized from this (config.ts; docs/memory.md has the table), so the service fits
 * the container it is given without settings.
 */
export function memoryBudget(proc = '/proc/self/cgroup', root = '/sys/fs/cgroup'): { bytes: number; source: string } {
  const total = os.totalmem();
  const lines = readText(proc)?.split('\n') ?? [];
  const candidates: [string, string][] = [];
  for (const line of lines) {
    const [, controllers, group] = line.split(':');
    if (group === undefined) continue;
    // v2: "0::/path"; v1: "4:memory:/path" (the v1 hierarchy is mounted at <root>/memory).
    if (controllers === '') candidates.push([`${root}${group}/memory.max`, 'cgroup v2']);
    else if (controllers.split(',').includes('memory')) candidates.push([`${root}/memory${group}/memory.limit_in_bytes`, 'cgroup v1']);
  }
  for (const [file, source] of candidates) {
    const text = readText(file)?.trim();
    if (!text || text === 'max') continue;
    const bytes = Number(text);
    // v1 says "no limit" with a huge number (a page-rounded 2^63).
    if (Number.isFinite(bytes) && bytes > 0 && bytes < total) return { bytes, source };
  }
  return { bytes: total, source: 'total memory' };
}

function readText(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

const MiB = 1024 * 1024;
const clamp = (v: number, lo: number, hi: number) => Math.max(lo, Math.min(hi, Math.floor(v)));

/**
 * Defaults sized from the budget (the table in docs/memory.md). The main process keeps about half for
 * itself: Node's heap and ingest threads (~25 MB each, while used), request bodies in flight, the WAL's
 * group commits; the storage DuckDB (flush, compaction) gets 1/6; the query workers share 1/3, each
 * worker capped (RSS) at its share, DuckDB inside it at 1/2 of that (list and string intermediates
 * are not in DuckDB's accounting, so the rest is the margin). At 512 MiB: 85 MiB storage, one query
 * worker of 170 MiB (DuckDB 85 MiB), 16 MiB in flight, ingest threads with a 12 MiB young generation;
 * at 8 GiB and more, today's fixed defaults.
 */
export function sizedDefaults(budget: number) {
  const queryShare = budget / 3;
  // Each query worker needs ~60 MB of its own (Node, DuckDB loaded) before any data: at least 160 MiB each.
  const queryConcurrency = clamp(queryShare / (160 * MiB), 1, 4);
  const workerCap = clamp(queryShare / queryConcurrency, 128 * MiB, 4096 * MiB);
  return {
    storageMemoryBytes: clamp(budget / 6, 48 * MiB, 2048 * MiB),
    // One thread at every size: a second one added ~30–40 MB to a flush's peak for little speed (measured).
    storageThreads: 1,
    queryConcurrency,
    queryWorkerMaxBytes: workerCap,
    queryMemoryBytes: clamp(workerCap / 2, 32 * MiB, 2048 * MiB),
    inflightBytes: clamp(budget / 32, 16 * MiB, 64 * MiB),
    flushBytes: clamp(budget / 32, 4 * MiB, 16 * MiB),
    metricMetadataBytes: clamp(budget / 64, 4 * MiB, 32 * MiB),
    // Node sizes every isolate's heap from the cgroup limit: at 512 MiB a young generation of 3 MiB
    // (1 MiB semi-spaces) against 48 MiB on a large machine, so the ingest threads, which allocate
    // every decoded value, scavenged ~16× as often and promoted short-lived values into the old
    // generation: 16.4–18.3 s of CPU per million JSON events in a 512 MiB cgroup against 11.8–13.0
    // without (bench/container.ts, docs/performance.md). Three semi-spaces of 1/128 of the budget, at
    // least 12 MiB (at 512 MiB, which took 14 s) and at most 16 MiB: 48 MiB, the cap until 2026-11-28,
    // cost the same CPU per event outside a cgroup (10.1 against 10.2 s per million JSON events, three
    // pairs) and ~35 MB more at the peak, two threads' semi-spaces (docs/memory.md).
    ingestYoungGenerationBytes: clamp((3 * budget) / 128, 12 * MiB, 16 * MiB),
  };
}

/**
 * Columns a dataset may get so that its flush fits the storage DuckDB's memory (issue 30 A11). A flush
 * reads its WAL with `read_json` and writes one Parquet row group with a writer per column. Measured
 * with DuckDB alone (1 thread, zstd; docs/memory.md "Wide datasets"), what it needs grows with both the
 * columns and the WAL it converts: this model, fitted to stay above every failing run measured, is
 * 32 MiB + 1.5 × the WAL bytes + 512 KiB per column, the WAL taken at its most (P_FLUSH_BYTES). Fewer
 * rows per row group or `preserve_insertion_order = false` did not lower it, so the bound is on
 * columns: a dataset at it puts further fields into `p_overflow` before it could become unflushable.
 * Never below 16.
 */
export function flushableColumns(storageMemoryBytes: number, flushBytes: number): number {
  return Math.max(16, Math.floor((storageMemoryBytes - 32 * MiB - 1.5 * flushBytes) / (512 * 1024)));
}
