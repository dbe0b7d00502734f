import { describe, expect, it } from 'vitest';
import { limitWrites, oomKillCount, parseWorkerCgroupName, planWorkerCgroups, staleWorkerCgroups, workerCgroupName, type CgroupPlan, type CgroupProbe } from '../../src/query/worker/cgroup.ts';

/** A fake cgroup file system: file contents, and the directories this process may write. */
const probe = (files: Record<string, string>, writable: string[]): CgroupProbe => ({ read: (f) => files[f], writable: (d) => writable.includes(d) });

const PID = 4242;
const v1Self = '12:memory:/kubepods/pod1/ctr\n0::/\n';
const v1Dir = '/sys/fs/cgroup/memory/kubepods/pod1/ctr';
const v2Self = '0::/system.slice/lakehouse.service\n';
const v2Dir = '/sys/fs/cgroup/system.slice/lakehouse.service';

describe('planWorkerCgroups: where worker cgroups go, or why none', () => {
  const cases: { name: string; proc: string; files: Record<string, string>; writable: string[]; want: CgroupPlan | RegExp }[] = [
    { name: 'v1: the memory hierarchy directory of the service', proc: v1Self, files: { [`${v1Dir}/memory.limit_in_bytes`]: '536870912' }, writable: [v1Dir], want: { version: 1, parent: v1Dir } },
    { name: 'v1 with several controllers on one hierarchy, at the root', proc: '4:memory,hugetlb:/\n', files: { '/sys/fs/cgroup/memory/memory.limit_in_bytes': '9223372036854771712' }, writable: ['/sys/fs/cgroup/memory'], want: { version: 1, parent: '/sys/fs/cgroup/memory' } },
    { name: 'v1 not writable (not root)', proc: v1Self, files: { [`${v1Dir}/memory.limit_in_bytes`]: '1' }, writable: [], want: /not writable/ },
    { name: 'v1 line but the hierarchy is not mounted where expected', proc: v1Self, files: {}, writable: [v1Dir], want: /not found/ },
    {
      name: 'v2: children may already have the memory controller',
      proc: v2Self,
      files: { [`${v2Dir}/cgroup.controllers`]: 'cpu io memory pids', [`${v2Dir}/cgroup.subtree_control`]: 'memory pids', [`${v2Dir}/cgroup.procs`]: '' },
      writable: [v2Dir],
      want: { version: 2, parent: v2Dir },
    },
    {
      name: 'v2 delegated, the service alone in it: it moves into a leaf first',
      proc: v2Self,
      files: { [`${v2Dir}/cgroup.controllers`]: 'cpu memory', [`${v2Dir}/cgroup.subtree_control`]: '', [`${v2Dir}/cgroup.procs`]: `${PID}\n` },
      writable: [v2Dir],
      want: { version: 2, parent: v2Dir, leaf: `${v2Dir}/lakehouse-service` },
    },
    {
      name: 'v2 shared with other processes',
      proc: v2Self,
      files: { [`${v2Dir}/cgroup.controllers`]: 'memory', [`${v2Dir}/cgroup.subtree_control`]: '', [`${v2Dir}/cgroup.procs`]: `1\n${PID}\n` },
      writable: [v2Dir],
      want: /other processes/,
    },
    { name: 'v2 without the memory controller', proc: v2Self, files: { [`${v2Dir}/cgroup.controllers`]: 'cpu pids' }, writable: [v2Dir], want: /no memory controller/ },
    { name: 'v2 read-only (a container without cgroup delegation)', proc: '0::/\n', files: { '/sys/fs/cgroup/cgroup.controllers': 'memory' }, writable: [], want: /not writable/ },
    { name: 'no cgroups at all', proc: '', files: {}, writable: [], want: /no memory cgroup/ },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const plan = planWorkerCgroups(c.proc, '/sys/fs/cgroup', PID, probe(c.files, c.writable));
      if (c.want instanceof RegExp) {
        expect(plan.version).toBe(0);
        expect(plan.version === 0 && plan.reason).toMatch(c.want);
      } else expect(plan).toEqual(c.want);
    });
  }
});

describe('limitWrites: the cap, and no swap beyond it', () => {
  const cases: { name: string; version: 1 | 2; cap: number; files: string[]; want: [string, string][] }[] = [
    { name: 'v1 with swap accounting: the limit first (memsw must stay ≥ it)', version: 1, cap: 268435456, files: ['memory.memsw.limit_in_bytes'], want: [['memory.limit_in_bytes', '268435456'], ['memory.memsw.limit_in_bytes', '268435456']] },
    { name: 'v1 without swap accounting', version: 1, cap: 268435456, files: [], want: [['memory.limit_in_bytes', '268435456']] },
    { name: 'v2 with swap', version: 2, cap: 178956970, files: ['memory.swap.max'], want: [['memory.max', '178956970'], ['memory.swap.max', '0']] },
    { name: 'v2 without swap', version: 2, cap: 1.5 * 2 ** 30, files: [], want: [['memory.max', '1610612736']] },
  ];
  for (const c of cases) it(c.name, () => expect(limitWrites(c.version, c.cap, (f) => c.files.includes(f))).toEqual(c.want));
});

describe('worker cgroup names and OOM counts', () => {
  it('a name carries the service pid and the worker number, and nothing else parses', () => {
    expect(workerCgroupName(123, 7)).toBe('lakehouse-query-123-w7');
    expect(parseWorkerCgroupName(workerCgroupName(123, 7))).toEqual({ servicePid: 123, worker: 7 });
    for (const other of ['lakehouse-service', 'lakehouse-query-123', 'lakehouse-query-x-w1', 'lakehouse-test-abc', 'lakehouse-query-1-w2x']) expect(parseWorkerCgroupName(other)).toBeUndefined();
  });
  const cases: [string, string | undefined, number][] = [
    ['v1 memory.oom_control after a kill', 'oom_kill_disable 0\nunder_oom 0\noom_kill 1\n', 1],
    ['v1 memory.oom_control, none', 'oom_kill_disable 0\nunder_oom 0\noom_kill 0\n', 0],
    ['v2 memory.events after kills', 'low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n', 2],
    ['a file that is gone', undefined, 0],
  ];
  for (const [name, text, want] of cases) it(`oomKillCount: ${name}`, () => expect(oomKillCount(text)).toBe(want));
});

describe('staleWorkerCgroups: what a starting service removes', () => {
  // The service itself (pid 7) is alive, as is another service (pid 200).
  const alive = (pid: number) => pid === 200 || pid === 7;
  const cases: [string, string[], string[]][] = [
    ['a dead service\'s cgroups', ['lakehouse-query-100-w0', 'lakehouse-query-100-w3'], ['lakehouse-query-100-w0', 'lakehouse-query-100-w3']],
    ['a running service\'s cgroups stay', ['lakehouse-query-200-w0'], []],
    // Issue 30 A15: restarted in a container with its predecessor's pid, which it took for its own.
    ['cgroups named with its own pid (a predecessor of the same pid)', ['lakehouse-query-7-w0', 'lakehouse-query-7-w1'], ['lakehouse-query-7-w0', 'lakehouse-query-7-w1']],
    ['other names are never touched', ['system.slice', 'lakehouse-query-x-w0', 'lakehouse-query-100'], []],
  ];
  for (const [name, names, want] of cases) it(name, () => expect(staleWorkerCgroups(names, 7, alive)).toEqual(want));
});
