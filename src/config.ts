import * as os from 'node:os';
import * as path from 'node:path';
import { flushableColumns, memoryBudget, sizedDefaults } from './memoryBudget.ts';
import { envSchema, parseBytes, type Env } from './settings.ts';

export { envSchema, parseDurationMs, settingGroups } from './settings.ts';

export type Config = ReturnType<typeof loadConfig>;

function pgSettings(e: Env) {
  if (e.P_PG_ADDR.trim().toLowerCase() === 'off') return undefined;
  const m = /^(.*):(\d+)$/.exec(e.P_PG_ADDR);
  if (!m) throw new Error(`invalid configuration: P_PG_ADDR must be host:port or off, got ${e.P_PG_ADDR}`);
  if (Boolean(e.P_PG_TLS_CERT) !== Boolean(e.P_PG_TLS_KEY)) throw new Error('invalid configuration: P_PG_TLS_CERT and P_PG_TLS_KEY go together');
  return {
    host: m[1] || '0.0.0.0',
    port: Number(m[2]),
    tlsCert: e.P_PG_TLS_CERT,
    tlsKey: e.P_PG_TLS_KEY,
    requireTls: e.P_PG_REQUIRE_TLS === 'true',
    maxConnections: e.P_PG_MAX_CONNECTIONS,
    idleTimeoutMs: e.P_PG_IDLE_TIMEOUT,
    maxPrepared: e.P_PG_MAX_PREPARED,
    maxSessionStateBytes: e.P_PG_MAX_SESSION_STATE,
    maxKeyStateBytes: e.P_PG_MAX_KEY_STATE,
  };
}

/** Console sessions, and OpenID Connect sign-in when P_OIDC_ISSUER is set (else `oidc` is undefined). */
function ssoSettings(e: Env) {
  if (e.P_OIDC_ISSUER && !e.P_OIDC_CLIENT_ID) throw new Error('invalid configuration: P_OIDC_ISSUER needs P_OIDC_CLIENT_ID');
  const origin = e.P_ORIGIN_URI ? new URL(e.P_ORIGIN_URI).origin : undefined;
  const oidc = e.P_OIDC_ISSUER
    ? {
        issuer: e.P_OIDC_ISSUER,
        clientId: e.P_OIDC_CLIENT_ID ?? '',
        clientSecret: e.P_OIDC_CLIENT_SECRET,
        scope: e.P_OIDC_SCOPE,
        roleClaim: e.P_OIDC_ROLE_CLAIM,
        roleMap: e.P_OIDC_ROLE_MAP,
        defaultRole: e.P_OIDC_DEFAULT_ROLE || undefined,
      }
    : undefined;
  return { origin, sessionTtlMs: e.P_SESSION_TTL, oidc };
}

function icebergSettings(e: Env) {
  if (e.P_ICEBERG === 'off') return undefined;
  const push = e.P_ICEBERG_PUSH_URI ? { uri: e.P_ICEBERG_PUSH_URI, token: e.P_ICEBERG_PUSH_TOKEN, warehouse: e.P_ICEBERG_PUSH_WAREHOUSE, namespace: e.P_ICEBERG_NAMESPACE } : undefined;
  return { intervalMs: e.P_ICEBERG_INTERVAL, snapshotRetentionMs: e.P_ICEBERG_SNAPSHOT_RETENTION, namespace: e.P_ICEBERG_NAMESPACE, s3PublicEndpoint: e.P_ICEBERG_S3_PUBLIC_ENDPOINT, push };
}

