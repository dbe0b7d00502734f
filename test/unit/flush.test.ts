import { describe, expect, it } from 'vitest';
import { segmentGroups } from '../../src/storage/flush.ts';

describe('a WAL backlog is flushed about P_FLUSH_BYTES at a time', () => {
  it.each<[string, number[], number, number[][]]>([
    ['nothing', [], 10, []],
    ['one segment', [4], 10, [[4]]],
    ['small segments share a group up to the limit', [4, 4, 2, 4], 10, [[4, 4, 2], [4]]],
    ['a segment over the limit is a group of its own', [3, 25, 3], 10, [[3], [25], [3]]],
    ['segments of exactly the limit', [10, 10], 10, [[10], [10]]],
  ])('%s', (_, sizes, limit, groups) => {
    const segments = sizes.map((bytes, seq) => ({ seq, bytes }));
    expect(segmentGroups(segments, limit).map((g) => g.map((s) => s.bytes))).toEqual(groups);
    // Order and membership are kept: every segment once, oldest first.
    expect(segmentGroups(segments, limit).flat().map((s) => s.seq)).toEqual(sizes.map((_, i) => i));
  });
});
