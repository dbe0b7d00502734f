/**
 * Every setting: its environment variable, type, default and description, in groups (docs/configuration.md
 * is generated from these). What the service makes of them is config.ts.
 */
import { z } from 'zod';

/** Sizes such as `10MiB`, `512KB` or plain byte counts. */
export function parseBytes(text: string): number {
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

/** A size that, when not set, is sized from the memory budget (memoryBudget.ts). */
const sizedBytes = () =>
  z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined || v === '') return undefined;
      try {
        return parseBytes(v);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
        return z.NEVER;
      }
    });

const int = (fallback: number) => z.coerce.number().int().positive().default(fallback);

// Every setting, one per line, grouped by the subsystem it configures: its variable, its type and default,
// and what it does (docs/configuration.md is generated from these descriptions: `npm run docs:config`).
// The default is stated once, here; loadConfig hands each subsystem its group.

/** The HTTP server, keys, logs and this worker's identity. */
const serverSettings = {
  P_ADDR: z.string().default('0.0.0.0:8000').describe('`host:port` the HTTP server listens on. Port `0`: any free port; the ports bound are in the `listening` log line (`port`, `grpcPort`, `pgPort`).'),
  P_DATA_DIR: z.string().default('./data').describe('Where everything local is kept: the WAL, the local object store, the S3 file cache, the generated key and node id.'),
  P_API_KEYS: z.string().default('').describe('API keys, comma-separated `key[:role[:dataset|dataset…]]` (roles `admin`, `writer`, `reader`; see docs/http-api.md#authentication). Empty: an admin key is generated on first start and kept in `P_DATA_DIR/api-key`, so the service never runs open.'),
  P_NODE_ID: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/).optional().describe("This worker's name in object keys (1–64 letters, digits, `_`, `-`). Unset: one is generated on first start and kept in `P_DATA_DIR/node-id`; each worker on a shared bucket needs its own."),
  P_LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error']).default('info').describe('Least severe log level written: `debug`, `info`, `warn` or `error`.'),
  P_MAX_BODY_BYTES: bytes('10MiB').describe('Largest request body, any route (413 above). Ingest clients batch well below it; 10 MiB bounds what one request holds while it is read.'),
  P_MAX_CONNECTIONS: z.coerce
    .number()
    .int()
    .positive()
    .optional()
    .describe('Most TCP connections open at once; default half the open-files limit (at most 8192), so the WAL, flushes, query workers and S3 keep their file descriptors.'),
  P_INGEST_CONNECTIONS: z.coerce
    .number()
    .int()
    .min(0)
    .optional()
    .describe(
      'Connections of P_MAX_CONNECTIONS that only the doors taking ingestion (HTTP, OTLP/gRPC) may use, so a flood on another door (PostgreSQL) cannot lock ingest clients out. Default: an eighth of P_MAX_CONNECTIONS.',
    ),
  P_TAIL_PER_KEY: int(4).describe(
    'Most live-tail long polls (`POST /api/v1/tail` waiting for rows) one API key may hold at once (429 beyond): a console tab holds one, so a key cannot fill the connection budget with waits.',
  ),
  P_HEADERS_TIMEOUT: duration('10s').describe(
    'Time a connection has to send a complete request head (also a connection that sends nothing): long for any real client, short enough that idle sockets cannot pile up.',
  ),
  P_FILTER_MAX_BYTES: bytes('256KiB').describe(
    'Largest saved filter (its JSON), in bytes: room for a query at P_QUERY_MAX_SQL_BYTES and a console builder, small enough that listing every key\'s filters stays cheap.',
  ),
  P_FILTERS_PER_KEY: int(100).describe('Most saved filters one API key may own: any reader may save, so the total stays bounded by keys x this.'),
};

