import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { bloomMayHold, buildTraceBloom } from '../../src/storage/traceIndex.ts';

const ids = (n: number) => Array.from({ length: n }, () => randomBytes(16).toString('hex'));

describe('trace-id Bloom filter', () => {
  it.each([1, 10, 1000, 20_000])('never misses an id it holds (%i ids)', (n) => {
    const held = ids(n);
    const bloom = buildTraceBloom(held);
    expect(held.filter((id) => !bloomMayHold(bloom, [id]))).toEqual([]);
    // Case does not matter: ids are compared as lower-case hex.
    expect(bloomMayHold(bloom, [held[0].toUpperCase()])).toBe(true);
  });

  it('rarely answers "maybe" for an id it does not hold (~1% at 10 bits per id)', () => {
    const bloom = buildTraceBloom(ids(20_000));
    const others = ids(20_000);
    const falsePositives = others.filter((id) => bloomMayHold(bloom, [id])).length;
    expect(falsePositives / others.length).toBeLessThan(0.03);
  });

  it('any of several ids', () => {
    const held = ids(100);
    const bloom = buildTraceBloom(held);
    expect(bloomMayHold(bloom, [...ids(3), held[50]])).toBe(true);
  });
});
