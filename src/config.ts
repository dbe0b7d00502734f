import * as os from 'node:os';
import * as path from 'node:path';
import { z } from 'zod';

/** Sizes such as `10MiB`, `512KB` or plain byte counts. */
function parseBytes(text: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$/i.exec(text);
  if (!m) throw new Error(`not a size: ${text}`);
  const unit = (m[2] ?? '').toLowerCase().replace(/i?b$/, '');
  const scale = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 }[unit];
  if (scale === undefined) throw new Error(`not a size: ${text}`);
  return Math.floor(Number(m[1]) * scale);
}

/** Durations such as `30s`, `500ms`, `10m` or plain milliseconds. */
export function parseDurationMs(text: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/i.exec(text);
  if (!m) throw new Error(`not a duration: ${text}`);
  const scale = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[(m[2] ?? 'ms').toLowerCase()]!;
  return Math.floor(Number(m[1]) * scale);
}

const bytes = (fallback: string) =>
  z
    .string()
    .default(fallback)
    .transform((v, ctx) => {
      try {
        return parseBytes(v);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
        return z.NEVER;
      }
    });

const duration = (fallback: string) =>
  z
    .string()
    .default(fallback)
    .transform((v, ctx) => {
      try {
        return parseDurationMs(v);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
        return z.NEVER;
      }
    });

const int = (fallback: number) => z.coerce.number().int().positive().default(fallback);

const envSchema = z.object({
  P_ADDR: z.string().default('0.0.0.0:8000'),
  P_DATA_DIR: z.string().default('./data'),
  P_API_KEYS: z.string().default(''),
  P_MAX_BODY_BYTES: bytes('10MiB'),
  P_MAX_NESTING: int(10),
  P_MAX_COLUMNS: int(2000),
  P_FLUSH_INTERVAL: duration('20s'),
  P_FLUSH_BYTES: bytes('16MiB'),
  P_QUERY_TIMEOUT: duration('30s'),
  P_QUERY_MEMORY_LIMIT: z.string().default('2GB'),
  P_STORAGE_MEMORY_LIMIT: z.string().default('2GB'),
  P_STORAGE_THREADS: int(1),
  P_QUERY_THREADS: int(2),
  P_QUERY_CONCURRENCY: int(4),
  P_QUERY_CONCURRENCY_PER_KEY: int(2),
  P_QUERY_QUEUE: int(16),
  P_QUERY_MAX_ROWS: int(500_000),
  P_QUERY_MAX_RESULT_BYTES: bytes('64MiB'),
  P_QUERY_MAX_SQL_BYTES: bytes('64KiB'),
  P_QUERY_MAX_DEPTH: int(16),
  P_PROMQL_MAX_SAMPLES: int(50_000_000).describe(
    "Most samples one PromQL query may hold in memory at once (Prometheus' --query.max-samples and its default); past it the query fails with 422. Bounds the query worker's WebAssembly memory.",
  ),
  P_QUERY_PLAN_CACHE_BYTES: bytes('8MiB'),
  P_QUERY_WORKER_HEAP: bytes('512MiB'),
  P_QUERY_WARM_WORKERS: z.coerce.number().int().min(1).max(64).default(1),
  P_PARQUET_ROW_GROUP_ROWS: int(122_880),
  P_PARQUET_ZSTD_LEVEL: int(1),
  P_MAX_DECOMPRESSED_BYTES: bytes('64MiB'),
  P_MAX_INFLIGHT_BYTES: bytes('64MiB'),
  P_INFLIGHT_WAIT: duration('2s'),
  P_MAX_EVENTS_PER_REQUEST: int(100_000),
  P_MAX_VALUES_PER_REQUEST: int(4_000_000),
  P_WAL_MAX_BYTES: bytes('1GiB'),
  P_STORAGE: z.enum(['local', 's3']).default('local'),
  P_S3_URL: z.string().optional(),
  P_S3_BUCKET: z.string().optional(),
  P_S3_REGION: z.string().default('us-east-1'),
  P_S3_ACCESS_KEY: z.string().optional(),
  P_S3_SECRET_KEY: z.string().optional(),
  P_NODE_ID: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/).optional(),
  P_CACHE_BYTES: bytes('2GiB'),
  P_CATALOG_REFRESH: duration('5s'),
  P_COMPACTION_INTERVAL: duration('60s'),
  P_COMPACTION_TARGET_BYTES: bytes('128MiB'),
  P_ORPHAN_SWEEP_INTERVAL: duration('10m'),
  P_INGEST_WORKERS: z.coerce.number().int().min(0).max(64).optional(),
  P_LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error']).default('info'),
});

