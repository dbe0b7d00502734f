import { Worker, type ResourceLimits } from 'node:worker_threads';
import { DomainError } from '../../errors.ts';
import { entryBeside, fromSource } from '../../entrypoints.ts';
import { DecodeBudgetExceeded } from '../compression.ts';
import { log } from '../../log.ts';
import { ownsBuffer, runJob, WORKER_READY, type JobResult } from './ingestWorker.ts';
import type { IngestJob, PlacementTarget, SerializedBatch } from './pipeline.ts';

/**
 * Bodies smaller than this are serialised on the event loop: a hand-off to a worker (post the job, post
 * the result, two wake-ups) costs the event loop more than decoding a few events itself.
 */
export const INLINE_BELOW_BYTES = 8 * 1024;

/** A batch as the worker serialised it: WAL lines as UTF-8 bytes. */
export type SerializedBytes = Omit<SerializedBatch, 'lines'> & { lines: Uint8Array };

/** A worker thread as the pool sees it. */
export interface WorkerState {
  /** Its module is loaded and it takes jobs at once. */
  ready: boolean;
  /** Jobs posted to it and not yet answered. */
  busy: number;
}

/**
 * Where a body that is worth a hand-off goes: the least busy ready worker, else the event loop (a
 * thread that is still starting would make the body wait for its module load, ~0.2–0.5 s on a loaded
 * machine: measured). And whether to start one more: when no worker is ready and none is starting, or
 * when every ready worker already has work, up to `size` in all. So an idle service holds no thread,
 * a single client is served by one, and concurrent clients bring up to `size`.
 */
export function pickWorker(workers: readonly WorkerState[], size: number): { use: number | 'inline'; spawn: boolean } {
  let best = -1;
  for (let i = 0; i < workers.length; i++) if (workers[i].ready && (best < 0 || workers[i].busy < workers[best].busy)) best = i;
  const starting = workers.some((w) => !w.ready);
  const spawn = workers.length < size && !starting && (best < 0 || workers[best].busy > 0);
  return { use: best < 0 ? 'inline' : best, spawn };
}

interface Slot extends WorkerState {
  worker: Worker;
  /** When it last had no job, for the idle release. */
  idleSince: number;
  /** Let go after a quiet period: its exit is expected. */
  retired: boolean;
}

/**
 * Worker threads that turn request bodies (JSON, OTLP, remote write) into WAL lines. With no workers
 * (P_INGEST_WORKERS=0), and for small bodies, the same code runs on the event loop. Threads start on
 * demand (pickWorker) and one with no job for `idleMs` (P_INGEST_WORKER_IDLE) stops, so an idle
 * service holds none (~21 MB PSS each idle, more after a burst). A worker that dies is replaced on
 * demand; its jobs fail with 503. A thread only ever stops with no job of its own, and a job is
 * acknowledged only after its WAL lines are written by the main thread, so stopping loses nothing.
 * Request bodies and WAL lines move between threads by transfer, not by copy.
 */
export class IngestPool {
  private workers: Slot[] = [];
  private pending = new Map<number, { resolve: (r: JobResult) => void; worker: Worker }>();
  private nextId = 1;
  private closed = false;
  private failures = 0;