/** Decoding request bodies and the bounds every ingest request is held to. */
const ingestSettings = {
  P_MAX_NESTING: int(10).describe('Deepest JSON nesting accepted (400 above): deeper objects are almost always a mistake, and flattening them makes unwieldy column names.'),
  P_MAX_DECOMPRESSED_BYTES: bytes('64MiB').describe('Largest body after gzip or snappy decompression (413 above), checked while inflating, so a compression bomb is cut off early.'),
  P_MAX_INFLIGHT_BYTES: sizedBytes().describe('Ingest request bytes received, decoded and stored at once. Default: 1/32 of the memory budget, 16–64 MiB.'),
  P_INFLIGHT_WAIT: duration('2s').describe('How long a request that does not fit in `P_MAX_INFLIGHT_BYTES` waits, in arrival order, before 503 + `Retry-After` (`0`: at once). Long enough to absorb a burst, short enough for clients to retry.'),
  P_INGEST_KEY_SHARE: z.coerce
    .number()
    .gt(0)
    .max(1)
    .default(0.5)
    .describe(
      'The fraction of P_MAX_INFLIGHT_BYTES one key may hold while another key sends too (alone, a key may use all of it). Default 0.5: one key cannot starve the others, and a single-key deployment loses nothing.',
    ),
  P_INGEST_BODY_TIMEOUT: duration('10s').describe(
    'How long a request body may take before P_INGEST_MIN_BODY_RATE applies: the body must have arrived within this grace plus its size at the minimum rate, or the connection is closed. The same bound holds for an OTLP/gRPC message and a PostgreSQL message (from its first byte). Default 10s: any client on a working network sends its first bytes well within it.',
  ),
  P_INGEST_MIN_BODY_RATE: bytes('16KiB').describe(
    'The slowest average rate (bytes per second, after P_INGEST_BODY_TIMEOUT) at which an ingest body may arrive. Default 16KiB: a 10 MiB body may take ~11 minutes, while a client trickling bytes to hold connections and budget is cut after the grace.',
  ),
  P_MAX_EVENTS_PER_REQUEST: int(100_000).describe('Most events, OTLP records or data points, or remote-write samples in one request (413 above); bounds the memory one decode takes.'),
  P_EVENT_TIME_FUTURE_LIMIT: duration('1h').describe(
    "How far past the time a request is received an event of a dataset with a time field (X-P-Time-Partition: JSON, Elasticsearch bulk, Loki, HEC) may be timed (400 beyond, nothing of the request stored), and an OTLP record or remote-write sample (see P_SIGNAL_TIME_PAST_LIMIT), as X-P-Time-Partition-Limit bounds the past. Each hour holding events is a Parquet file of its own: one request of events timed over 11 years ahead wrote 100,000 files in one flush.",
  ),
  P_SIGNAL_TIME_PAST_LIMIT: duration('30d').describe(
    "How long before the time a request is received an OTLP log record, span or data point, or a remote-write sample, may be timed; P_EVENT_TIME_FUTURE_LIMIT bounds them ahead. An OTLP record outside is rejected alone (counted in partial_success); a remote-write request with a sample outside is refused whole (400, Prometheus' \"out of bounds\"). Their datasets are partitioned by these times, each hour holding rows a Parquet file of its own: the window bounds the files one flush writes (issue 30 A10). Default 30d, Parseable's default time partition limit; `0`: no bound into the past (PromQL's conformance data starts in 1970).",
  ),
  P_MAX_VALUES_PER_REQUEST: int(4_000_000).describe('Most JSON values or protobuf messages in one request (413 above), counted while decoding.'),
  P_INGEST_WORKERS: z.coerce.number().int().min(0).max(64).optional().describe('Most threads that decode, flatten and serialise request bodies (`0`: on the event loop), started as concurrent requests need them. Unset: one per core, 1–4; each holds ~21 MB PSS idle.'),
  P_INGEST_WORKER_YOUNG_GENERATION: sizedBytes().describe(
    "V8 young generation of each ingest worker thread (its `resourceLimits.maxYoungGenerationSizeMb`, whole MiB), where the values a body decodes into live and die. Default: 3 × 1/128 of the memory budget, 12–16 MiB (48 MiB cost the same CPU per event and ~35 MB more at the peak); Node's own default, sized from a container's limit, is 3 MiB at 512 MiB, which cost a third more CPU per event in garbage collection (docs/memory.md).",
  ),
  P_INGEST_WORKER_IDLE: duration('5s').describe(
    'An ingest worker thread with no request body to decode for this long stops, and its heap (~35–40 MB PSS after a burst at a 48 MiB young generation) goes back; the next bodies start one again, decoded on the event loop meanwhile (`0`: kept once started). Default 5s: a client that sends more often keeps its thread (an OTLP exporter\'s batches, Prometheus remote write under load), and what a burst leaves is not held through the flush, compaction and queries that follow (issue 18\'s workload: docs/memory.md); a thread starts in well under a second.',
  ),
};

