import * as os from 'node:os';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DomainError } from '../../src/errors.ts';
import { QueryPool } from '../../src/query/worker/pool.ts';

/*
 * Work the service answers itself (the PromQL label index) runs under the same admission as a worker
 * job: it counts against the key's and the service's limits while it runs, and is refused past them
 * as a worker job is. No worker process is started: only `admitted` is called.
 */
const pool = (perKey: number, concurrency: number) =>
  new QueryPool({ workDir: path.join(os.tmpdir(), `pool-admitted-${process.pid}`), concurrency, perKey, queue: 0, queueWaitMs: 50, threads: 1, memoryLimit: '64MB', heapMb: 64, warm: 0 });

/** A work item that runs until `finish()` is called. */
function held() {
  let finish = () => {};
  const done = new Promise<string>((resolve) => (finish = () => resolve('done')));
  return { work: () => done, finish: () => finish() };
}

const kindOf = (p: Promise<unknown>) => p.then(() => 'ok', (e: unknown) => (e instanceof DomainError ? e.kind : String(e)));

describe('QueryPool.admitted', () => {
  it.each([
    // [per key, total, keys of the running items, key asking, expected kind]
    [1, 4, ['a'], 'a', 'unavailable'],
    [1, 4, ['a'], 'b', 'ok'],
    [2, 4, ['a'], 'a', 'ok'],
    [2, 2, ['a', 'b'], 'c', 'unavailable'],
    [4, 4, [], 'a', 'ok'],
  ] as const)('per key %i, total %i, running %j: a call of %s → %s', async (perKey, total, running, key, expected) => {
    const p = pool(perKey, total);
    const items = running.map(() => held());
    const runs = running.map((k, i) => p.admitted(k, items[i].work));
    await expect(kindOf(p.admitted(key, async () => 'x'))).resolves.toBe(expected);
    for (const it of items) it.finish();
    await expect(Promise.all(runs)).resolves.toEqual(running.map(() => 'done'));
  });

  it('gives the admission back when the work ends or fails', async () => {
    const p = pool(1, 1);
    await expect(p.admitted('a', async () => 1)).resolves.toBe(1);
    await expect(p.admitted('a', async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    await expect(p.admitted('a', async () => 2)).resolves.toBe(2);
  });
});
