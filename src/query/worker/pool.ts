import { fork, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeFileSync } from 'node:fs';
import { DomainError, unavailable } from '../../errors.ts';
import { entryBeside, fromSource } from '../../entrypoints.ts';
import { log } from '../../log.ts';
import type { FromWorker, PromqlGrantMessage, ToWorker, WorkerJob } from './protocol.ts';
import type { WorkerCgroup, WorkerCgroups } from './cgroup.ts';
import { Admission } from './admission.ts';
import { watchMemory } from './rssWatch.ts';

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** The message that ends a job's events. */
const isLast = (m: FromWorker) => m.type === 'done' || m.type === 'answer' || m.type === 'error' || m.type === 'promql' || m.type === 'catalog';

export interface QueryPoolSettings {
  /** Where worker directories live (wiped at start). */
  workDir: string;
  /** Queries running at once, in total (one worker process each). */
  concurrency: number;
  /** Queries one key may run at once. */
  perKey: number;
  /**
   * Slots only a key with no query running may take (at most concurrency - 1), so keys that already
   * run queries can never hold every slot between them.
   */
  reserve?: number;
  /** Queries that may wait for a slot, in total. */
  queue: number;
  /** Longest wait for a slot before 503. */
  queueWaitMs: number;
  threads: number;
  memoryLimit: string;
  /** Hard cap on a worker's resident memory (P_QUERY_WORKER_MAX_MEMORY): over it the worker is killed. */
  maxRssBytes?: number;
  /** JS heap of a worker process, in MiB. */
  heapMb: number;
  /** Workers started with the service and always kept (P_QUERY_WARM_WORKERS). */
  warm: number;
  /** A memory cgroup per worker, capped at `maxRssBytes` by the kernel; without it (or for a worker it failed for) the RSS watchdog. */
  cgroups?: WorkerCgroups;
  /**
   * A worker beyond the warm ones that has run no query for this long exits (P_QUERY_WORKER_IDLE), so
   * an idle service holds no query process; 0 or unset: kept.
   */
  idleMs?: number;
}

/** What the caller sees of a running query: its events, and a way to stop it. */
export interface Execution {
  /** The worker's messages for this query, ending with `done` or `error`. */
  events: AsyncIterable<FromWorker>;
  /** Tells the worker a streamed chunk was written out (flow control). */
  ack: () => void;
  /** Answers a PromQL job's request for files (`need`). */
  grant: (g: Omit<PromqlGrantMessage, 'type' | 'id'>) => void;
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
  /** Its PromQL engine process, once it started one (counted in its memory; it dies with the worker). */
  enginePid?: number;
  /** When it last finished a query (or became ready), for the idle release. */
  idleSince: number;
  /** It was let go after a quiet period (its exit is expected). */
  retired: boolean;
  /** The job running on it, to fail if the process dies. */
  onMessage?: (m: FromWorker) => void;
  /** `oomKilled`: the kernel killed it in its memory cgroup (over its cap). */
  onExit?: (oomKilled: boolean) => void;
  /** Its memory cgroup, when it has one. */
  cgroup?: WorkerCgroup;
}

const QUERY_WORKER_OOM_SCORE_ADJ = 800;

/**
 * Worker processes for user queries, with admission control. Each running query has a process of its
 * own, started on first use (or with the service: P_QUERY_WARM_WORKERS) and reused; one idle for
 * P_QUERY_WORKER_IDLE beyond the warm ones exits, so an idle service holds no query process (~40 MB
 * PSS each). One cut off mid-query (time limit, cancel, client gone) is killed and replaced, since
 * DuckDB's optimiser cannot be interrupted. Workers run at a lower CPU priority than the service, so
 * ingestion keeps its share of the cores under any query load.
 */
export class QueryPool {
  private slots: Slot[] = [];
  private nextSlot = 1;
  private closed = false;
  private readonly entry = fileURLToPath(entryBeside(import.meta.url, 'worker'));
  /** Run from source, the worker process loads tsx to run TypeScript; from the build it needs nothing. */
  private readonly loader = fromSource ? ['--import', import.meta.resolve('tsx')] : [];

  private readonly admission: Admission;

  constructor(private readonly s: QueryPoolSettings) {
    this.admission = new Admission(s);
  }