/** The write-ahead log, Parquet files, catalog and background work of the storage engine. */
const storageSettings = {
  P_MAX_COLUMNS: int(2000).describe('Most columns a dataset may get from data; further new fields go to `p_overflow` (the distinct-names limit per request is 4× this, at least 1,000). The limit in force is the smaller of this and what a flush can write in the storage DuckDB\'s memory: (storage memory − 32 MiB − 1.5 × P_FLUSH_BYTES) / 512 KiB, at least 16 (58 at a 512 MiB budget, 570 at 2 GiB, this setting from ~1,056 MiB of storage memory, a ~6.2 GiB budget; docs/memory.md "Wide datasets"); the start log\'s `maxColumns` says which.'),
  P_FLUSH_INTERVAL: duration('20s').describe('WAL → Parquet at the latest this long after the first unflushed event; also how stale another worker may see this one.'),
  P_FLUSH_BYTES: sizedBytes().describe('WAL bytes a flush converts at a time. Default: 1/32 of the memory budget, 4–16 MiB (a flush\'s memory grows with it).'),
  P_WAL_MAX_BYTES: bytes('1GiB').describe('WAL size per dataset beyond which ingestion answers 503 + `Retry-After` (flushes failing, e.g. S3 down).'),
  P_METRIC_METADATA_MEMORY: sizedBytes().describe(
    "Memory the remote-write metric metadata of all datasets may hold at once on a worker (each dataset's table is also bounded: 10,000 families). Past it the least recently used datasets' tables are dropped from memory and read back from the store when next needed. Default: 1/64 of the memory budget, 4–32 MiB.",
  ),
  P_DISK_RESERVE: sizedBytes()
    .describe('Free disk space the WAL leaves for flushes (appends get 503 below it). Default: 2 × P_FLUSH_BYTES, at most 1/4 of the file system: room for one flush\'s Parquet files of data that does not compress, so a full disk recovers as the WAL is flushed (on a small file system, lower P_FLUSH_BYTES).'),
  P_PARQUET_ROW_GROUP_ROWS: int(122_880).describe("Rows per Parquet row group (DuckDB's default)."),
  P_PARQUET_ZSTD_LEVEL: int(1).describe('ZSTD level of Parquet files: 1 measured smaller and cheaper than 3 on JSON events and OTLP rows (see CHANGELOG.md).'),
  P_STORAGE_MEMORY_LIMIT: z.string().optional().describe('DuckDB memory limit for flushes and compaction. Default: 1/6 of the memory budget, 48 MiB–2 GiB (beyond it DuckDB spills to P_DATA_DIR/tmp).'),
  P_STORAGE_THREADS: z.coerce.number().int().positive().optional().describe('DuckDB threads for flushes and compaction. Default: 1 at any budget: they run in the background, and each further thread adds ~30–40 MB to a flush for little speed.'),
  P_STORAGE_DUCKDB_IDLE: duration('30s').describe(
    'The storage DuckDB (flushes, compaction, query parsing) unused for this long is closed, and opened again on next use (`0`: kept open). Default 30s: a minute after a burst it held 37–111 MB it no longer needed, which only closing gives back; opening it again takes 10–40 ms.',
  ),
  P_CATALOG_REFRESH: duration('5s').describe("How often a worker reads the shared catalog: other workers' manifests, new and deleted datasets, schemas."),
  P_COMPACTION_INTERVAL: duration('60s').describe("How often compaction merges a worker's small files of one hour."),
  P_COMPACTION_TARGET_BYTES: bytes('128MiB').describe('Size compaction merges small files up to.'),
  P_ORPHAN_SWEEP_INTERVAL: duration('10m').describe('How often the whole store is listed for objects of deleted dataset generations (deleted when two sweeps in a row find them).'),
};