export type Config = ReturnType<typeof loadConfig>;

export function loadConfig(env: NodeJS.ProcessEnv = process.env) {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new Error(`invalid configuration: ${problems}`);
  }
  const e = parsed.data;
  const addr = /^(.*):(\d+)$/.exec(e.P_ADDR);
  if (!addr) throw new Error(`invalid configuration: P_ADDR must be host:port, got ${e.P_ADDR}`);
  const dataDir = path.resolve(e.P_DATA_DIR);
  if (e.P_STORAGE === 's3' && (!e.P_S3_URL || !e.P_S3_BUCKET)) {
    throw new Error('invalid configuration: P_STORAGE=s3 needs P_S3_URL and P_S3_BUCKET');
  }
  return {
    host: addr[1] || '0.0.0.0',
    port: Number(addr[2]),
    dataDir,
    apiKeys: e.P_API_KEYS,
    maxBodyBytes: e.P_MAX_BODY_BYTES,
    maxNesting: e.P_MAX_NESTING,
    maxColumns: e.P_MAX_COLUMNS,
    flushIntervalMs: e.P_FLUSH_INTERVAL,
    flushBytes: e.P_FLUSH_BYTES,
    queryTimeoutMs: e.P_QUERY_TIMEOUT,
    queryMemoryLimit: e.P_QUERY_MEMORY_LIMIT,
    storageMemoryLimit: e.P_STORAGE_MEMORY_LIMIT,
    // One thread for flushes and compaction: they run in the background, and a second thread added
    // ~30-40 MB to a flush's peak memory (each thread builds its own row groups) for little speed.
    storageThreads: e.P_STORAGE_THREADS,
    queryThreads: e.P_QUERY_THREADS,
    queryConcurrency: e.P_QUERY_CONCURRENCY,
    queryConcurrencyPerKey: e.P_QUERY_CONCURRENCY_PER_KEY,
    queryQueue: e.P_QUERY_QUEUE,
    queryMaxRows: e.P_QUERY_MAX_ROWS,
    queryMaxResultBytes: e.P_QUERY_MAX_RESULT_BYTES,
    queryMaxSqlBytes: e.P_QUERY_MAX_SQL_BYTES,
    queryMaxDepth: e.P_QUERY_MAX_DEPTH,
    promqlMaxSamples: e.P_PROMQL_MAX_SAMPLES,
    queryPlanCacheBytes: e.P_QUERY_PLAN_CACHE_BYTES,
    queryWorkerHeapMb: Math.max(64, Math.floor(e.P_QUERY_WORKER_HEAP / 1024 / 1024)),
    queryWarmWorkers: e.P_QUERY_WARM_WORKERS,
    rowGroupRows: e.P_PARQUET_ROW_GROUP_ROWS,
    zstdLevel: e.P_PARQUET_ZSTD_LEVEL,
    maxDecompressedBytes: e.P_MAX_DECOMPRESSED_BYTES,
    maxInflightBytes: e.P_MAX_INFLIGHT_BYTES,
    inflightWaitMs: e.P_INFLIGHT_WAIT,
    maxEventsPerRequest: e.P_MAX_EVENTS_PER_REQUEST,
    maxValuesPerRequest: e.P_MAX_VALUES_PER_REQUEST,
    walMaxBytes: e.P_WAL_MAX_BYTES,
    storage: e.P_STORAGE,
    s3: {
      url: e.P_S3_URL,
      bucket: e.P_S3_BUCKET ?? '',
      region: e.P_S3_REGION,
      accessKey: e.P_S3_ACCESS_KEY,
      secretKey: e.P_S3_SECRET_KEY,
    },
    nodeId: e.P_NODE_ID,
    cacheBytes: e.P_CACHE_BYTES,
    catalogRefreshMs: e.P_CATALOG_REFRESH,
    compactionIntervalMs: e.P_COMPACTION_INTERVAL,
    compactionTargetBytes: e.P_COMPACTION_TARGET_BYTES,
    orphanSweepMs: e.P_ORPHAN_SWEEP_INTERVAL,
    logLevel: e.P_LOG_LEVEL,
    // Decoding threads beside the event loop: one per core. Measured on 2 cores (interleaved pairs, 500k
    // JSON events in batches of 1,000): 1 worker 126k / 81k events/s, 2 workers 137k / 109k, the same
    // CPU per event; each worker's isolate costs ~50 MB idle, ~100 MB of peak RSS under load.
    ingestWorkers: e.P_INGEST_WORKERS ?? Math.max(1, Math.min(4, os.availableParallelism())),
  };
}
