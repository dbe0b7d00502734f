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

  it.each<[string, Uint8Array, string | undefined, number | undefined]>([
    ['identity: its own length', Buffer.from('x'.repeat(123)), undefined, 123],
    ['gzip: the trailer', gzipSync(Buffer.alloc(70_000)), 'gzip', 70_000],
    ['snappy: the length header', snappy.compressSync(Buffer.alloc(70_000)), 'snappy', 70_000],
    ['not gzip at all', Buffer.from('not gzip, but long enough'), 'gzip', undefined],
  ])('the decoded size a body declares, %s', (_, body, encoding, size) => {
    expect(declaredDecodedSize(body, encoding)).toBe(size);
  });
});
