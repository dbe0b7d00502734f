import { describe, expect, it } from 'vitest';
import { isDomainError } from '../../src/errors.ts';
import { declaredDecodedSize } from '../../src/ingest/compression.ts';
import { fits, InflightBudget, type InflightLease } from '../../src/ingest/inflight.ts';
import { gzipSync } from 'node:zlib';
import snappy from 'snappy';

describe('in-flight byte budget', () => {
  it.each([
    // others in flight, this request's bytes, limit, admitted
    [0, 10, 100, true],
    [90, 10, 100, true],
    [91, 10, 100, false],
    [0, 500, 100, true], // larger than the whole budget: runs alone
    [1, 500, 100, false],
    [0, 0, 100, true],
  ])('fits(%i in flight, %i more, limit %i) = %s', (others, bytes, limit, admitted) => {
    expect(fits(others, bytes, limit)).toBe(admitted);
  });

  // Each step acts on the budget (limit 100, no waiting: a request that does not fit is refused) and
  // states the bytes in use afterwards; `refused` marks a step that must fail with `unavailable`.
  type Step = { op: 'acquire'; lease: string; bytes: number; refused?: true } | { op: 'resize'; lease: string; bytes: number; refused?: true } | { op: 'release'; lease: string };
  it.each<[string, Step[], number[]]>([
    ['requests within the limit are admitted', [{ op: 'acquire', lease: 'a', bytes: 60 }, { op: 'acquire', lease: 'b', bytes: 40 }], [60, 100]],
    ['one over the limit is refused, and admitted once room is given back', [{ op: 'acquire', lease: 'a', bytes: 60 }, { op: 'acquire', lease: 'b', bytes: 50, refused: true }, { op: 'release', lease: 'a' }, { op: 'acquire', lease: 'b', bytes: 50 }], [60, 60, 0, 50]],
    ['a body larger than the budget runs alone', [{ op: 'acquire', lease: 'a', bytes: 250 }, { op: 'acquire', lease: 'b', bytes: 1, refused: true }, { op: 'release', lease: 'a' }], [250, 250, 0]],
    ['shrinking to the body read gives the rest back', [{ op: 'acquire', lease: 'a', bytes: 100 }, { op: 'resize', lease: 'a', bytes: 30 }, { op: 'acquire', lease: 'b', bytes: 70 }], [100, 30, 100]],
    ['growing for decoding counts only the difference; alone it may pass the limit', [{ op: 'acquire', lease: 'a', bytes: 30 }, { op: 'resize', lease: 'a', bytes: 300 }, { op: 'release', lease: 'a' }], [30, 300, 0]],
    ['growing that does not fit is refused and keeps what it held', [{ op: 'acquire', lease: 'a', bytes: 30 }, { op: 'acquire', lease: 'b', bytes: 50 }, { op: 'resize', lease: 'a', bytes: 60, refused: true }, { op: 'release', lease: 'a' }], [30, 80, 80, 50]],
    ['releasing twice gives back once', [{ op: 'acquire', lease: 'a', bytes: 30 }, { op: 'acquire', lease: 'b', bytes: 30 }, { op: 'release', lease: 'a' }, { op: 'release', lease: 'a' }], [30, 60, 30, 30]],
  ])('%s', async (_, steps, inUse) => {
    const budget = new InflightBudget(100, 0);
    const leases = new Map<string, InflightLease>();
    const seen: number[] = [];
    for (const step of steps) {
      const run = async () => {
        if (step.op === 'acquire') leases.set(step.lease, await budget.acquire(step.bytes));
        else if (step.op === 'resize') await leases.get(step.lease)!.resize(step.bytes);
        else leases.get(step.lease)!.release();
      };
      if ('refused' in step && step.refused) {
        const err = await run().then(() => undefined, (e: unknown) => e);
        expect(isDomainError(err) && err.kind === 'unavailable' && err.retryAfterSec).toBeGreaterThan(0);
      } else await run();
      seen.push(budget.inUse);
    }
    expect(seen).toEqual(inUse);
  });

  it('waiting requests are let in in arrival order as room is given back, a growing one first', async () => {
    const budget = new InflightBudget(100, 60_000);
    const a = await budget.acquire(80);
    const order: string[] = [];
    const b = budget.acquire(50).then((l) => (order.push('b'), l));
    const c = budget.acquire(10).then((l) => (order.push('c'), l)); // fits, but must not overtake b
    // a holds memory only its own completion frees: it grows past the requests waiting before it.
    await a.resize(90).then(() => order.push('a grows'));
    expect(budget.queued).toBe(2);
    a.release();
    const [lb, lc] = await Promise.all([b, c]);
    expect(order).toEqual(['a grows', 'b', 'c']);
    expect(budget.inUse).toBe(60);
    lb.release();
    lc.release();
    expect(budget.inUse).toBe(0);
  });

  // Per-key shares (limit 100, share 0.5, no waiting): each step names its key; `refused` is the error
  // kind it must fail with. States the bytes each key holds afterwards.
  type KeyStep = { key: string; lease: string; bytes: number; refused?: 'too_many_requests' | 'unavailable' } | { release: string };
  it.each<[string, KeyStep[], Record<string, number>]>([
    ['alone, a key may use the whole budget', [{ key: 'a', lease: 'a1', bytes: 60 }, { key: 'a', lease: 'a2', bytes: 40 }], { a: 100 }],
    ['while another key holds bytes, a key may not grow past its share', [{ key: 'b', lease: 'b1', bytes: 10 }, { key: 'a', lease: 'a1', bytes: 50 }, { key: 'a', lease: 'a2', bytes: 1, refused: 'too_many_requests' }], { a: 50, b: 10 }],
    ['a key over its share (taken while alone) leaves the rest to the others', [{ key: 'a', lease: 'a1', bytes: 70 }, { key: 'b', lease: 'b1', bytes: 30 }, { key: 'a', lease: 'a2', bytes: 1, refused: 'too_many_requests' }], { a: 70, b: 30 }],
    ['the other key leaving lifts the bound', [{ key: 'b', lease: 'b1', bytes: 10 }, { key: 'a', lease: 'a1', bytes: 50 }, { release: 'b1' }, { key: 'a', lease: 'a2', bytes: 40 }], { a: 90 }],
    ['within its share, a full budget is still "unavailable"', [{ key: 'a', lease: 'a1', bytes: 60 }, { key: 'b', lease: 'b1', bytes: 30 }, { key: 'b', lease: 'b2', bytes: 15, refused: 'unavailable' }], { a: 60, b: 30 }],
  ])('%s', async (_, steps, held) => {
    const budget = new InflightBudget(100, 0, 0.5);
    const leases = new Map<string, { key: string; lease: InflightLease }>();
    for (const step of steps) {
      if ('release' in step) {
        leases.get(step.release)!.lease.release();
        leases.delete(step.release);
        continue;
      }
      const got = await budget.acquire(step.bytes, step.key).then((lease) => lease, (e: unknown) => e);
      if (step.refused) {
        expect(isDomainError(got) && got.kind, step.lease).toBe(step.refused);
      } else {
        expect(isDomainError(got), step.lease).toBe(false);
        leases.set(step.lease, { key: step.key, lease: got as InflightLease });
      }
    }
    const byKey: Record<string, number> = {};
    for (const { key, lease } of leases.values()) byKey[key] = (byKey[key] ?? 0) + lease.bytes;
    expect(byKey).toEqual(held);
  });

  it('a request of another key passes a waiting one whose key has its share', async () => {
    const budget = new InflightBudget(100, 60_000, 0.5);
    const a1 = await budget.acquire(50, 'a');
    const b1 = await budget.acquire(40, 'b');
    // a is at its share while b holds bytes: a2 waits.
    const a2 = budget.acquire(20, 'a');
    expect(budget.queued).toBe(1);
    // b2 fits the budget and b's share: it is not held up behind a2.
    const b2 = await budget.acquire(10, 'b');
    expect(budget.queued).toBe(1);
    a1.release();
    // a is within its share again: a2 is let in.
    const la2 = await a2;
    expect(budget.inUse).toBe(70);
    for (const l of [la2, b1, b2]) l.release();
    expect(budget.inUse).toBe(0);
  });

  it.each<[string, Uint8Array, string | undefined, number | undefined]>([
    ['identity: its own length', Buffer.from('x'.repeat(123)), undefined, 123],
    ['gzip: the trailer', gzipSync(Buffer.alloc(70_000)), 'gzip', 70_000],
    ['snappy: the length header', snappy.compressSync(Buffer.alloc(70_000)), 'snappy', 70_000],
    ['not gzip at all', Buffer.from('not gzip, but long enough'), 'gzip', undefined],
  ])('the decoded size a body declares, %s', (_, body, encoding, size) => {
    expect(declaredDecodedSize(body, encoding)).toBe(size);
  });
});
