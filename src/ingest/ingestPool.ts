import { Worker } from 'node:worker_threads';
import { DomainError } from '../errors.ts';
import { entryBeside, fromSource } from '../entrypoints.ts';
import { DecodeBudgetExceeded } from './compression.ts';
import { log } from '../log.ts';
import { ownsBuffer, runJob, type JobResult } from './ingestWorker.ts';
import type { IngestJob, PlacementTarget, SerializedBatch } from './pipeline.ts';

/**
 * Bodies smaller than this are serialised on the event loop: a hand-off to a worker (post the job, post
 * the result, two wake-ups) costs the event loop more than decoding a few events itself.
 */
export const INLINE_BELOW_BYTES = 8 * 1024;

/** A batch as the worker serialised it: WAL lines as UTF-8 bytes. */
export type SerializedBytes = Omit<SerializedBatch, 'lines'> & { lines: Uint8Array };

/**
 * Worker threads that turn request bodies (JSON, OTLP, remote write) into WAL lines. With no workers
 * (P_INGEST_WORKERS=0), and for small bodies, the same code runs on the event loop. A worker that dies
 * is replaced; its jobs fail with 503. Request bodies and WAL lines move between threads by transfer,
 * not by copy.
 */
export class IngestPool {
  private workers: { worker: Worker; busy: number }[] = [];
  private pending = new Map<number, { resolve: (r: JobResult) => void; worker: Worker }>();
  private nextId = 1;
  private closed = false;
  private failures = 0;

  constructor(size: number) {
    for (let i = 0; i < size; i++) this.spawn();
  }

  private spawn(): void {
    const entry = entryBeside(import.meta.url, 'ingestWorker');
    // Node 20 does not pass `--import tsx` loader hooks on to worker threads: run from source, the
    // worker registers tsx itself before importing the TypeScript module.
    const worker = fromSource
      ? new Worker(`import(${JSON.stringify(import.meta.resolve('tsx/esm/api'))}).then((api) => { api.register(); return import(${JSON.stringify(entry.href)}); });`, { eval: true })
      : new Worker(entry);
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

  async serialize(job: IngestJob, target: PlacementTarget): Promise<SerializedBytes> {
    const id = this.nextId++;
    let result: JobResult;
    const slot = this.workers.reduce<(typeof this.workers)[number] | undefined>((best, w) => (!best || w.busy < best.busy ? w : best), undefined);
    if (!slot || job.body.byteLength < INLINE_BELOW_BYTES) result = runJob(id, job, target);
    else {
      slot.busy++;
      result = await new Promise<JobResult>((resolve) => {
        this.pending.set(id, { resolve, worker: slot.worker });
        // The body moves to the worker and comes back with the result (the job may be placed again).
        slot.worker.postMessage({ id, job, target }, ownsBuffer(job.body) ? [job.body.buffer as ArrayBuffer] : []);
      });
      if (result.body) job.body = result.body;
    }
    if (!result.ok) throw result.overBudget ? new DecodeBudgetExceeded() : new DomainError(result.kind, result.message, result.retryAfterSec);
    return { lines: result.lines, rows: result.rows, types: new Map(result.types), fixed: result.fixed, info: result.info, timeRange: result.timeRange };
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.workers.map((w) => w.worker.terminate()));
  }
}
