import { describe, expect, it } from 'vitest';
import { connectionCap } from '../../src/doors/shared/connections.ts';

describe('connectionCap', () => {
  const cases: [configured: number | undefined, fileLimit: number, cap: number][] = [
    [undefined, 1024, 512], // half the descriptors
    [undefined, 20_000, 8192], // at most 8,192
    [undefined, 1_048_576, 8192],
    [100, 1024, 100], // as configured
    [5000, 1024, 768], // never more than the limit less 256
    [5000, 100, 16], // a tiny limit still serves a few
  ];
  it.each(cases)('configured %s with %s open files → %s', (configured, fileLimit, cap) => {
    expect(connectionCap(configured, fileLimit)).toBe(cap);
  });
});