/** Where objects are kept: local disk, or an S3 bucket shared by several workers. */
const objectStoreSettings = {
  P_STORAGE: z.enum(['local', 's3']).default('local').describe('`local` (objects under `P_DATA_DIR/store`) or `s3` (one bucket, shared by every worker).'),
  P_S3_URL: z.string().optional().describe('S3 endpoint URL (AWS or MinIO; path-style addressing). Needed with `P_STORAGE=s3`.'),
  P_S3_BUCKET: z.string().optional().describe('Bucket name. Needed with `P_STORAGE=s3`.'),
  P_S3_REGION: z.string().default('us-east-1').describe('S3 region (MinIO accepts any).'),
  P_S3_ACCESS_KEY: z.string().optional().describe("S3 access key id (unset: the AWS SDK's default credential chain)."),
  P_S3_SECRET_KEY: z.string().optional().describe('S3 secret access key.'),
  P_CACHE_BYTES: bytes('2GiB').describe('Local cache of Parquet files downloaded from S3 for queries (least recently used out).'),
};

/** The SQL sandbox, its worker processes and the limits every query runs under. */
const querySettings = {
  P_QUERY_TIMEOUT: duration('30s').describe('Time limit of one query (408); the worker process is killed and replaced.'),
  P_QUERY_MEMORY_LIMIT: z.string().optional().describe('DuckDB memory limit in each query worker. Default: half of P_QUERY_WORKER_MAX_MEMORY, at most 2 GiB (DuckDB does not count list and string intermediates; the other half is their margin).'),
  P_QUERY_THREADS: int(2).describe('DuckDB threads per query.'),
  P_QUERY_FILE_TABLE_BYTES: sizedBytes().describe("Memory (estimated: twice the raw request bytes behind the rows, plus 40 KiB a column) of small files' rows each query worker keeps in DuckDB tables between queries, within its DuckDB memory limit: a query whose files together fit half of it reads them from there instead of from Parquet (the console's histogram over the last minutes about twice as fast). `0`: always Parquet. Default: an eighth of P_QUERY_WORKER_MAX_MEMORY, at most 32 MiB."),
  P_QUERY_CONCURRENCY: z.coerce.number().int().positive().optional().describe('Queries running at once (one worker process each). Default: a third of the memory budget in workers of at least 160 MiB, 1–4.'),
  P_QUERY_WORKER_MAX_MEMORY: sizedBytes().describe('Hard cap on a query worker process\'s resident memory: over it the worker is killed and the query answers 413. Default: a third of the memory budget shared by the P_QUERY_CONCURRENCY workers, 128 MiB–4 GiB.'),
  P_QUERY_WORKER_CGROUP: z
    .enum(['auto', 'off'])
    .default('auto')
    .describe('`auto`: when the service may create memory cgroups (root, or a delegated cgroup; v1 or v2), each query worker runs in a cgroup of its own under the service\'s, capped at P_QUERY_WORKER_MAX_MEMORY by the kernel (no swap), removed when the worker exits; else the RSS watchdog. `off`: always the RSS watchdog (its cap is read every 50 ms, so a fast allocation can pass it briefly). The start log says which is used.'),
  P_QUERY_CONCURRENCY_PER_KEY: int(2).describe('Queries one key may run at once; with twice that in flight it gets 429.'),
  P_QUERY_QUEUE: int(16).describe('Queries that may wait for a slot (up to `P_QUERY_TIMEOUT`); beyond it 503 + `Retry-After`.'),
  P_QUERY_RESERVE: z.coerce
    .number()
    .int()
    .min(0)
    .default(1)
    .describe('Query slots only a key with no query running may take (capped at P_QUERY_CONCURRENCY - 1): keys already running queries never hold every slot, so another key always gets one.'),
  P_QUERY_MAX_ROWS: int(500_000).describe('Most rows of a non-streamed answer (413: add a LIMIT or stream).'),
  P_QUERY_MAX_RESULT_BYTES: bytes('64MiB').describe('Largest non-streamed answer (413: add a LIMIT or stream).'),
  P_QUERY_MAX_SQL_BYTES: bytes('64KiB').describe('Largest SQL statement (413).'),
  P_QUERY_MAX_DEPTH: int(16).describe("Deepest nesting of queries (subqueries, CTE bodies, set operations; bracket depth 4× that): DuckDB's optimiser is exponential in it (400 above)."),
  P_QUERY_PLAN_CACHE_BYTES: bytes('8MiB').describe('Checked statements kept by SQL text (least recently used out); PostgreSQL statements\' parse trees are kept beside them in a quarter of this (at least 1 MiB).'),
  P_QUERY_WORKER_HEAP: bytes('512MiB').describe('JS heap of each query worker process (at least 64 MiB).'),
  P_PROMQL_MAX_SAMPLES: int(50_000_000).describe(
    "Most samples one PromQL query may hold in memory at once (Prometheus' --query.max-samples and its default); past it the query fails with 422. Bounds the memory of the query worker's PromQL engine process.",
  ),
  P_PROMQL_CACHE_BYTES: sizedBytes().describe(
    "Each query worker's PromQL sample cache: Parquet files a selector read, kept decoded (label sets and samples) for the next selectors, which then read them from memory instead of a DuckDB scan (docs/promql.md \"The sample cache\"; 41–70 MB per 10,000 series and hour at 15 s, the more the more files the hour is in). Files larger than a quarter of it are always scanned; least recently used files go first. Default: 1/8 of P_QUERY_WORKER_MAX_MEMORY; `0`: no cache.",
  ),
  P_PROMQL_LABEL_INDEX_BYTES: bytes('64MiB').describe(
    "The in-process label index of each remote-write metrics dataset (docs/promql.md \"How a query runs\"): the series, labels and label values calls answered from label sets kept in the process that takes the request, read once per file from its series index and per WAL segment, instead of in a query worker. Past this estimate for a dataset its calls take the query workers again (tried again after a minute). `0`: off.",
  ),
  P_QUERY_WARM_WORKERS: z.coerce
    .number()
    .int()
    .min(0)
    .max(64)
    .default(0)
    .describe('Query worker processes started with the service and kept however long they idle (others start on demand, up to `P_QUERY_CONCURRENCY`); each holds ~40 MB PSS idle. Default 0: an idle service holds no query process, and the first query after a quiet period waits for a start (docs/memory.md).'),
  P_QUERY_WORKER_IDLE: duration('45s').describe(
    'A query worker beyond `P_QUERY_WARM_WORKERS` that has run no query for this long exits (`0`: kept). Default 45s: memory goes back within a minute of the last query, while a dashboard refreshing every 30 s keeps its worker.',
  ),
};