  /**
   * `size`: most threads at once; `idleMs`: quiet period after which a thread stops (0: kept);
   * `youngGenerationMb`: each thread's V8 young generation (P_INGEST_WORKER_YOUNG_GENERATION; unset:
   * Node's default, sized from the cgroup limit and far too small for decoding inside a container).
   */
  constructor(
    private readonly size: number,
    private readonly idleMs = 0,
    private readonly youngGenerationMb?: number,
    /** The clock of the idle release, ms (a test's fake one moves by hand). */
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** The heap limits each running thread got (what `resourceLimits` gives inside it). */
  heapLimits(): ResourceLimits[] {
    return this.workers.map((w) => w.worker.resourceLimits ?? {});
  }

  /** Threads running (ready or starting). */
  get threads(): number {
    return this.workers.length;
  }

  /** Threads that have loaded their modules and take jobs. */
  get readyThreads(): number {
    return this.workers.filter((w) => w.ready).length;
  }

  private spawn(): void {
    const entry = entryBeside(import.meta.url, 'ingestWorker');
    // Node 20 does not pass `--import tsx` loader hooks on to worker threads: run from source, the
    // worker registers tsx itself before importing the TypeScript module.
    const options = this.youngGenerationMb ? { resourceLimits: { maxYoungGenerationSizeMb: this.youngGenerationMb } } : {};
    const worker = fromSource
      ? new Worker(`import(${JSON.stringify(import.meta.resolve('tsx/esm/api'))}).then((api) => { api.register(); return import(${JSON.stringify(entry.href)}); });`, { eval: true, ...options })
      : new Worker(entry, options);
    const slot: Slot = { worker, busy: 0, ready: false, idleSince: this.now(), retired: false };
    worker.on('message', (result: JobResult | typeof WORKER_READY) => {
      if (result === WORKER_READY) {
        slot.ready = true;
        slot.idleSince = this.now();
        return;
      }
      const p = this.pending.get(result.id);
      if (!p) return;
      this.pending.delete(result.id);
      if (--slot.busy === 0) slot.idleSince = this.now();
      p.resolve(result);
    });
    worker.on('error', (err) => log.error('ingest worker failed', { error: err }));
    worker.on('exit', (code) => {
      // A worker that cannot even start would be started again forever: after a few failures the pool
      // runs the same code on the event loop instead. One let go after a quiet period did not fail.
      if (!slot.retired && code !== 0) this.failures++;
      this.workers = this.workers.filter((w) => w !== slot);
      for (const [id, p] of this.pending) {
        if (p.worker !== worker) continue;
        this.pending.delete(id);
        p.resolve({ id, ok: false, kind: 'unavailable', message: 'ingest worker stopped; retry', retryAfterSec: 1 });
      }
    });
    worker.unref();
    this.workers.push(slot);
    this.watchIdle(slot);
  }

  /**
   * Stops every thread that has had no job for `idleMs` by the pool's clock, and says how many. Taken
   * out of the pool first, in the same turn of the event loop, so no job can be posted to a thread that
   * is stopping. The pool's timers call it when a thread's quiet period would end; a test moves a fake
   * clock and calls it.
   */
  retireIdle(): number {
    if (!this.idleMs || this.closed) return 0;
    const now = this.now();
    const idle = this.workers.filter((s) => s.ready && s.busy === 0 && now - s.idleSince >= this.idleMs);
    for (const slot of idle) {
      slot.retired = true;
      void slot.worker.terminate();
    }
    this.workers = this.workers.filter((w) => !idle.includes(w));
    return idle.length;
  }

  /** Checks the thread when its quiet period would end (one timer per thread, not one per job). */
  private watchIdle(slot: Slot): void {
    if (!this.idleMs) return;
    const check = () => {
      if (this.closed || slot.retired || !this.workers.includes(slot)) return;
      this.retireIdle();
      if (slot.retired) return;
      const quietFor = this.now() - slot.idleSince;
      setTimeout(check, slot.busy > 0 || !slot.ready ? this.idleMs : Math.max(1, this.idleMs - quietFor)).unref();
    };
    setTimeout(check, this.idleMs).unref();
  }

  async serialize(job: IngestJob, target: PlacementTarget): Promise<SerializedBytes> {
    const id = this.nextId++;
    let result: JobResult;
    let slot: Slot | undefined;
    if (job.body.byteLength >= INLINE_BELOW_BYTES && this.size > 0) {
      const pick = pickWorker(this.workers, this.failures < 5 && !this.closed ? this.size : 0);
      if (pick.use !== 'inline') slot = this.workers[pick.use];
      if (pick.spawn) this.spawn();
    }
    if (!slot) result = runJob(id, job, target);
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
