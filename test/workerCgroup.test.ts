import { spawn } from 'node:child_process';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { query, startServer, type TestServer } from './helpers/server.ts';
import { waitFor } from './helpers/wait.ts';

const HEAVY = "SELECT len(string_split(repeat('abcdefghijklmnopqrstuvwxyz0123456789,', 20000000), ',')) AS n";
const ALL_TIME = { startTime: '1970-01-01T00:00:00Z', endTime: '2100-01-01T00:00:00Z' };

/** The worker cgroups of a service, from its start log: `<parent>/lakehouse-query-<pid>-w<n>`. */
function cgroupsOf(server: TestServer): { parent: string; prefix: string; list: () => Promise<string[]> } {
  const m = /"msg":"query worker memory cap".*"by":"cgroup","detail":"cgroup v[12], one per worker: ([^"]+)<n>"/.exec(server.logs());
  if (!m) throw new Error(`the service does not use worker cgroups:\n${server.logs()}`);
  const parent = path.dirname(m[1]);
  const prefix = path.basename(m[1]);
  return {
    parent,
    prefix,
    list: async () => (await fs.readdir(parent)).filter((n) => n.startsWith(prefix)).map((n) => path.join(parent, n)),
  };
}

const read = (file: string) => fs.readFile(file, 'utf8').then((t) => t.trim(), () => undefined);
const limitOf = async (dir: string) => (await read(`${dir}/memory.limit_in_bytes`)) ?? (await read(`${dir}/memory.max`));

/**
 * As root (the suite's case), every query worker runs in a memory cgroup of its own capped at
 * P_QUERY_WORKER_MAX_MEMORY: the kernel stops the query of issue 18 (3) whatever its speed, the client
 * gets 413, and the cgroups go with their workers, and with the service (also after a SIGKILL).
 */
describe('query workers in memory cgroups', () => {
  const servers: TestServer[] = [];
  afterAll(async () => {
    for (const s of servers) await s.kill();
  });

  it('the heavy query is stopped by its worker\'s cgroup: 413, the service keeps answering, the cgroup goes with the worker', async () => {
    const server = await startServer({ env: { P_QUERY_WORKER_MAX_MEMORY: '256MiB' } });
    servers.push(server);
    const cgroups = cgroupsOf(server);
    // The warm worker is in its cgroup, capped at 256 MiB, with no swap beyond it.
    const [first] = await waitFor('a worker cgroup with its worker inside', async () => {
      const dirs = await cgroups.list();
      return dirs.length && (await read(`${dirs[0]}/cgroup.procs`)) ? dirs : undefined;
    });
    expect(await limitOf(first)).toBe(String(256 * 1024 * 1024));
    const memsw = await read(`${first}/memory.memsw.limit_in_bytes`);
    if (memsw !== undefined) expect(memsw).toBe(String(256 * 1024 * 1024));
    const worker = Number((await read(`${first}/cgroup.procs`))!.split('\n')[0]);

    const answer = server.request('/api/v1/query', { method: 'POST', json: { query: HEAVY, ...ALL_TIME } });
    // While the query runs, its worker is in that cgroup, which counts its memory.
    await waitFor('the query worker growing inside its cgroup', async () => {
      const usage = Number((await read(`${first}/memory.max_usage_in_bytes`)) ?? (await read(`${first}/memory.peak`)) ?? 0);
      return (await read(`${first}/cgroup.procs`))?.split('\n').includes(String(worker)) && usage > 128 * 1024 * 1024;
    }, 60_000);
    const res = await answer;
    expect(res.status).toBe(413);
    expect(await res.text()).toMatch(/more memory than a query may use \(256 MiB, P_QUERY_WORKER_MAX_MEMORY\)/);
    expect(server.logs()).toContain('query worker over its memory cap; killed by the kernel in its memory cgroup');
    // The RSS watchdog did not do it: a worker with a cgroup is left to the kernel.
    expect(server.logs()).not.toContain('query worker over its memory cap; killed"');

    expect((await server.request('/api/v1/liveness')).status).toBe(200);
    expect(await query(server, 'SELECT 1 AS one')).toEqual([{ one: 1 }]);
    // The killed worker's cgroup is removed; its replacement has one of its own.
    await waitFor('the killed worker\'s cgroup removed', async () => !(await cgroups.list()).includes(first));
    expect((await cgroups.list()).length).toBeGreaterThanOrEqual(1);
    await server.stop();
    expect(await cgroups.list()).toEqual([]);
  }, 180_000);

  it('a service killed with SIGKILL: its workers leave and remove their cgroups; a next start removes any a dead service left', async () => {
    const first = await startServer();
    servers.push(first);
    const cgroups = cgroupsOf(first);
    expect(await query(first, 'SELECT 42 AS n')).toEqual([{ n: 42 }]);
    expect((await cgroups.list()).length).toBeGreaterThanOrEqual(1);
    await first.kill();
    // Its workers exit when their channel to the dead service closes, out of their cgroups, removing them.
    await waitFor('the dead service\'s worker cgroups removed by its workers', async () => (await cgroups.list()).length === 0, 60_000);

    // A worker cgroup of a service that died before its workers could leave (a pid no longer running).
    const gone = spawn('true');
    await new Promise((r) => gone.once('exit', r));
    const stale = path.join(cgroups.parent, `lakehouse-query-${gone.pid}-w1`);
    await fs.mkdir(stale);
    const second = await startServer();
    servers.push(second);
    // Gone once the next service has started. Which service removed it is not asserted: every service
    // sweeps the shared parent when it starts, and other test files start services at the same time.
    expect(await fs.stat(stale).then(() => true, () => false)).toBe(false);
    expect(await query(second, 'SELECT 1 AS one')).toEqual([{ one: 1 }]);
    await second.stop();
  }, 180_000);

  it('P_QUERY_WORKER_CGROUP=off: the RSS watchdog, said at start', async () => {
    const server = await startServer({ env: { P_QUERY_WORKER_CGROUP: 'off' } });
    servers.push(server);
    expect(server.logs()).toMatch(/"msg":"query worker memory cap".*"by":"RSS watchdog","detail":"P_QUERY_WORKER_CGROUP=off"/);
    await server.stop();
  }, 60_000);
});
