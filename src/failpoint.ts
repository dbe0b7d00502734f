/**
 * Crash points for the crash tests: with `P_FAILPOINT=<name>` the process kills itself (SIGKILL, as
 * a power cut would) when it reaches `<name>`, between two steps whose order durability depends on.
 */
export function failpoint(name: string): void {
  if (process.env.P_FAILPOINT === name) process.kill(process.pid, 'SIGKILL');
}

/**
 * The resource errors the fault tests inject, worded as they reach the service: Node's errno errors,
 * and DuckDB's own messages (its out-of-memory, and a file it cannot open for lack of descriptors).
 */
const FAULTS: Record<string, () => Error> = {
  oom: () => new Error('Out of Memory Error: failed to allocate data of size 16.0 MiB (1.8 GiB/1.8 GiB used)'),
  'duckdb-emfile': () => new Error('IO Error: Cannot open file "/injected": Too many open files'),
  'duckdb-enospc': () => new Error('IO Error: Could not write file "/injected/duckdb_temp_block": No space left on device'),
  emfile: () => Object.assign(new Error('EMFILE: too many open files, open'), { code: 'EMFILE' }),
  enfile: () => Object.assign(new Error('ENFILE: file table overflow, open'), { code: 'ENFILE' }),
  enospc: () => Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' }),
  eio: () => Object.assign(new Error('EIO: i/o error, read'), { code: 'EIO' }),
  enomem: () => Object.assign(new Error('ENOMEM: not enough memory, read'), { code: 'ENOMEM' }),
};
export const FAULT_KINDS = Object.keys(FAULTS);

const faultCounts = new Map<string, number>();

/**
 * Fault points for the resource-error tests: with `P_FAULT=<point>:<fault>:<times>` (several joined by
 * commas) the first `<times>` arrivals at `<point>` throw that fault (a name in FAULTS) instead of going
 * on. Read on each arrival, so an in-process test may change it between steps.
 */
export function faultpoint(point: string): void {
  const specs = process.env.P_FAULT;
  if (!specs) return;
  for (const spec of specs.split(',')) {
    const [at, kind, times] = spec.split(':');
    if (at !== point || !FAULTS[kind]) continue;
    const n = faultCounts.get(spec) ?? 0;
    if (n >= Number(times ?? 1)) continue;
    faultCounts.set(spec, n + 1);
    throw FAULTS[kind]();
  }
}
