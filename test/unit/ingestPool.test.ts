import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { IngestPool, INLINE_BELOW_BYTES, pickWorker, type WorkerState } from '../../src/ingest/worker/ingestPool.ts';
import { runJob } from '../../src/ingest/worker/ingestWorker.ts';
import type { IngestJob, PlacementTarget } from '../../src/ingest/worker/pipeline.ts';
import { emptySchema } from '../../src/storage/dataset/schema.ts';

const ready = (busy: number): WorkerState => ({ ready: true, busy });
const starting: WorkerState = { ready: false, busy: 0 };

describe('pickWorker: where a body goes, and whether one more thread starts', () => {
  const cases: [string, WorkerState[], number, { use: number | 'inline'; spawn: boolean }][] = [
    ['no thread yet: on the event loop, and one starts', [], 2, { use: 'inline', spawn: true }],
    ['P_INGEST_WORKERS=0: always on the event loop', [], 0, { use: 'inline', spawn: false }],
    ['one starting: on the event loop (no wait for its module load), no second start at once', [starting], 2, { use: 'inline', spawn: false }],
    ['one ready and free: it, no start', [ready(0)], 2, { use: 0, spawn: false }],
    ['one ready and busy: it (queued), and a second starts', [ready(1)], 2, { use: 0, spawn: true }],
    ['one ready and busy at the limit: it, no start', [ready(3)], 1, { use: 0, spawn: false }],
    ['one busy, one starting: the busy one, no further start', [ready(2), starting], 4, { use: 0, spawn: false }],
    ['the least busy ready one', [ready(2), ready(1), ready(3)], 3, { use: 1, spawn: false }],
    ['a free one among busy ones: it, no start', [ready(2), ready(0)], 4, { use: 1, spawn: false }],
    ['all busy under the limit: the least busy, and one more starts', [ready(2), ready(1)], 4, { use: 1, spawn: true }],
  ];
  it.each(cases)('%s', (_name, workers, size, expected) => {
    expect(pickWorker(workers, size)).toEqual(expected);
  });
});

/** A JSON job of `events` events, large enough to be handed to a thread. */
function jsonJob(events: number, tag: string): IngestJob {
  const text = JSON.stringify(Array.from({ length: events }, (_, i) => ({ tag, i, message: `event ${i} of ${tag}` })));
  const body = new Uint8Array(Buffer.from(text));
  expect(body.byteLength).toBeGreaterThanOrEqual(INLINE_BELOW_BYTES);
  return {
    kind: 'json',
    body,
    maxDecompressedBytes: 1 << 26,
    limits: { maxEvents: 100_000, maxValues: 4_000_000, maxNames: 1000 },
    maxDepth: 10,
    stamp: { received: '2026-11-26T00:00:00.000Z', meta: null, tags: null, srcIp: '127.0.0.1', userAgent: 'test', fields: [] },
  };
}
const target: PlacementTarget = { schema: emptySchema(), maxColumns: 100 };

/** The young generation Node gives a thread started without resource limits. */
async function bareThreadYoungMb(): Promise<number | undefined> {
  const w = new Worker('setInterval(() => {}, 1000)', { eval: true });
  await new Promise((r) => w.once('online', r));
  const mb = w.resourceLimits?.maxYoungGenerationSizeMb;
  await w.terminate();
  return mb;
}

