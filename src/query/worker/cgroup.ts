import * as fs from 'node:fs';
import * as path from 'node:path';
import { log } from '../../log.ts';

/**
 * A memory cgroup per query worker: the kernel itself holds the worker to its cap
 * (P_QUERY_WORKER_MAX_MEMORY), however fast it allocates, and kills it inside its own group when it is
 * over (never the service). Used when the service may create one: as root or in a delegated cgroup,
 * under its own cgroup (so every limit of that one, a container's, still holds). Otherwise the pool
 * falls back to its RSS watchdog.
 */

/** Where worker cgroups are made, or why they cannot be. */
export type CgroupPlan =
  | { version: 1; parent: string }
  /** v2: `leaf`, when set, is the cgroup the service first moves itself into (no process may stay in a cgroup whose children have controllers). */
  | { version: 2; parent: string; leaf?: string }
  | { version: 0; reason: string };

/** What planning reads of the file system: injected so the rules are tested on a fake tree. */
export interface CgroupProbe {
  read(file: string): string | undefined;
  writable(dir: string): boolean;
}

export const realProbe: CgroupProbe = {
  read: (file) => {
    try {
      return fs.readFileSync(file, 'utf8');
    } catch {
      return undefined;
    }
  },
  writable: (dir) => {
    try {
      fs.accessSync(dir, fs.constants.W_OK);
      return fs.statSync(dir).isDirectory();
    } catch {
      return false;
    }
  },
};

const SERVICE_LEAF = 'lakehouse-service';

/**
 * Where this process may create memory cgroups for its workers. `procCgroup` is /proc/self/cgroup's
 * text, `root` the cgroup file system's mount point, `pid` this process. v1: the `memory` hierarchy's
 * directory of this process (`<root>/memory<path>`). v2: this process's cgroup when its children may
 * have the memory controller (`cgroup.subtree_control` has it), or — when the memory controller is
 * available and this process is the only one in its cgroup (a delegated cgroup) — after the service
 * moves itself into a leaf beside its workers.
 */
export function planWorkerCgroups(procCgroup: string, root: string, pid: number, probe: CgroupProbe = realProbe): CgroupPlan {
  const lines = procCgroup.split('\n').filter(Boolean);
  const v1 = lines.find((l) => l.split(':')[1]?.split(',').includes('memory'));
  if (v1) {
    const dir = `${root}/memory${v1.split(':').slice(2).join(':').replace(/\/$/, '')}`;
    if (probe.read(`${dir}/memory.limit_in_bytes`) === undefined) return { version: 0, reason: `cgroup v1 memory hierarchy not found at ${dir}` };
    if (!probe.writable(dir)) return { version: 0, reason: `cgroup v1 ${dir} is not writable (run as root, or give the service a writable memory cgroup)` };
    return { version: 1, parent: dir };
  }
  const v2 = lines.find((l) => l.startsWith('0::'));
  if (!v2) return { version: 0, reason: 'no memory cgroup (neither a v1 memory hierarchy nor cgroup v2)' };
  const self = `${root}${v2.slice(3).replace(/\/$/, '')}`;
  const words = (file: string) => (probe.read(file) ?? '').split(/\s+/).filter(Boolean);
  if (!words(`${self}/cgroup.controllers`).includes('memory')) return { version: 0, reason: `cgroup v2 ${self} has no memory controller` };
  if (!probe.writable(self)) return { version: 0, reason: `cgroup v2 ${self} is not writable (run as root, or delegate a cgroup to the service)` };
  if (words(`${self}/cgroup.subtree_control`).includes('memory')) return { version: 2, parent: self };
  const others = words(`${self}/cgroup.procs`).filter((p) => Number(p) !== pid);
  if (others.length) return { version: 0, reason: `cgroup v2 ${self} holds other processes (${others.length}), so its children cannot have the memory controller` };
  return { version: 2, parent: self, leaf: `${self}/${SERVICE_LEAF}` };
}

/**
 * The files to write in a worker's new cgroup, in order, for a cap of `capBytes`: the limit, and no
 * swap beyond it (a worker swapping would slow the whole machine instead of stopping). `has` says
 * whether a control file exists (swap accounting is optional in the kernel). v1 checks that
 * memsw ≥ limit on every write, so the limit goes first.
 */
