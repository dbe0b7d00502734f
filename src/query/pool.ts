import { fork, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DomainError, tooManyRequests, unavailable } from '../errors.ts';
import { entryBeside, fromSource } from '../entrypoints.ts';
import { log } from '../log.ts';
import type { FromWorker, PromqlGrant, ToWorker, WorkerJob } from './protocol.ts';

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** The message that ends a job's events. */
const isLast = (m: FromWorker) => m.type === 'done' || m.type === 'answer' || m.type === 'error' || m.type === 'promql';

export interface QueryPoolSettings {
  /** Where worker directories live (wiped at start). */
  workDir: string;
  /** Queries running at once, in total (one worker process each). */
  concurrency: number;
  /** Queries one key may run at once. */
  perKey: number;
  /** Queries that may wait for a slot, in total. */
  queue: number;
  /** Longest wait for a slot before 503. */
  queueWaitMs: number;
  threads: number;
  memoryLimit: string;
  /** JS heap of a worker process, in MiB. */
  heapMb: number;
  /** Workers started with the service (one answers, one is the spare a busy pool would otherwise start). */
  warm?: number;
}

/** What the caller sees of a running query: its events, and a way to stop it. */
export interface Execution {
  /** The worker's messages for this query, ending with `done` or `error`. */
  events: AsyncIterable<FromWorker>;
  /** Tells the worker a streamed chunk was written out (flow control). */
  ack: () => void;
  /** Answers a PromQL job's request for files (`need`). */
  grant: (g: Omit<PromqlGrant, 'type' | 'id'>) => void;
  /** Ends the query with this error at once; its worker process is killed and replaced. */
  cancel: (reason: DomainError) => void;
}

interface Slot {
  id: number;
  child: ChildProcess;
  dir: string;
  ready: Promise<void>;
  /** Its DuckDB is open and it has said so. */
  started: boolean;
  busy: boolean;
  /** The job running on it, to fail if the process dies. */
  onMessage?: (m: FromWorker) => void;
  onExit?: () => void;
}

/**
 * Worker processes for user queries, with admission control. Each running query has a process of its
 * own, started ahead of need and reused; one cut off mid-query (time limit, cancel, client gone) is
 * killed and replaced, since DuckDB's optimiser cannot be interrupted. Workers run at a
 * lower CPU priority than the service, so ingestion keeps its share of the cores under any query load.
 */
export class QueryPool {
  private slots: Slot[] = [];
  private nextSlot = 1;
  private running = new Map<string, number>();
  private waiting: { key: string; resume: () => void; fail: (e: Error) => void; timer: NodeJS.Timeout }[] = [];
  private closed = false;
  private readonly entry = fileURLToPath(entryBeside(import.meta.url, 'worker'));
  /** Run from source, the worker process loads tsx to run TypeScript; from the build it needs nothing. */
  private readonly loader = fromSource ? ['--import', import.meta.resolve('tsx')] : [];

  constructor(private readonly s: QueryPoolSettings) {}

  async start(): Promise<void> {
    await fs.rm(this.s.workDir, { recursive: true, force: true });
    await fs.mkdir(this.s.workDir, { recursive: true });
    // Warm workers answer the first queries without a process start, and without one starting beside
    // them (a start takes a core for ~0.5 s: measured, it made the first queries 5–10× slower).
    for (let i = 0; i < Math.max(1, Math.min(this.s.concurrency, this.s.warm ?? 2)); i++) this.spawn();
  }

  get stats(): { starting: number; idle: number; busy: number; waiting: number } {
    const busy = this.slots.filter((s) => s.busy).length;
    const starting = this.slots.filter((s) => !s.busy && !s.started).length;
    return { starting, idle: this.slots.length - busy - starting, busy, waiting: this.waiting.length };
  }

  private spawn(): Slot {
    const id = this.nextSlot++;
    const dir = path.join(this.s.workDir, `w${id}`);
    const child = fork(this.entry, [], {
      execArgv: [...this.loader, `--max-old-space-size=${this.s.heapMb}`],
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      env: {
        ...process.env,
        QW_DIR: path.join(dir, 'files'),
        QW_SPILL: path.join(dir, 'spill'),
        QW_THREADS: String(this.s.threads),
        QW_MEMORY: this.s.memoryLimit,
        QW_NICE: '10',
      },
    });
    let readyResolve!: () => void;
    let readyReject!: (e: Error) => void;
    const slot: Slot = {
      id,
      child,
      dir,
      busy: false,
      started: false,
      ready: new Promise<void>((res, rej) => {
        readyResolve = res;
        readyReject = rej;
      }),
    };
    slot.ready.catch(() => undefined);
    child.on('message', (m: FromWorker) => {
      if (m.type === 'ready') {
        slot.started = true;
        readyResolve();
      }
      else slot.onMessage?.(m);
    });
    child.on('exit', (code, signal) => {
      readyReject(new Error(`query worker exited before it was ready (${signal ?? code})`));
      this.slots = this.slots.filter((s) => s !== slot);
      void fs.rm(dir, { recursive: true, force: true });
      slot.onExit?.();
      if (!slot.onExit && !this.closed && code !== 0) log.warn('query worker exited', { worker: id, code, signal });
    });
    this.slots.push(slot);
    return slot;
  }

