import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * The service's own metrics, in Prometheus' text format at `GET /metrics`. A leaf module: every layer
 * counts what it does here, and nothing here knows about the layers (gauges that need state are
 * registered by their owner with `onCollect`).
 */
export const registry = new Registry();
// prom-client's default metrics are already named process_* and nodejs_*: the prefix is only ours
// (it was `lakehouse_process_`, which made `lakehouse_process_process_cpu_seconds_total`).
collectDefaultMetrics({ register: registry, prefix: 'lakehouse_' });

const seconds = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export const httpRequests = new Counter({
  name: 'lakehouse_http_requests_total',
  help: 'HTTP requests by route, method and status.',
  labelNames: ['route', 'method', 'status'] as const,
  registers: [registry],
});

export const httpDuration = new Histogram({
  name: 'lakehouse_http_request_duration_seconds',
  help: 'HTTP request duration by route (until the response starts, for streamed answers).',
  labelNames: ['route', 'method'] as const,
  buckets: seconds,
  registers: [registry],
});

export const ingestedRows = new Counter({
  name: 'lakehouse_ingested_rows_total',
  help: 'Rows acknowledged (durable in the WAL), per dataset.',
  labelNames: ['dataset'] as const,
  registers: [registry],
});

export const ingestedBytes = new Counter({
  name: 'lakehouse_ingested_bytes_total',
  help: 'Request body bytes behind the acknowledged rows, per dataset.',
  labelNames: ['dataset'] as const,
  registers: [registry],
});

export const flushes = new Counter({
  name: 'lakehouse_flushes_total',
  help: 'WAL to Parquet flushes by result.',
  labelNames: ['result'] as const,
  registers: [registry],
});

export const flushDuration = new Histogram({
  name: 'lakehouse_flush_duration_seconds',
  help: 'Duration of successful flushes.',
  buckets: seconds,
  registers: [registry],
});

export const compactions = new Counter({
  name: 'lakehouse_compactions_total',
  help: 'Compaction merges by result.',
  labelNames: ['result'] as const,
  registers: [registry],
});

export const compactionDuration = new Histogram({
  name: 'lakehouse_compaction_duration_seconds',
  help: 'Duration of successful compaction merges.',
  buckets: seconds,
  registers: [registry],
});

export const queryDuration = new Histogram({
  name: 'lakehouse_query_duration_seconds',
  help: 'Query duration by outcome (ok, or the error kind).',
  labelNames: ['outcome'] as const,
  buckets: seconds,
  registers: [registry],
});

export const queriesPreAggregated = new Counter({
  name: 'lakehouse_query_pre_aggregated_total',
  help: 'Queries run pre-aggregated by receive time: a count per time bucket whose files prove few distinct receive times (docs/performance.md).',
  registers: [registry],
});

export const planCacheLookups = new Counter({
  name: 'lakehouse_query_plan_cache_lookups_total',
  help: 'Checked-statement cache lookups by result (hit, miss).',
  labelNames: ['result'] as const,
  registers: [registry],
});

export const fileCacheLookups = new Counter({
  name: 'lakehouse_file_cache_lookups_total',
  help: 'S3 file cache lookups for queries and compaction by result (hit, miss, damaged: the cached copy failed its check and was downloaded again).',
  labelNames: ['result'] as const,
  registers: [registry],
});

export const grpcRequests = new Counter({
  name: 'lakehouse_grpc_requests_total',
  help: 'OTLP/gRPC calls by method and gRPC status code (0 is OK).',
  labelNames: ['method', 'code'] as const,
  registers: [registry],
});

export const grpcDuration = new Histogram({
  name: 'lakehouse_grpc_request_duration_seconds',
  help: 'OTLP/gRPC call duration by method.',
  labelNames: ['method'] as const,
  buckets: seconds,
  registers: [registry],
});

export const storeErrors = new Counter({
  name: 'lakehouse_object_store_errors_total',
  help: 'Failed object store requests by operation.',
  labelNames: ['operation'] as const,
  registers: [registry],
});

/** A gauge whose values are read from their owner at scrape time. */
export function stateGauge<L extends string>(name: string, help: string, labelNames: readonly L[], read: () => { labels: Record<L, string>; value: number }[]): void {
  new Gauge({
    name,
    help,
    labelNames,
    registers: [registry],
    collect() {
      this.reset();
      for (const { labels, value } of read()) this.set(labels as Partial<Record<L, string | number>>, value);
    },
  });
}

export const icebergPushes = new Counter({
  name: 'lakehouse_iceberg_pushes_total',
  help: 'Pushes of Iceberg tables to the external catalog (P_ICEBERG_PUSH_URI) by result: registered, committed, conflict (its table moved since loaded; reloaded and retried), failed (retried next round).',
  labelNames: ['result'] as const,
  registers: [registry],
});

export const icebergCommits = new Counter({
  name: 'lakehouse_iceberg_commits_total',
  help: 'Iceberg table commits by result: committed, or conflict (another worker committed that version first; reloaded and retried).',
  labelNames: ['result'] as const,
  registers: [registry],
});

export const sqlParses = new Counter({
  name: 'lakehouse_sql_parses_total',
  help: "Statements parsed by DuckDB's parser, by what asked (parseTree.ts ParseSite): sandbox (an HTTP statement checked and planned; time-range extraction reuses its tree), pg (a PostgreSQL statement, parsed once in the service; the worker classifies it and the sandbox plans it from that tree), catalog (a parse in a query worker's catalog database, reported back: only when the service sent no tree), prepare (DuckDB's prepare of a catalog statement described or run in a worker), execute (the worker's DuckDB parsing the text of a data statement it runs), setup (the dialect's macros, once).",
  labelNames: ['site'] as const,
  registers: [registry],
});