/** The PromQL settings (flat in the config, as they were before this helper). */
function promqlSettings(e: Env, sized: ReturnType<typeof sizedDefaults>) {
  return {
    promqlMaxSamples: e.P_PROMQL_MAX_SAMPLES,
    /** Each query worker's PromQL sample cache (0: none). */
    promqlCacheBytes: e.P_PROMQL_CACHE_BYTES ?? Math.floor((e.P_QUERY_WORKER_MAX_MEMORY ?? sized.queryWorkerMaxBytes) / 8),
    /** The in-process label index's bound per dataset (0: off). */
    promqlLabelIndexBytes: e.P_PROMQL_LABEL_INDEX_BYTES,
  };
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env) {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new Error(`invalid configuration: ${problems}`);
  }
  const e = parsed.data;
  const budget = e.P_MEMORY_BUDGET ? { bytes: e.P_MEMORY_BUDGET, source: 'P_MEMORY_BUDGET' } : memoryBudget();
  const sized = sizedDefaults(budget.bytes);
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
    /** Users and roles (docs/users.md): the store's poll period and the sign-in guard. */
    access: {
      pollMs: e.P_ACCESS_POLL,
      signIn: { maxUserFailures: e.P_SIGNIN_MAX_USER_FAILURES, maxAddressFailures: e.P_SIGNIN_MAX_ADDRESS_FAILURES, windowMs: e.P_SIGNIN_FAILURE_WINDOW },
    },
    nodeId: e.P_NODE_ID,
    logLevel: e.P_LOG_LEVEL,
    /** Test-only fault injection that is set (src/failpoint.ts reads it itself): the start log warns. */
    faultInjection: Object.entries({ P_FAILPOINT: e.P_FAILPOINT, P_FAULT: e.P_FAULT }).filter(([, v]) => v),
    ...promqlSettings(e, sized),
    /** The HTTP server's group: its connections and the body limit of every route. */
    server: {
      maxBodyBytes: e.P_MAX_BODY_BYTES,
      maxConnections: e.P_MAX_CONNECTIONS,
      ingestConnections: e.P_INGEST_CONNECTIONS,
      headersTimeoutMs: e.P_HEADERS_TIMEOUT,
      tailPerKey: e.P_TAIL_PER_KEY,
    },
    /** The ingest service's group: admission, body reading and the per-request limits of every front door. */
    ingest: ingestGroup(e, sized),
    /** The storage engine's group (its data dir, node id and delete grace are added where it starts). */
    engine: engineGroup(e, sized),
    /** The service's own DuckDB instance, which flushes and compacts. */
    storageDuckDB: {
      threads: e.P_STORAGE_THREADS ?? sized.storageThreads,
      memoryLimit: e.P_STORAGE_MEMORY_LIMIT ?? mib(sized.storageMemoryBytes),
      idleMs: e.P_STORAGE_DUCKDB_IDLE,
    },
    storage: e.P_STORAGE,
    s3: {
      url: e.P_S3_URL,
      bucket: e.P_S3_BUCKET ?? '',
      region: e.P_S3_REGION,
      accessKey: e.P_S3_ACCESS_KEY,
      secretKey: e.P_S3_SECRET_KEY,
    },
    cacheBytes: e.P_CACHE_BYTES,
    /** Iceberg publishing and the REST catalog; undefined with P_ICEBERG=off. */
    iceberg: icebergSettings(e),
    /** What the memory-sized defaults derive from, and where that figure came from. */
    memoryBudget: budget,
    /** The saved filters' group. */
    filters: {
      maxBytes: e.P_FILTER_MAX_BYTES,
      perKey: e.P_FILTERS_PER_KEY,
    },
    otlpGrpc: {
      addr: e.P_OTLP_GRPC_ADDR.trim().toLowerCase() === 'off' ? undefined : e.P_OTLP_GRPC_ADDR,
      maxConnectionAgeMs: e.P_OTLP_GRPC_MAX_CONNECTION_AGE,
      maxConnectionAgeGraceMs: e.P_OTLP_GRPC_MAX_CONNECTION_AGE_GRACE,
      maxStreams: e.P_OTLP_GRPC_MAX_STREAMS,
      maxCalls: e.P_OTLP_GRPC_MAX_CALLS,
      // The Collector's batches are often larger than gRPC's 4 MiB default: the same limit as an HTTP body.
      maxMessageBytes: e.P_MAX_BODY_BYTES,
    },
    /** The query worker pool's group (its work dir is added where it starts). */
    queryPool: queryPoolGroup(e, sized),
    /** What every query is held to (the sandbox's statement checks and the executor's answer limits). */
    queryLimits: {
      timeoutMs: e.P_QUERY_TIMEOUT,
      maxRows: e.P_QUERY_MAX_ROWS,
      maxBytes: e.P_QUERY_MAX_RESULT_BYTES,
      fileTableBytes: e.P_QUERY_FILE_TABLE_BYTES ?? Math.min(32 * 1024 * 1024, Math.floor((e.P_QUERY_WORKER_MAX_MEMORY ?? sized.queryWorkerMaxBytes) / 8)),
      maxSqlBytes: e.P_QUERY_MAX_SQL_BYTES,
      maxDepth: e.P_QUERY_MAX_DEPTH,
    },
    queryPlanCacheBytes: e.P_QUERY_PLAN_CACHE_BYTES,
    /** The trace query APIs (Jaeger, Tempo). */
    traces: { lookbackMs: e.P_TRACES_LOOKBACK, defaultDataset: e.P_TRACES_DEFAULT_DATASET },
    pg: pgSettings(e),
    /** Console sessions and single sign-on (docs/users.md). */
    sso: ssoSettings(e),
  };
}

type Sized = ReturnType<typeof sizedDefaults>;

const mib = (b: number) => `${Math.floor(b / 1024 / 1024)}MiB`;

/**
 * P_MAX_COLUMNS, or fewer when the storage DuckDB's memory could not flush that many columns (a wide
 * dataset never flushed: issue 30 A11). A P_STORAGE_MEMORY_LIMIT this cannot read (DuckDB accepts more
 * forms) counts as the sized default.
 */
