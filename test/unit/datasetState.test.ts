import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DatasetMeta, Schema } from '../../src/storage/codec.ts';
import { FlushState, Lifecycle, Running, SchemaState, type SchemaReadBack } from '../../src/storage/dataset/datasetState.ts';
import { unionSchemas } from '../../src/storage/dataset/schema.ts';

// The state objects of a dataset (storage/dataset/datasetState.ts), each driven through its transitions in
// process with a clock the test moves: the flush backoff, the schema's memory-follows-disk rule, and
// the lifecycle. A last test keeps the rule that only these objects change a Dataset's state.

/** A clock the test sets. */
function clock(start = 1_000): { now: () => number; set: (t: number) => void } {
  let t = start;
  return { now: () => t, set: (v) => (t = v) };
}

type FlushStep = { at: number; op: 'appended' | 'sealed' | 'succeeded' | 'retryNow' } | { at: number; op: 'failed'; baseMs: number };

/** The backoff as the flush has always computed it: base doubled per failure, at most 2^6, capped at 30 s. */
const backoff = (baseMs: number, failures: number) => Math.min(30_000, baseMs * 2 ** Math.min(failures, 6));

describe('FlushState', () => {
  const cases: { name: string; steps: FlushStep[]; oldest: number | undefined; failures: number }[] = [
    { name: 'an append starts the wait', steps: [{ at: 5, op: 'appended' }], oldest: 5, failures: 0 },
    { name: 'a later append keeps the oldest', steps: [{ at: 5, op: 'appended' }, { at: 9, op: 'appended' }], oldest: 5, failures: 0 },
    { name: 'sealing hands the wait to the flush', steps: [{ at: 5, op: 'appended' }, { at: 6, op: 'sealed' }], oldest: undefined, failures: 0 },
    {
      name: 'a failed flush puts its rows back as waiting',
      steps: [{ at: 5, op: 'appended' }, { at: 6, op: 'sealed' }, { at: 7, op: 'failed', baseMs: 500 }],
      oldest: 7,
      failures: 1,
    },
    {
      name: 'a failure keeps an append made during the flush as the oldest',
      steps: [{ at: 6, op: 'sealed' }, { at: 6, op: 'appended' }, { at: 8, op: 'failed', baseMs: 500 }],
      oldest: 6,
      failures: 1,
    },
    {
      name: 'failures count until a success',
      steps: [{ at: 1, op: 'failed', baseMs: 100 }, { at: 2, op: 'failed', baseMs: 100 }, { at: 3, op: 'failed', baseMs: 100 }],
      oldest: 1,
      failures: 3,
    },
    { name: 'a success ends the backoff', steps: [{ at: 1, op: 'failed', baseMs: 100 }, { at: 2, op: 'sealed' }, { at: 3, op: 'succeeded' }], oldest: undefined, failures: 0 },
    { name: 'retry-now keeps the count', steps: [{ at: 1, op: 'failed', baseMs: 100 }, { at: 2, op: 'retryNow' }], oldest: 1, failures: 1 },
  ];
  it.each(cases)('$name', ({ steps, oldest, failures }) => {
    const c = clock(0);
    const state = new FlushState(c.now);
    let retryAt = 0;
    let count = 0;
    for (const step of steps) {
      c.set(step.at);
      if (step.op === 'failed') {
        count++;
        expect(state.failed(step.baseMs)).toBe(backoff(step.baseMs, count));
        retryAt = step.at + backoff(step.baseMs, count);
      } else {
        state[step.op]();
        if (step.op !== 'appended' && step.op !== 'sealed') retryAt = 0;
        if (step.op === 'succeeded') count = 0;
      }
    }
    expect(state.oldestUnflushedAt).toBe(oldest);
    expect(state.failures).toBe(failures);
    expect(state.retryAt).toBe(retryAt);
  });

  it.each([1, 2, 6, 7, 12])('the wait after %i failures is capped (base 500 ms)', (n) => {
    const state = new FlushState(() => 0);
    let wait = 0;
    for (let i = 0; i < n; i++) wait = state.failed(500);
    expect(wait).toBe(Math.min(30_000, 500 * 2 ** Math.min(n, 6)));
    expect(state.retryAt).toBe(wait);
  });

  it('may start only when no flush runs and no backoff holds it', async () => {
    const c = clock(0);
    const state = new FlushState(c.now);
    expect(state.mayStart()).toBe(true);
    const wait = state.failed(100);
    expect(state.mayStart()).toBe(false);
    c.set(wait);
    expect(state.mayStart()).toBe(true);
    let finish!: () => void;
    const run = state.run.track(new Promise<void>((r) => (finish = r)));
    expect(state.running).toBe(run);
    expect(state.mayStart()).toBe(false);
    finish();
    await run;
    expect(state.running).toBeUndefined();
    expect(state.mayStart()).toBe(true);
  });

  it.each([
    { appendedAt: undefined, now: 10_000, interval: 1_000, overdue: false },
    { appendedAt: 0, now: 999, interval: 1_000, overdue: false },
    { appendedAt: 0, now: 1_000, interval: 1_000, overdue: true },
  ])('overdue: appended at $appendedAt, now $now, interval $interval → $overdue', ({ appendedAt, now, interval, overdue }) => {
    const c = clock(appendedAt ?? 0);
    const state = new FlushState(c.now);
    if (appendedAt !== undefined) state.appended();
    c.set(now);
    expect(state.overdue(interval)).toBe(overdue);
  });
});

