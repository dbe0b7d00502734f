import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs/promises';
import { sleep } from './wait.ts';

/**
 * A memory cgroup for one test, created under the test process's own cgroup (so whatever limits it
 * already has still hold): v1 (`memory` hierarchy at /sys/fs/cgroup/memory) or v2 with the memory
 * controller enabled for children. Needs root, as the suite has. `wrap` starts a command inside it.
 */
export async function memoryCgroup(limitBytes: number): Promise<{ dir: string; wrap: string[]; oomKills: () => Promise<number>; remove: () => Promise<void> }> {
  const lines = (await fs.readFile('/proc/self/cgroup', 'utf8')).split('\n');
  const name = `lakehouse-test-${randomBytes(4).toString('hex')}`;
  const v1 = lines.find((l) => l.split(':')[1]?.split(',').includes('memory'));
  let dir: string;
  let limitFile: string;
  let eventsFile: string;
  if (v1 && (await exists('/sys/fs/cgroup/memory'))) {
    dir = `/sys/fs/cgroup/memory${v1.split(':')[2].replace(/\/$/, '')}/${name}`;
    limitFile = 'memory.limit_in_bytes';
    eventsFile = 'memory.oom_control';
  } else {
    const v2 = lines.find((l) => l.startsWith('0::'));
    const parent = `/sys/fs/cgroup${v2?.slice(3).replace(/\/$/, '') ?? ''}`;
    if (!(await fs.readFile(`${parent}/cgroup.subtree_control`, 'utf8').catch(() => '')).includes('memory')) {
      throw new Error(`no memory cgroup to create: neither a v1 memory hierarchy nor the v2 memory controller enabled under ${parent}`);
    }
    dir = `${parent}/${name}`;
    limitFile = 'memory.max';
    eventsFile = 'memory.events';
  }
  await fs.mkdir(dir);
  await fs.writeFile(`${dir}/${limitFile}`, String(limitBytes));
  return {
    dir,
    // The shell enters the cgroup, then becomes the command: the service and its children are inside.
    wrap: ['/bin/sh', '-c', 'echo $$ > "$0" && exec "$@"', `${dir}/cgroup.procs`],
    oomKills: async () => Number(/oom_kill (\d+)/.exec(await fs.readFile(`${dir}/${eventsFile}`, 'utf8'))?.[1] ?? 0),
    // The processes left inside are the test's own (a service killed with SIGKILL leaves its query
    // workers to exit on their own): ended, then the group goes.
    remove: async () => {
      for (let i = 0; i < 100; i++) {
        const pids = (await fs.readFile(`${dir}/cgroup.procs`, 'utf8').catch(() => '')).split('\n').filter(Boolean).map(Number);
        for (const pid of pids) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            /* gone already */
          }
        }
        try {
          // Child cgroups first (the service's query workers have their own, left behind by a service
          // killed with SIGKILL until its workers leave them).
          for (const e of await fs.readdir(dir, { withFileTypes: true }).catch(() => [])) if (e.isDirectory()) await fs.rmdir(`${dir}/${e.name}`).catch(() => undefined);
          await fs.rmdir(dir);
          return;
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'EBUSY') throw err;
          await sleep(100);
        }
      }
      throw new Error(`could not remove the test cgroup ${dir}`);
    },
  };
}

const exists = (p: string) =>
  fs.stat(p).then(
    () => true,
    () => false,
  );