function effectiveMaxColumns(e: Env, sized: Sized): number {
  let storageBytes = sized.storageMemoryBytes;
  try {
    if (e.P_STORAGE_MEMORY_LIMIT) storageBytes = parseBytes(e.P_STORAGE_MEMORY_LIMIT);
  } catch {
    // keep the sized default
  }
  return Math.min(e.P_MAX_COLUMNS, flushableColumns(storageBytes, e.P_FLUSH_BYTES ?? sized.flushBytes));
}

function ingestGroup(e: Env, sized: Sized) {
  return {
    maxBodyBytes: e.P_MAX_BODY_BYTES,
    maxNesting: e.P_MAX_NESTING,
    maxDecompressedBytes: e.P_MAX_DECOMPRESSED_BYTES,
    maxInflightBytes: e.P_MAX_INFLIGHT_BYTES ?? sized.inflightBytes,
    inflightWaitMs: e.P_INFLIGHT_WAIT,
    keyShare: e.P_INGEST_KEY_SHARE,
    bodyTimeoutMs: e.P_INGEST_BODY_TIMEOUT,
    minBodyRate: Math.max(1, e.P_INGEST_MIN_BODY_RATE),
    maxEventsPerRequest: e.P_MAX_EVENTS_PER_REQUEST,
    maxValuesPerRequest: e.P_MAX_VALUES_PER_REQUEST,
    eventTimeFutureMs: e.P_EVENT_TIME_FUTURE_LIMIT,
    signalTimePastMs: e.P_SIGNAL_TIME_PAST_LIMIT,
    // The placement of values: a dataset's column limit, and the distinct names one request may bring
    // (docs/configuration.md, P_MAX_COLUMNS).
    maxColumns: effectiveMaxColumns(e, sized),
    maxNamesPerRequest: Math.max(1000, 4 * e.P_MAX_COLUMNS),
    // Decoding threads beside the event loop: one per core. Measured on 2 cores (interleaved pairs, 500k
    // JSON events in batches of 1,000): 1 worker 126k / 81k events/s, 2 workers 137k / 109k, the same
    // CPU per event; each worker's isolate costs ~22–25 MB of RSS idle (the idle tree: 271 / 252 / 227 MB
    // with 2 / 1 / 0 threads), ~100 MB of peak RSS under load; threads run only while used.
    workers: e.P_INGEST_WORKERS ?? Math.max(1, Math.min(4, os.availableParallelism())),
    workerIdleMs: e.P_INGEST_WORKER_IDLE,
    /** Each ingest thread's V8 young generation, whole MiB (at least 1). */
    workerYoungGenerationMb: Math.max(1, Math.floor((e.P_INGEST_WORKER_YOUNG_GENERATION ?? sized.ingestYoungGenerationBytes) / 1024 / 1024)),
  };
}

function engineGroup(e: Env, sized: Sized) {
  return {
    maxColumns: effectiveMaxColumns(e, sized),
    flushIntervalMs: e.P_FLUSH_INTERVAL,
    flushBytes: e.P_FLUSH_BYTES ?? sized.flushBytes,
    diskReserveBytes: e.P_DISK_RESERVE,
    metricMetadataBytes: e.P_METRIC_METADATA_MEMORY ?? sized.metricMetadataBytes,
    walMaxBytes: e.P_WAL_MAX_BYTES,
    zstdLevel: e.P_PARQUET_ZSTD_LEVEL,
    rowGroupRows: e.P_PARQUET_ROW_GROUP_ROWS,
    catalogRefreshMs: e.P_CATALOG_REFRESH,
    compactionIntervalMs: e.P_COMPACTION_INTERVAL,
    compactionTargetBytes: e.P_COMPACTION_TARGET_BYTES,
    orphanSweepMs: e.P_ORPHAN_SWEEP_INTERVAL,
  };
}

function queryPoolGroup(e: Env, sized: Sized) {
  return {
    concurrency: e.P_QUERY_CONCURRENCY ?? sized.queryConcurrency,
    perKey: e.P_QUERY_CONCURRENCY_PER_KEY,
    queue: e.P_QUERY_QUEUE,
    reserve: e.P_QUERY_RESERVE,
    queueWaitMs: e.P_QUERY_TIMEOUT,
    threads: e.P_QUERY_THREADS,
    memoryLimit: e.P_QUERY_MEMORY_LIMIT ?? mib(sized.queryMemoryBytes),
    maxRssBytes: e.P_QUERY_WORKER_MAX_MEMORY ?? sized.queryWorkerMaxBytes,
    heapMb: Math.max(64, Math.floor(e.P_QUERY_WORKER_HEAP / 1024 / 1024)),
    warm: e.P_QUERY_WARM_WORKERS,
    cgroup: e.P_QUERY_WORKER_CGROUP,
    idleMs: e.P_QUERY_WORKER_IDLE,
  };
}