export function limitWrites(version: 1 | 2, capBytes: number, has: (file: string) => boolean): [string, string][] {
  const cap = String(Math.floor(capBytes));
  if (version === 1) return [['memory.limit_in_bytes', cap], ...(has('memory.memsw.limit_in_bytes') ? ([['memory.memsw.limit_in_bytes', cap]] as [string, string][]) : [])];
  return [['memory.max', cap], ...(has('memory.swap.max') ? ([['memory.swap.max', '0']] as [string, string][]) : [])];
}

const NAME = /^lakehouse-query-(\d+)-w(\d+)$/;
/** A worker's cgroup's name: the service's pid (so a restarted service recognises a dead one's leftovers) and the worker's number. */
export const workerCgroupName = (servicePid: number, worker: number) => `lakehouse-query-${servicePid}-w${worker}`;
export function parseWorkerCgroupName(name: string): { servicePid: number; worker: number } | undefined {
  const m = NAME.exec(name);
  return m ? { servicePid: Number(m[1]), worker: Number(m[2]) } : undefined;
}

/** The kernel's count of OOM kills inside a cgroup, from v1 `memory.oom_control` or v2 `memory.events`. */
export function oomKillCount(text: string | undefined): number {
  return Number(/^oom_kill (\d+)$/m.exec(text ?? '')?.[1] ?? 0);
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One worker's cgroup. */
export class WorkerCgroup {
  private removing?: Promise<void>;
  constructor(
    readonly dir: string,
    private readonly version: 1 | 2,
  ) {}

  /** Whether the kernel OOM-killed a process in it (read before `remove`). */
  oomKilled(): boolean {
    return this.oomKills() > 0;
  }

  /** The OOM counter's file, kept open: the pool reads it before every job (one pread, not open, stat, read, close). */
  private events: number | undefined;
  private readonly eventsText = Buffer.alloc(1024);

  /** How many processes in it the kernel OOM-killed so far (the worker, or its PromQL engine). */
  oomKills(): number {
    try {
      this.events ??= fs.openSync(path.join(this.dir, this.version === 1 ? 'memory.oom_control' : 'memory.events'), 'r');
      const n = fs.readSync(this.events, this.eventsText, 0, this.eventsText.length, 0);
      return oomKillCount(this.eventsText.toString('latin1', 0, n));
    } catch {
      return 0;
    }
  }

  private closeEvents(): void {
    if (this.events === undefined) return;
    fs.closeSync(this.events);
    this.events = undefined;
  }

  /** Removes it once its process is gone (an exited process may linger in it for a moment). */
  remove(): Promise<void> {
    this.closeEvents();
    return (this.removing ??= (async () => {
      for (let i = 0; i < 100; i++) {
        try {
          fs.rmdirSync(this.dir);
          return;
        } catch (err) {
          const code = (err as NodeJS.ErrnoException).code;
          if (code === 'ENOENT') return;
          if (code !== 'EBUSY') break;
        }
        await sleep(50);
      }
      log.warn('query worker cgroup left behind', { dir: this.dir });
    })());
  }
}

/**
 * Which worker cgroups under the parent a starting service removes: those of services no longer
 * running, and those named with its own pid. A service restarted after a crash in a container often
 * gets the pid its predecessor had (pid 1, or the same few after it), and its predecessor's cgroups,
 * taken for its own, were left for good (issue 30 A15); at start it has no worker yet, so any cgroup
 * with its pid is a leftover. A cgroup that still holds a process cannot be removed anyway.
 */
export function staleWorkerCgroups(names: string[], selfPid: number, isAlive: (pid: number) => boolean): string[] {
  return names.filter((name) => {
    const owner = parseWorkerCgroupName(name);
    return owner !== undefined && (owner.servicePid === selfPid || !isAlive(owner.servicePid));
  });
}

/** Creates, fills and removes the query workers' cgroups of this service. */
export class WorkerCgroups {
  private readonly live = new Set<WorkerCgroup>();
  private constructor(
    private readonly plan: Extract<CgroupPlan, { version: 1 | 2 }>,
    private readonly capBytes: number,
  ) {}

  /**
   * The service's worker cgroups, or why there are none (`mode` "off", or the plan's reason). Leftovers
   * of a service that died without cleaning up (killed with SIGKILL) are removed first; a v2 service
   * alone in a delegated cgroup moves itself into a leaf and enables the memory controller for children.
   */
  static open(mode: 'auto' | 'off', capBytes: number, root = '/sys/fs/cgroup'): { cgroups?: WorkerCgroups; reason: string } {
    if (mode === 'off') return { reason: 'P_QUERY_WORKER_CGROUP=off' };
    const plan = planWorkerCgroups(realProbe.read('/proc/self/cgroup') ?? '', root, process.pid);
    if (plan.version === 0) return { reason: plan.reason };
    try {
      if (plan.version === 2 && plan.leaf) {
        fs.mkdirSync(plan.leaf, { recursive: true });
        fs.writeFileSync(path.join(plan.leaf, 'cgroup.procs'), String(process.pid));
        fs.writeFileSync(path.join(plan.parent, 'cgroup.subtree_control'), '+memory');
      }
      const cgroups = new WorkerCgroups(plan, capBytes);
      cgroups.sweep();
      return { cgroups, reason: `cgroup v${plan.version}, one per worker: ${path.join(plan.parent, workerCgroupName(process.pid, 0).replace(/0$/, ''))}<n>` };
    } catch (err) {
      return { reason: `cgroup v${plan.version} under ${plan.parent} could not be prepared: ${(err as Error).message}` };
    }
  }

  /** Removes the empty worker cgroups of services that are no longer running (see staleWorkerCgroups). */
  private sweep(): void {
    let names: string[] = [];
    try {
      names = fs.readdirSync(this.plan.parent);
    } catch {
      return;
    }
    for (const name of staleWorkerCgroups(names, process.pid, alive)) {
      try {
        fs.rmdirSync(path.join(this.plan.parent, name));
        log.info('removed a stale query worker cgroup', { dir: path.join(this.plan.parent, name) });
      } catch {
        /* still holds a worker of the dead service, which exits when its parent's channel closes: next start */
      }
    }
  }

  /**
   * The environment of worker `worker`: its cgroup, and where it moves itself to remove that cgroup
   * when the service goes away without removing it (killed with SIGKILL; see `leaveWorkerCgroup`).
   */
  envFor(worker: number): Record<string, string> {
    return { QW_CGROUP: path.join(this.plan.parent, workerCgroupName(process.pid, worker)), QW_CGROUP_HOME: (this.plan.version === 2 && this.plan.leaf) || this.plan.parent };
  }

  /**
   * Puts a freshly started worker into a new cgroup capped at the worker's cap; undefined (and a warning)
   * when that fails, so the pool watches that worker's RSS instead.
   */
  attach(worker: number, pid: number): WorkerCgroup | undefined {
    const dir = path.join(this.plan.parent, workerCgroupName(process.pid, worker));
    try {
      fs.mkdirSync(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') {
        log.warn('query worker cgroup not created; its memory is watched instead', { dir, error: (err as Error).message });
        return undefined;
      }
    }
    const cg = new WorkerCgroup(dir, this.plan.version);
    try {
      for (const [file, value] of limitWrites(this.plan.version, this.capBytes, (f) => fs.existsSync(path.join(dir, f)))) fs.writeFileSync(path.join(dir, file), value);
      fs.writeFileSync(path.join(dir, 'cgroup.procs'), String(pid));
    } catch (err) {
      log.warn('query worker cgroup not set up; its memory is watched instead', { dir, error: (err as Error).message });
      void cg.remove();
      return undefined;
    }
    this.live.add(cg);
    return cg;
  }

  /** Removes a worker's cgroup after its process exited. */
  async release(cg: WorkerCgroup): Promise<void> {
    await cg.remove();
    this.live.delete(cg);
  }

  /** At shutdown, after the workers were killed: removes every cgroup as their processes go. */
  async close(): Promise<void> {
    await Promise.all([...this.live].map((cg) => this.release(cg)));
  }
}

/**
 * In a query worker whose service is gone: moves this process out of its cgroup (to the service's,
 * `QW_CGROUP_HOME`) and removes the cgroup, so that a service killed with SIGKILL leaves none behind. A
 * cgroup cannot be removed by its last process from inside, nor by the dead service.
 */
export function leaveWorkerCgroup(env: NodeJS.ProcessEnv = process.env): void {
  if (!env.QW_CGROUP || !env.QW_CGROUP_HOME) return;
  try {
    fs.writeFileSync(path.join(env.QW_CGROUP_HOME, 'cgroup.procs'), String(process.pid));
    fs.rmdirSync(env.QW_CGROUP);
  } catch {
    /* not in one, or gone already: the next service start removes what is left */
  }
}