describe('Running', () => {
  it('forgets work once it settles, failed or not, and passes its outcome on', async () => {
    const running = new Running();
    const failing = running.track(Promise.reject(new Error('boom')));
    expect(running.current).toBe(failing);
    await expect(failing).rejects.toThrow('boom');
    expect(running.current).toBeUndefined();
  });

  it('a newer run is not cleared by an older one settling', async () => {
    const running = new Running();
    let finishOld!: () => void;
    const old = running.track(new Promise<void>((r) => (finishOld = r)));
    const newer = running.track(new Promise<void>(() => undefined));
    finishOld();
    await old;
    expect(running.current).toBe(newer);
  });
});

describe('SchemaState', () => {
  const a: Schema = { a: 'VARCHAR' };
  const b: Schema = { b: 'BIGINT' };
  const c: Schema = { c: 'DOUBLE' };
  const cases: { name: string; before?: Schema; read: SchemaReadBack; own: Schema; dirty: boolean }[] = [
    { name: 'nothing stored', read: { stored: [] }, own: {}, dirty: false },
    { name: 'a local copy the store also has', read: { local: a, ownStored: a, stored: [a] }, own: a, dirty: true },
    { name: "others' schemas join the union only", read: { stored: [b, c] }, own: {}, dirty: false },
    { name: 'a damaged own object is rewritten at the next flush', read: { ownDamaged: true, stored: [b] }, own: {}, dirty: true },
    { name: 'a local copy equal to memory is not new', before: a, read: { local: a, stored: [] }, own: a, dirty: false },
    { name: 'a local copy with a new column is', before: a, read: { local: unionSchemas([a, b]), stored: [] }, own: unionSchemas([a, b]), dirty: true },
  ];
  it.each(cases)('refresh: $name', async ({ before, read, own, dirty }) => {
    const state = new SchemaState();
    if (before) {
      await state.evolve(before, async () => undefined);
      state.takeDirty();
    }
    state.refreshed(read);
    expect(state.own).toEqual(own);
    expect(state.dirty).toBe(dirty);
    // What queries see: every schema read, and everything before.
    expect(state.schema).toEqual(unionSchemas([before ?? {}, read.local ?? {}, read.ownStored ?? {}, ...read.stored]));
  });

  it('evolve persists the union first and memory follows; a failed persist changes nothing', async () => {
    const state = new SchemaState();
    const persisted: Schema[] = [];
    await state.evolve(a, async (own) => void persisted.push({ ...own }));
    await expect(state.evolve(b, () => Promise.reject(new Error('disk full')))).rejects.toThrow('disk full');
    expect(state.schema).toEqual(a);
    expect(state.own).toEqual(a);
    await state.evolve(b, async (own) => void persisted.push({ ...own }));
    await state.evolve(a, async () => expect.unreachable('nothing new to persist'));
    expect(persisted).toEqual([a, unionSchemas([a, b])]);
    expect(state.own).toEqual(unionSchemas([a, b]));
  });

  it('concurrent changes are serialised and none is lost', async () => {
    const state = new SchemaState();
    const order: string[] = [];
    let release!: () => void;
    const slow = state.evolve(a, async (own) => {
      await new Promise<void>((r) => (release = r));
      order.push(Object.keys(own).join());
    });
    const fast = state.evolve(b, async (own) => void order.push(Object.keys(own).sort().join()));
    await expect.poll(() => release).toBeTypeOf('function');
    release();
    await Promise.all([slow, fast]);
    expect(order).toEqual(['a', 'a,b']);
    expect(state.schema).toEqual(unionSchemas([a, b]));
  });

  it('the dirty mark: taken by a flush, put back when its upload fails', async () => {
    const state = new SchemaState();
    expect(state.takeDirty()).toBeUndefined();
    await state.evolve(a, async () => undefined);
    expect(state.takeDirty()).toEqual(a);
    expect(state.takeDirty()).toBeUndefined();
    state.uploadFailed();
    expect(state.takeDirty()).toEqual(a);
  });
});

describe('Lifecycle', () => {
  const meta = { name: 'app', generation: 'g1', timeColumn: 'p_timestamp' } as DatasetMeta;
  it.each([
    { name: 'retention of the same generation', next: { ...meta, retention: [] }, ok: true },
    { name: 'another generation', next: { ...meta, generation: 'g2' }, ok: false },
    { name: 'another dataset', next: { ...meta, name: 'other' }, ok: false },
  ])('updated with $name', ({ next, ok }) => {
    const life = new Lifecycle(meta, () => 42);
    if (ok) {
      life.updated(next as DatasetMeta);
      expect(life.meta).toBe(next);
    } else {
      expect(() => life.updated(next as DatasetMeta)).toThrow(/given to app\/g1/);
      expect(life.meta).toBe(meta);
    }
    expect(life.loadedAt).toBe(42);
  });

  it('loaded, then deleted for good', () => {
    const life = new Lifecycle(meta);
    expect(life.deleted).toBe(false);
    life.markDeleted();
    life.markDeleted();
    expect(life.deleted).toBe(true);
  });
});

describe('state with an owner', () => {
  // Dataset's state changes only through its state objects: no module assigns a dataset's fields.
  // (Its getters make most such assignments a type error already; this also catches the rest.)
  it('no module under src/ assigns a field of a dataset', async () => {
    const src = path.resolve(__dirname, '../../src');
    const offenders: string[] = [];
    for (const file of await fs.readdir(src, { recursive: true })) {
      if (!file.endsWith('.ts')) continue;
      const text = await fs.readFile(path.join(src, file), 'utf8');
      for (const [i, line] of text.split('\n').entries()) {
        if (/\b(ds|dataset)\.[A-Za-z_]+(\s*(=|\?\?=|\+=|-=)(?!=)|\+\+|--)/.test(line)) offenders.push(`${file}:${i + 1}: ${line.trim()}`);
      }
    }
    expect(offenders).toEqual([]);
  });
});
