import type { Component } from '../component.ts';
import type { Config } from '../config.ts';
import { stateGauge } from '../metrics.ts';
import { IngestPool } from './worker/ingestPool.ts';
import { IngestService, type IngestSink } from './service.ts';

/**
 * The ingest worker threads as a component. Started first and stopped last, so that the storage
 * engine's last flush at shutdown comes before the threads go (the order main always had).
 */
export class IngestWorkers implements Component {
  readonly name = 'ingest workers';
  readonly pool: IngestPool;

  constructor(settings: Config['ingest']) {
    // Threads start on demand, so this start has nothing to wait for.
    this.pool = new IngestPool(settings.workers, settings.workerIdleMs, settings.workerYoungGenerationMb);
  }

  start(): void {}

  gauges(): void {
    stateGauge('lakehouse_ingest_workers', 'Ingest worker threads running (started on demand, stopped after P_INGEST_WORKER_IDLE).', [], () => [{ labels: {}, value: this.pool.threads }]);
  }

  stop(): Promise<void> {
    return this.pool.close();
  }
}

/** The one ingest service of every door (over the workers and the storage sink), with its gauges. */
export class IngestComponent implements Component {
  readonly name = 'ingest';
  readonly service: IngestService;

  constructor(workers: IngestWorkers, sink: IngestSink, settings: Config['ingest']) {
    this.service = new IngestService(workers.pool, sink, settings);
  }

  start(): void {}

  gauges(): void {
    const { inflight } = this.service;
    stateGauge('lakehouse_ingest_inflight_bytes', 'Bytes of ingest request bodies being received, decoded and stored (P_MAX_INFLIGHT_BYTES).', [], () => [{ labels: {}, value: inflight.inUse }]);
    stateGauge('lakehouse_ingest_inflight_peak_bytes', 'The most ingest request bytes in flight at once since start.', [], () => [{ labels: {}, value: inflight.peak }]);
    stateGauge('lakehouse_ingest_waiting', 'Ingest requests waiting for room in the in-flight byte budget.', [], () => [{ labels: {}, value: inflight.queued }]);
  }

  /** Requests in flight end with their doors (stopped before this); the workers stop after storage. */
  stop(): void {}
}