  async start(): Promise<void> {
    await fs.rm(this.s.workDir, { recursive: true, force: true });
    await fs.mkdir(this.s.workDir, { recursive: true });
    // Warm workers answer the first queries without a process start, and without one starting beside
    // them (a start takes a core for ~0.5 s: measured, it made the first queries 5–10× slower). None by
    // default: the first query after a quiet period pays the start instead (docs/memory.md).
    for (let i = 0; i < Math.min(this.s.concurrency, this.s.warm); i++) this.spawn();
  }

  /**
   * Lets idle workers beyond the warm ones go once they have been idle for `idleMs`; checked when a
   * worker becomes idle and then again when its quiet period would end (one timer per worker, not one
   * per query).
   */
  private watchIdle(slot: Slot): void {
    const idleMs = this.s.idleMs ?? 0;
    if (!idleMs) return;
    const check = () => {
      if (this.closed || slot.retired || !this.slots.includes(slot)) return;
      const quietFor = performance.now() - slot.idleSince;
      if (slot.busy || !slot.started || quietFor < idleMs) {
        setTimeout(check, slot.busy || !slot.started ? idleMs : idleMs - quietFor).unref();
        return;
      }
      if (this.slots.length <= this.s.warm) {
        // A warm worker: kept, but looked at again in case more workers start and it becomes surplus.
        setTimeout(check, idleMs).unref();
        return;
      }
      slot.retired = true;
      this.slots = this.slots.filter((s) => s !== slot);
      slot.child.kill('SIGKILL');
    };
    setTimeout(check, idleMs).unref();
  }