/** The trace query APIs: Jaeger's, Tempo's (docs/traces.md). */
const tracesSettings = {
  P_TRACES_LOOKBACK: duration('2d').describe(
    'How far back a trace looked up by id (and the service and operation lists) is searched when the request gives no time range: bounds the files read. A trace older than this is found only with `start`/`end`.',
  ),
  P_TRACES_DEFAULT_DATASET: z.string().default('otel_traces').describe('The traces dataset the Jaeger and Tempo APIs read when the request names none (`?dataset=` or `X-P-Stream`).'),
};

/** The OTLP/gRPC front door (docs/otlp-grpc.md). */
const otlpGrpcSettings = {
  P_OTLP_GRPC_ADDR: z
    .string()
    .default('0.0.0.0:4317')
    .describe('host:port of the OTLP/gRPC server (logs, traces, metrics, grpc.health.v1), or `off`. Port `0`: any free port (`grpcPort` in the `listening` log line). Default: OTLP\'s registered gRPC port, where Collectors and SDKs send by default.'),
  P_OTLP_GRPC_MAX_CONNECTION_AGE: duration('5m').describe(
    'An OTLP/gRPC connection is closed (with a GOAWAY; clients reconnect) after this long, so long-lived HTTP/2 connections spread over the workers behind a load balancer. Default 5m: a Collector moves to another worker within minutes at the cost of one reconnect.',
  ),
  P_OTLP_GRPC_MAX_STREAMS: int(16).describe(
    'Most concurrent calls (HTTP/2 streams) on one OTLP/gRPC connection. Default 16: a Collector exports over a few streams, and each stream may hold up to one flow-control window (64 KiB) unread.',
  ),
  P_OTLP_GRPC_MAX_CALLS: int(64).describe(
    'Most OTLP/gRPC exports in progress at once over all connections (UNAVAILABLE with a retry delay beyond), counted from an authenticated call\'s metadata, before its message is read.',
  ),
  P_OTLP_GRPC_MAX_CONNECTION_AGE_GRACE: duration('30s').describe(
    'How long requests already running on a connection past its maximum age may take to finish before it is closed. Default 30s: longer than an export takes with default timeouts.',
  ),
};

