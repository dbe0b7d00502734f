import * as path from 'node:path';
import type { Component } from '../../component.ts';
import type { Config } from '../../config.ts';
import type { DuckDBSource } from '../../duckdb.ts';
import type { ColumnType } from '../../model.ts';
import { log } from '../../log.ts';
import { stateGauge } from '../../metrics.ts';
import type { TableSource } from '../../storage/scan.ts';
import { PromqlExecutor } from '../promql/executor.ts';
import { LabelIndex } from '../promql/labelIndex.ts';
import { QueryExecutor } from '../sql/executor.ts';
import { WorkerCgroups } from './cgroup.ts';
import { QueryPool } from './pool.ts';

/** Columns the PromQL engine knows from the ingest formats (passed in: queries do not import ingest). */
export interface KnownColumns {
  /** Prometheus remote write's fixed columns and their types. */
  prometheus: Map<string, ColumnType>;
  /** OTLP metrics' columns. */
  otlpMetrics: Set<string>;
}

/**
 * The query side as one component: the sandboxed worker pool (started) and the SQL and PromQL executors
 * over it, the pool's gauges, and its stop (the workers are killed before storage stops).
 */
export class QueryComponent implements Component {
  readonly name = 'queries';
  readonly pool: QueryPool;
  readonly queries: QueryExecutor;
  readonly promql: PromqlExecutor;

  constructor(config: Config, tmp: string, duck: DuckDBSource, source: TableSource, known: KnownColumns) {
    const { cgroup: cgroupMode, ...poolSettings } = config.queryPool;
    const workerCgroups = WorkerCgroups.open(cgroupMode, poolSettings.maxRssBytes);
    log.info('query worker memory cap', { capBytes: poolSettings.maxRssBytes, by: workerCgroups.cgroups ? 'cgroup' : 'RSS watchdog', detail: workerCgroups.reason });
    this.pool = new QueryPool({ ...poolSettings, workDir: path.join(tmp, 'query'), cgroups: workerCgroups.cgroups });
    this.queries = new QueryExecutor(duck, source, this.pool, config.queryLimits, config.queryPlanCacheBytes);
    this.promql = new PromqlExecutor(source, this.pool, {
      timeoutMs: config.queryLimits.timeoutMs,
      maxSamples: config.promqlMaxSamples,
      cacheBytes: config.promqlCacheBytes,
      fixedColumns: known.prometheus,
      otlpColumns: known.otlpMetrics,
    });
    this.promql.labelIndex = new LabelIndex({ source, duck, fixedColumns: known.prometheus, maxBytes: config.promqlLabelIndexBytes });
  }

  start(): Promise<void> {
    return this.pool.start();
  }

  gauges(): void {
    const { pool } = this;
    const labels = this.promql.labelIndex;
    stateGauge('lakehouse_promql_label_index_bytes', 'Estimated bytes of the in-process label index (series, labels, label values calls).', [], () => [{ labels: {}, value: labels?.bytes ?? 0 }]);
    stateGauge('lakehouse_queries_waiting', 'Queries waiting for a query slot.', [], () => [{ labels: {}, value: pool.stats.waiting }]);
    stateGauge('lakehouse_query_workers', 'Query worker processes by state (starting, idle, busy).', ['state'], () => {
      const s = pool.stats;
      return (['starting', 'idle', 'busy'] as const).map((state) => ({ labels: { state }, value: s[state] }));
    });
  }

  stop(): Promise<void> {
    return this.pool.close();
  }
}