  get stats(): { starting: number; idle: number; busy: number; waiting: number } {
    const busy = this.slots.filter((s) => s.busy).length;
    const starting = this.slots.filter((s) => !s.busy && !s.started).length;
    return { starting, idle: this.slots.length - busy - starting, busy, waiting: this.admission.waitingCount };
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
        // glibc gives each thread that allocates its own arena (up to 8 per core), which keeps freed
        // memory: two bound the worker's heap growth from DuckDB's threads.
        MALLOC_ARENA_MAX: process.env.MALLOC_ARENA_MAX ?? '2',
        ...this.s.cgroups?.envFor(id),
      },
    });
    // The kernel's OOM killer picks a query worker before the service (which holds acknowledged data
    // in flight): raising a child's score needs no privilege.
    if (child.pid) {
      try {
        writeFileSync(`/proc/${child.pid}/oom_score_adj`, String(QUERY_WORKER_OOM_SCORE_ADJ));
      } catch {
        /* not Linux */
      }
    }
    const cgroup = child.pid ? this.s.cgroups?.attach(id, child.pid) : undefined;
    let readyResolve!: () => void;
    let readyReject!: (e: Error) => void;
    const slot: Slot = {
      id,
      child,
      dir,
      busy: false,
      started: false,
      cgroup,
      idleSince: performance.now(),
      retired: false,
      ready: new Promise<void>((res, rej) => {
        readyResolve = res;
        readyReject = rej;
      }),
    };
    slot.ready.catch(() => undefined);
    child.on('message', (m: FromWorker) => {
      if (m.type === 'ready') {
        slot.started = true;
        slot.idleSince = performance.now();
        readyResolve();
      } else if (m.type === 'engine') slot.enginePid = m.pid;
      else slot.onMessage?.(m);
    });
    child.on('exit', (code, signal) => {
      readyReject(new Error(`query worker exited before it was ready (${signal ?? code})`));
      this.slots = this.slots.filter((s) => s !== slot);
      void fs.rm(dir, { recursive: true, force: true });
      const oomKilled = cgroup?.oomKilled() ?? false;
      if (cgroup) void this.s.cgroups?.release(cgroup);
      if (oomKilled) log.warn('query worker over its memory cap; killed by the kernel in its memory cgroup', { worker: id, capBytes: this.s.maxRssBytes });
      slot.onExit?.(oomKilled);
      if (!slot.onExit && !this.closed && !slot.retired && code !== 0) log.warn('query worker exited', { worker: id, code, signal });
    });
    this.slots.push(slot);
    this.watchIdle(slot);
    return slot;
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

  /** A slot for `key`'s job, once admitted (the admission is given back if no slot can be had). */
  private async acquire(key: string): Promise<Slot> {
    if (this.closed) throw unavailable('the service is shutting down', 5);
    await this.admission.admit(key);
    let slot: Slot;
    try {
      slot = await this.idleSlot();
    } catch (err) {
      this.admission.release(key);
      throw err;
    }
    // With warm workers asked for, keep one spare so the next query does not wait for a process start.
    // Without (the default), workers start on demand only: a spare starting beside a cold start takes
    // a core from the first query (~0.5 s of CPU), and it doubles the memory held until the next quiet
    // period ends.
    if (!this.closed && this.s.warm > 0 && this.slots.every((s) => s.busy) && this.slots.length < this.s.concurrency) this.spawn();

    return slot;
  }

  /**
   * Runs `work` in this process under `key`'s admission — the same per-key and total limits (429/503) as
   * a worker job, counted with them — without a worker: for answers the service gives itself (the
   * PromQL label index), so that they stay behind the same guards as every other query.
   */
  async admitted<T>(key: string, work: () => Promise<T>): Promise<T> {
    if (this.closed) throw unavailable('the service is shutting down', 5);
    await this.admission.admit(key);
    try {
      return await work();
    } finally {
      this.admission.release(key);
    }
  }

  /**
   * Runs a job built for the worker that gets it (`build` receives the worker's file directory) under
   * the admission limits of `key`. Released (slot and admission) when the events end.
   */
  async run(key: string, build: (filesDir: string) => DistributiveOmit<WorkerJob, 'id'>): Promise<Execution> {
    const slot = await this.acquire(key);
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
    const overCap = (cap: number) =>
      push({ type: 'error', id, kind: 'too_large', message: `the query needed more memory than a query may use (${Math.round(cap / 1024 / 1024)} MiB, P_QUERY_WORKER_MAX_MEMORY); narrow it: fewer rows, a shorter time range, smaller intermediate lists or strings` });
    // The kernel may pick the worker's PromQL engine (its child, in its cgroup) rather than the worker:
    // the worker then reports the engine gone, and the cgroup's OOM count says why.
    const oomKillsBefore = slot.cgroup?.oomKills() ?? 0;
    slot.onMessage = (m) => {
      if (!('id' in m) || m.id !== id) return;
      if (m.type === 'error' && m.kind === 'unavailable' && this.s.maxRssBytes && slot.cgroup && slot.cgroup.oomKills() > oomKillsBefore) overCap(this.s.maxRssBytes);
      else push(m);
    };
    slot.onExit = (oomKilled) =>
      oomKilled && this.s.maxRssBytes ? overCap(this.s.maxRssBytes) : push({ type: 'error', id, kind: 'unavailable', message: 'the query worker stopped (out of memory, or killed past the time limit)' });
    let done = false;
    /** The query was cut off here (time limit, cancel): the worker may still be inside DuckDB. */
    let cutOff = false;
    const finish = () => {
      if (done) return;
      done = true;
      clearInterval(watchdog);
      slot.onMessage = undefined;
      slot.onExit = undefined;
      const alive = slot.child.exitCode === null && slot.child.signalCode === null;
      if (alive && cutOff) {
        // Cut off mid-query (time limit, cancel, client gone): it may still be inside DuckDB, whose
        // optimiser ignores interrupts. End the process; a fresh one takes its place on demand.
        this.slots = this.slots.filter((s) => s !== slot);
        slot.child.kill('SIGKILL');
      } else {
        slot.busy = false;
        slot.idleSince = performance.now();
      }
      this.admission.release(key);
    };
    const sendTo = (m: ToWorker) => {
      if (slot.child.connected) slot.child.send(m);
    };

    sendTo({ ...build(path.join(slot.dir, 'files')), id } as WorkerJob);
    // Resident memory watched, unless the worker's cgroup holds it to the cap (onExit above).
    const cap = slot.cgroup ? undefined : this.s.maxRssBytes;
    const watchdog = cap
      ? watchMemory(slot, cap, () => finished, () => {
          cutOff = true;
          overCap(cap);
        })
      : undefined;

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
        // The slot and the key's admission go back now, not when the consumer next reads: a client
        // that stops reading (a suspended PostgreSQL portal, a stalled HTTP stream) would otherwise
        // hold them past the time limit. The consumer still reads the error.
        finish();
      },
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.admission.failAll(unavailable('the service is shutting down', 5));
    for (const s of this.slots) s.child.kill('SIGKILL');
    await this.s.cgroups?.close();
  }
}

/**
 * DuckDB's memory limit does not count list and string intermediates (a string_split of a long string
 * took a worker to 7.5 GB with a 2 GB limit): the worker's resident memory (with its PromQL engine's) is
 * watched, and over the cap the worker is killed (413 to the client) before the kernel has to choose. Its
 * engine dies with it (the engine's parent-death signal, promql/sandbox_linux.go). A worker in its own
 * memory cgroup (its engine, a child, is in it too) is held to the cap by the kernel instead.
 */