/** The PostgreSQL wire protocol front door (docs/postgresql.md). */
const pgSettingsGroup = {
  P_PG_ADDR: z
    .string()
    .default('0.0.0.0:5432')
    .describe('host:port of the PostgreSQL wire protocol front door, or `off`. Port `0`: any free port (`pgPort` in the `listening` log line). 5432 because every PostgreSQL client defaults to it.'),
  P_PG_TLS_CERT: z.string().optional().describe('PEM certificate file for TLS on the PostgreSQL port (SSLRequest); none by default, so clients with sslmode=prefer use plain TCP.'),
  P_PG_TLS_KEY: z.string().optional().describe('PEM private key file matching P_PG_TLS_CERT.'),
  P_PG_REQUIRE_TLS: z
    .enum(['true', 'false'])
    .default('false')
    .describe('Refuse passwords (API keys) over plain TCP on the PostgreSQL port. Off by default because TLS needs a certificate the operator provides.'),
  P_PG_MAX_CONNECTIONS: z.coerce.number().int().positive().default(100).describe('Most PostgreSQL connections at once (PostgreSQL\'s own default); more are refused with SQLSTATE 53300.'),
  P_PG_MAX_PREPARED: int(1000).describe(
    'Most prepared statements and portals one PostgreSQL connection may hold together (pgjdbc caches 256 statements per connection by default); past it Parse and Bind fail with SQLSTATE 54000.',
  ),
  P_PG_MAX_SESSION_STATE: bytes('16MiB').describe('Most bytes of statement text one PostgreSQL connection may hold in prepared statements and portals; past it Parse and Bind fail with SQLSTATE 54000.'),
  P_PG_MAX_KEY_STATE: bytes('64MiB').describe(
    'Most bytes of statement text all PostgreSQL connections of one API key may hold in prepared statements and portals together, so more connections do not buy a key more memory; past it SQLSTATE 54000.',
  ),
  P_PG_IDLE_TIMEOUT: duration('10m').describe('A PostgreSQL connection idle this long (no query running) is closed, like idle_session_timeout; long enough for a BI tool\'s pooled connections.'),
};