async function until(what: string, cond: () => boolean): Promise<void> {
  for (const deadline = Date.now() + 30_000; !cond(); ) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('IngestPool: threads start on demand and stop after a quiet period', () => {
  let pool: IngestPool | undefined;
  afterEach(async () => pool?.close());

  it('holds no thread until a body needs one, stops it when idle, and serialises exactly the same either way', async () => {
    pool = new IngestPool(2, 300);
    expect(pool.threads).toBe(0);
    // Small bodies never start a thread.
    const small = await pool.serialize({ ...jsonJob(200, 'x'), body: new Uint8Array(Buffer.from('[{"a":1}]')) }, target);
    expect(small.rows).toBe(1);
    expect(pool.threads).toBe(0);

    const expected = (tag: string) => {
      const r = runJob(0, jsonJob(500, tag), target);
      if (!r.ok) throw new Error(r.message);
      return Buffer.from(r.lines).toString();
    };
    const first = await pool.serialize(jsonJob(500, 'a'), target);
    expect(Buffer.from(first.lines).toString()).toBe(expected('a'));
    expect(pool.threads).toBe(1);
    // Answered on the event loop while the thread starts, then by the thread; then it is let go.
    await until('the thread to be ready', () => pool!.readyThreads === 1);
    for (let i = 0; i < 20; i++) {
      const r = await pool.serialize(jsonJob(500, `b${i}`), target);
      expect(r.rows).toBe(500);
      expect(Buffer.from(r.lines).toString()).toBe(expected(`b${i}`));
    }
    await until('the idle thread to stop', () => pool!.threads === 0);
    // After the quiet period, the next body is served again (a new thread starts).
    const again = await pool.serialize(jsonJob(500, 'c'), target);
    expect(Buffer.from(again.lines).toString()).toBe(expected('c'));
    expect(pool.threads).toBe(1);
    await until('the idle thread to stop again', () => pool!.threads === 0);
  });

  it('stops a thread exactly when its quiet period is over by the pool clock, never while it has a job', async () => {
    let clock = 0;
    const idleMs = 5_000;
    pool = new IngestPool(2, idleMs, undefined, () => clock);
    await pool.serialize(jsonJob(500, 'a'), target);
    await until('the thread to be ready', () => pool!.readyThreads === 1);
    // A job on the thread: quiet from when it is answered, not from when it was posted.
    const pending = pool.serialize(jsonJob(500, 'b'), target);
    clock += idleMs * 2;
    expect(pool.retireIdle()).toBe(0);
    expect((await pending).rows).toBe(500);
    clock += idleMs - 1;
    expect(pool.retireIdle()).toBe(0);
    expect(pool.threads).toBe(1);
    clock += 1;
    expect(pool.retireIdle()).toBe(1);
    expect(pool.threads).toBe(0);
    // The next body starts one again.
    await pool.serialize(jsonJob(500, 'c'), target);
    expect(pool.threads).toBe(1);
    // `0`: kept however long it idles.
    const kept = new IngestPool(1, 0, undefined, () => clock);
    try {
      await kept.serialize(jsonJob(500, 'd'), target);
      await until('the kept thread to be ready', () => kept.readyThreads === 1);
      clock += 1e9;
      expect(kept.retireIdle()).toBe(0);
      expect(kept.threads).toBe(1);
    } finally {
      await kept.close();
    }
  });

  it('concurrent bodies bring up to `size` threads, never more', async () => {
    pool = new IngestPool(2, 0);
    let most = 0;
    const jobs = Array.from({ length: 40 }, (_, i) => jsonJob(2000, `p${i}`));
    await Promise.all(
      jobs.map(async (job) => {
        const r = await pool!.serialize(job, target);
        most = Math.max(most, pool!.threads);
        expect(r.rows).toBe(2000);
      }),
    );
    // Once a thread is ready, a wave of concurrent bodies finds it busy and starts the second.
    await until('a thread to be ready', () => pool!.readyThreads >= 1);
    for (let wave = 0; wave < 20 && pool.readyThreads < 2; wave++) {
      await Promise.all(Array.from({ length: 8 }, (_, i) => pool!.serialize(jsonJob(2000, `w${wave}-${i}`), target)));
      most = Math.max(most, pool.threads);
      // Let the starting thread's ready message in (a macrotask) before the next wave.
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(most).toBe(2);
    expect(pool.readyThreads).toBe(2);
  });

  it.each([
    // Unset: Node's default, which a memory cgroup shrinks (3 MiB at 512 MiB): whatever this process's own is.
    [undefined, undefined],
    [12, 12],
    [48, 48],
  ])('a thread gets the young generation it is given (%s MiB)', async (young, expected) => {
    pool = new IngestPool(1, 0, young);
    await pool.serialize(jsonJob(500, 'y'), target);
    await until('the thread to be ready', () => pool!.readyThreads === 1);
    const [limits] = pool.heapLimits();
    // Node reports the young generation it applied; unset, Node's own sizing: a bare thread's.
    expect(limits.maxYoungGenerationSizeMb).toBe(expected ?? (await bareThreadYoungMb()));
  });
});