  /** Waits for a slot under the limits: 429 when this key has too much in flight, 503 when all is full. */
  private async admit(key: string): Promise<void> {
    const total = () => [...this.running.values()].reduce((a, b) => a + b, 0);
    const mine = () => this.running.get(key) ?? 0;
    // Waiters wait for a reason this request may not share (their key's limit); release() wakes them
    // as soon as they can run, so a request under both limits need not queue behind them.
    if (total() < this.s.concurrency && mine() < this.s.perKey) {
      this.running.set(key, mine() + 1);
      return;
    }
    const queuedForKey = this.waiting.filter((w) => w.key === key).length;
    if (mine() + queuedForKey >= 2 * this.s.perKey) {
      throw tooManyRequests(`this API key already has ${mine()} queries running and ${queuedForKey} waiting (P_QUERY_CONCURRENCY_PER_KEY=${this.s.perKey})`, 1);
    }
    if (this.waiting.length >= this.s.queue) throw unavailable(`all ${this.s.concurrency} query slots are busy and ${this.waiting.length} queries wait (P_QUERY_QUEUE)`, 1);
    await new Promise<void>((resume, fail) => {
      const entry = {
        key,
        resume,
        fail,
        timer: setTimeout(() => {
          this.waiting = this.waiting.filter((w) => w !== entry);
          fail(unavailable(`no query slot became free within ${this.s.queueWaitMs} ms`, 2));
        }, this.s.queueWaitMs),
      };
      this.waiting.push(entry);
    });
  }

  private release(key: string): void {
    const n = (this.running.get(key) ?? 1) - 1;
    if (n > 0) this.running.set(key, n);
    else this.running.delete(key);
    // Wake the first waiter whose key is under its limit.
    const total = [...this.running.values()].reduce((a, b) => a + b, 0);
    if (total >= this.s.concurrency) return;
    const i = this.waiting.findIndex((w) => (this.running.get(w.key) ?? 0) < this.s.perKey);
    if (i < 0) return;
    const [w] = this.waiting.splice(i, 1);
    clearTimeout(w.timer);
    this.running.set(w.key, (this.running.get(w.key) ?? 0) + 1);
    w.resume();
  }

  /** A ready, idle worker (started if needed); admission guarantees there is room for one. */
  private async idleSlot(): Promise<Slot> {
    let slot = this.slots.find((s) => !s.busy);
    if (!slot) slot = this.spawn();
    slot.busy = true;
    try {
      await slot.ready;
    } catch (err) {
      slot.busy = false;
      throw unavailable(`query worker could not start: ${(err as Error).message}`, 2);
    }
    return slot;
  }

  /**
   * Runs a job built for the worker that gets it (`build` receives the worker's file directory) under
   * the admission limits of `key`. Released (slot and admission) when the events end.
   */
  async run(key: string, build: (filesDir: string) => DistributiveOmit<WorkerJob, 'id'>): Promise<Execution> {
    if (this.closed) throw unavailable('the service is shutting down', 5);
    await this.admit(key);
    let slot: Slot;
    try {
      slot = await this.idleSlot();
    } catch (err) {
      this.release(key);
      throw err;
    }
    // Keep one spare worker warm so the next query does not wait for a process start.
    if (!this.closed && this.slots.every((s) => s.busy) && this.slots.length < this.s.concurrency) this.spawn();

    const id = Date.now() * 1000 + Math.floor(Math.random() * 1000);
    const queue: FromWorker[] = [];
    let wake: (() => void) | undefined;
    let finished = false;
    const push = (m: FromWorker) => {
      if (finished) return;
      if (isLast(m)) finished = true;
      queue.push(m);
      wake?.();
    };
    slot.onMessage = (m) => {
      if ('id' in m && m.id === id) push(m);
    };
    slot.onExit = () => push({ type: 'error', id, kind: 'unavailable', message: 'the query worker stopped (out of memory, or killed past the time limit)' });
    let done = false;
    /** The query was cut off here (time limit, cancel): the worker may still be inside DuckDB. */
    let cutOff = false;
    const finish = () => {
      if (done) return;
      done = true;
      slot.onMessage = undefined;
      slot.onExit = undefined;
      const alive = slot.child.exitCode === null && slot.child.signalCode === null;
      if (alive && cutOff) {
        // Cut off mid-query (time limit, cancel, client gone): it may still be inside DuckDB, whose
        // optimiser ignores interrupts. End the process; a fresh one takes its place on demand.
        this.slots = this.slots.filter((s) => s !== slot);
        slot.child.kill('SIGKILL');
      } else slot.busy = false;
      this.release(key);
    };
    const sendTo = (m: ToWorker) => {
      if (slot.child.connected) slot.child.send(m);
    };

    const job = { ...build(path.join(slot.dir, 'files')), id } as WorkerJob;
    sendTo(job);

    const events: AsyncIterable<FromWorker> = {
      [Symbol.asyncIterator]: async function* () {
        try {
          for (;;) {
            while (queue.length) {
              const m = queue.shift()!;
              yield m;
              if (isLast(m)) return;
            }
            await new Promise<void>((r) => (wake = r));
            wake = undefined;
          }
        } finally {
          finish();
        }
      },
    };
    return {
      events,
      ack: () => sendTo({ type: 'ack', id }),
      grant: (g) => sendTo({ type: 'grant', id, ...g }),
      cancel: (reason) => {
        if (finished) return;
        cutOff = true;
        push({ type: 'error', id, kind: reason.kind, message: reason.message });
      },
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const w of this.waiting.splice(0)) {
      clearTimeout(w.timer);
      w.fail(unavailable('the service is shutting down', 5));
    }
    for (const s of this.slots) s.child.kill('SIGKILL');
  }
}