/** The Iceberg tables over every dataset and the read-only REST catalog (docs/lake.md). */
const icebergSettingsGroup = {
  P_ICEBERG: z.enum(['on', 'off']).default('on').describe('`on`: every dataset is published as an Apache Iceberg v2 table over its Parquet files and served by the REST catalog at `/iceberg`. `off`: nothing is published and `/iceberg` answers 404.'),
  P_ICEBERG_INTERVAL: duration('10s').describe('How often each dataset\'s new files are committed as an Iceberg snapshot: a row is in the lake within P_FLUSH_INTERVAL + this of its acknowledgement.'),
  P_ICEBERG_SNAPSHOT_RETENTION: duration('15m').describe(
    'Iceberg snapshots older than this are expired (the current one never is), so readers may time-travel this far back. Files a retained snapshot lists are never deleted: the delete grace period is raised to this + 2 × P_ICEBERG_INTERVAL when shorter (logged at start).',
  ),
  P_ICEBERG_NAMESPACE: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/).default('lakehouse').describe('The one namespace of the REST catalog; its tables are the datasets.'),
  P_ICEBERG_S3_PUBLIC_ENDPOINT: z.string().optional().describe('S3 endpoint handed to readers in LoadTable when they reach the bucket by another address than the workers (default: P_S3_URL).'),
  P_ICEBERG_PUSH_URI: z.string().url().optional().describe(
    'An Iceberg REST catalog the user runs (Polaris, Lakekeeper, Nessie, …; its base URI, without /v1): each table is registered there in namespace P_ICEBERG_NAMESPACE and every new snapshot is committed there too (docs/lake.md "Push"). Its failure never blocks publishing here.',
  ),
  P_ICEBERG_PUSH_TOKEN: z.string().optional().describe('Bearer token sent to P_ICEBERG_PUSH_URI.'),
  P_ICEBERG_PUSH_WAREHOUSE: z.string().optional().describe('The warehouse asked for at P_ICEBERG_PUSH_URI\'s /v1/config (catalogs that serve several warehouses need it).'),
};

/** Users, roles and sign-in (docs/users.md). */
const accessSettings = {
  P_ACCESS_POLL: duration('2s').describe('How often each worker looks for a newer version of the users and roles in the object store: a change made on another worker applies here within this time (on this worker at once).'),
  P_SIGNIN_MAX_USER_FAILURES: int(10).describe('Failed sign-ins of one user name within `P_SIGNIN_FAILURE_WINDOW` after which its sign-ins are refused (429, logged) until the oldest failure leaves the window. Per worker.'),
  P_SIGNIN_MAX_ADDRESS_FAILURES: int(100).describe('Failed sign-ins (a wrong password or an unknown key) from one source address within `P_SIGNIN_FAILURE_WINDOW` after which that address is refused (429, logged). Per worker.'),
  P_SIGNIN_FAILURE_WINDOW: duration('1m').describe('The sliding window over which failed sign-ins are counted.'),
};

/** The memory the service may use, which the memory-sized defaults derive from (docs/memory.md). */
const memorySettings = {
  P_MEMORY_BUDGET: sizedBytes().describe('Memory the service and its query workers may use, which the defaults above are sized from. Default: the memory cgroup\'s limit (v2 or v1), else the total memory.'),
};

/**
 * Fault injection for the test suite, read where it strikes (src/failpoint.ts, on each arrival, so an
 * in-process test may change it between steps). Never for a service that holds data: the start log warns.
 */
const testOnlySettings = {
  P_FAILPOINT: z
    .string()
    .optional()
    .describe(
      'Test only (the crash tests): the process kills itself (SIGKILL, as a power cut) on reaching this step: `flush-after-upload`, `flush-after-manifest`, `compaction-after-upload`, `compaction-after-manifest`.',
    ),
  P_FAULT: z
    .string()
    .optional()
    .describe(
      'Test only (the resource-error tests): `<point>:<fault>:<times>`, several joined by commas. The first `<times>` arrivals at `<point>` (`flush-unit`, `flush-parquet`, `flush-upload`, `flush-schema`, `flush-manifest`, `salvage-read`, `salvage-bad-lines`, `salvage-rewrite`, `salvage-set-aside`) fail with `<fault>` (`oom`, `duckdb-emfile`, `duckdb-enospc`, `emfile`, `enfile`, `enospc`, `eio`, `enomem`) instead of going on.',
    ),
};

