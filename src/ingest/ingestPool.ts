import { Worker } from 'node:worker_threads';
import { DomainError } from '../errors.ts';
import { log } from '../log.ts';
import { runJob, type JobResult } from './ingestWorker.ts';
import type { IngestJob, PlacementTarget, SerializedBatch } from './pipeline.ts';

/**
 * Worker threads that turn request bodies (JSON, OTLP, remote write) into WAL lines. With no workers
 * (P_INGEST_WORKERS=0) the same code runs on the event loop. A worker that dies is replaced; its jobs
 * fail with 503.
 */
export class IngestPool {
  private workers: { worker: Worker; busy: number }[] = [];
  private pending = new Map<number, { resolve: (r: JobResult) => void; worker: Worker }>();
  private nextId = 1;
  private closed = false;
  private failures = 0;

  constructor(private readonly size: number) {
    for (let i = 0; i < size; i++) this.spawn();
  }

  private spawn(): void {
    // Node 20 does not pass `--import tsx` loader hooks on to worker threads: the worker registers
    // tsx itself before importing the TypeScript module.
    const tsxApi = import.meta.resolve('tsx/esm/api');
    const entry = new URL('./ingestWorker.ts', import.meta.url).href;
    const worker = new Worker(`import(${JSON.stringify(tsxApi)}).then((api) => { api.register(); return import(${JSON.stringify(entry)}); });`, { eval: true });
    const slot = { worker, busy: 0 };
    worker.on('message', (result: JobResult) => {
      const p = this.pending.get(result.id);
      if (!p) return;
      this.pending.delete(result.id);
      slot.busy--;
      p.resolve(result);
    });
    worker.on('error', (err) => log.error('ingest worker failed', { error: err }));
    worker.on('exit', (code) => {
      this.failures += code === 0 ? 0 : 1;
      this.workers = this.workers.filter((w) => w !== slot);
      for (const [id, p] of this.pending) {
        if (p.worker !== worker) continue;
        this.pending.delete(id);
        p.resolve({ id, ok: false, kind: 'unavailable', message: 'ingest worker stopped; retry', retryAfterSec: 1 });
      }
      // A worker that cannot even start would be replaced forever: after a few failures the pool runs
      // the same code on the event loop instead.
      if (!this.closed && this.failures < 5) this.spawn();
    });
    worker.unref();
    this.workers.push(slot);
  }

  async serialize(job: IngestJob, target: PlacementTarget): Promise<SerializedBatch> {
    const id = this.nextId++;
    let result: JobResult;
    const slot = this.workers.reduce<(typeof this.workers)[number] | undefined>((best, w) => (!best || w.busy < best.busy ? w : best), undefined);
    if (!slot) result = runJob(id, job, target);
    else {
      slot.busy++;
      result = await new Promise<JobResult>((resolve) => {
        this.pending.set(id, { resolve, worker: slot.worker });
        slot.worker.postMessage({ id, job, target });
      });
    }
    if (!result.ok) throw new DomainError(result.kind, result.message, result.retryAfterSec);
    return { lines: result.lines, rows: result.rows, types: new Map(result.types), fixed: result.fixed, info: result.info };
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.workers.map((w) => w.worker.terminate()));
  }
}