/** OpenID Connect sign-in for the console and its sessions (docs/users.md "Single sign-on"). */
const ssoSettings = {
  P_OIDC_ISSUER: z.url().optional().describe('The OpenID provider\'s issuer URL (its discovery document is `{issuer}/.well-known/openid-configuration`). Unset: single sign-on is off and `/api/v1/o/login` answers 404.'),
  P_OIDC_CLIENT_ID: z.string().optional().describe('The client id registered at the provider for this service (needed with P_OIDC_ISSUER).'),
  P_OIDC_CLIENT_SECRET: z.string().optional().describe('The client secret registered at the provider (sent with HTTP Basic to its token endpoint). Unset: a public client, held by PKCE alone.'),
  P_ORIGIN_URI: z.url().optional().describe(
    'The service\'s public base URL as the browser reaches it (Parseable\'s name), e.g. `https://lakehouse.example.com`. The redirect URI to register at the provider is `{P_ORIGIN_URI}/api/v1/o/code`; an `https` origin makes the session cookie `Secure` (and named `__Host-session`); cookie-authenticated writes must come from this origin. Unset: the origin of each request\'s `Host` header, over http (for a local try-out only).',
  ),
  P_OIDC_SCOPE: z.string().default('openid profile email').describe('Scopes asked of the provider (space-separated; `openid` is added when missing). Add `groups` where the provider needs it to send the role claim (Okta).'),
  P_OIDC_ROLE_CLAIM: z.string().default('groups').describe('The claim (of the ID token, else of the userinfo answer) whose values decide the user\'s roles: a string or a list of strings; a dotted path reaches into objects (`realm_access.roles` for Keycloak).'),
  P_OIDC_ROLE_MAP: z.string().default('').describe('Claim value → role, comma-separated `value=role` (e.g. `lakehouse-admins=admin,sre=writer`); one value may map to several roles. Empty: a claim value that names a role is that role (Parseable\'s rule).'),
  P_OIDC_DEFAULT_ROLE: z.string().default('').describe('The role of a user none of whose claim values maps to a role. Empty: such a user may not sign in (403).'),
  P_SESSION_TTL: duration('12h').describe('How long a console session lasts after sign-in (the cookie\'s Max-Age and the stored session\'s expiry); then the user signs in again.'),
};

/** The groups in the order docs/configuration.md lists them. */
export const settingGroups = [
  { title: 'Server', about: 'The HTTP server, keys, logs and this worker\'s identity.', settings: serverSettings },
  { title: 'Users and sign-in', about: 'Users and roles in the object store, and the brute-force guard of sign-in (docs/users.md).', settings: accessSettings },
  { title: 'Memory', about: 'The budget the memory-sized defaults below derive from (docs/memory.md).', settings: memorySettings },
  { title: 'Ingestion', about: 'Decoding request bodies and the bounds every ingest request is held to (docs/ingestion.md).', settings: ingestSettings },
  { title: 'Storage', about: 'The write-ahead log, Parquet files, catalog and background work (docs/storage.md).', settings: storageSettings },
  { title: 'Object store', about: 'Local disk, or one S3 bucket shared by several workers (docs/scale-out.md).', settings: objectStoreSettings },
  { title: 'OTLP over gRPC', about: 'The OTLP/gRPC front door on every worker (docs/otlp-grpc.md).', settings: otlpGrpcSettings },
  { title: 'PostgreSQL', about: 'The PostgreSQL wire protocol front door on every worker (docs/postgresql.md).', settings: pgSettingsGroup },
  { title: 'Query', about: 'The SQL sandbox, its worker processes and the limits every query runs under (docs/query.md).', settings: querySettings },
  { title: 'Traces', about: 'The Jaeger and Tempo query APIs over traces datasets (docs/traces.md).', settings: tracesSettings },
  { title: 'Iceberg', about: 'Iceberg tables over every dataset and the read-only REST catalog (docs/lake.md).', settings: icebergSettingsGroup },
  { title: 'Single sign-on', about: 'OpenID Connect sign-in for the web console and its sessions (docs/users.md).', settings: ssoSettings },
  { title: 'Test only', about: 'Fault injection for the test suite. Never set them on a service that holds data: they crash it or fail its writes on purpose, and the start log warns when one is set.', settings: testOnlySettings },
] as const;

export const envSchema = z.object({
  ...serverSettings,
  ...testOnlySettings,
  ...memorySettings,
  ...ingestSettings,
  ...storageSettings,
  ...objectStoreSettings,
  ...querySettings,
  ...tracesSettings,
  ...otlpGrpcSettings,
  ...pgSettingsGroup,
  ...icebergSettingsGroup,
  ...ssoSettings,
  ...accessSettings,
});

export type Env = z.infer<typeof envSchema>;
