import { describe, expect, it } from 'vitest';
import { Catalog, type FileEntry, type Manifest } from '../../src/storage/catalog.ts';

const file = (key: string, over: Partial<FileEntry> = {}): FileEntry => ({ key, rows: 10, bytes: 100, minMs: 0, maxMs: 1000, columns: ['a'], nodeId: 'n1', ...over });
const manifest = (seq: number, add: FileEntry[], remove: string[] = [], walSegments: number[] = []): Manifest => ({
  version: 1,
  generation: 'g',
  nodeId: 'n1',
  seq,
  createdAt: new Date(0).toISOString(),
  add,
  remove,
  walSegments,
  ingestedBytes: 0,
});

describe('Catalog: added minus removed, whatever the order manifests are read in', () => {
  const m1 = manifest(1, [file('f1'), file('f2')], [], [1, 2]);
  const m2 = manifest(2, [file('f3')], ['f1'], [3]);
  const m3 = manifest(3, [file('f4')], ['f3']);
  const orders: [string, Manifest[]][] = [
    ['in order', [m1, m2, m3]],
    ['reversed', [m3, m2, m1]],
    ['shuffled', [m2, m3, m1]],
  ];
  it.each(orders)('%s', (_name, list) => {
    const c = new Catalog();
    for (const m of list) c.apply(`k${m.seq}`, m);
    expect(c.all().map((f) => f.key).sort()).toEqual(['f2', 'f4']);
    expect(c.isSegmentFlushed('n1', 3)).toBe(true);
    expect(c.maxFlushedSegment('n1')).toBe(3);
  });
  it('applies a manifest once', () => {
    const c = new Catalog();
    expect(c.apply('k1', m1)).toBe(true);
    expect(c.apply('k1', m1)).toBe(false);
    expect(c.totals().rows).toBe(20);
  });
  it.each([
    [0, 500, ['early']],
    [1500, 2500, ['late']],
    [999, 2001, ['early', 'late']],
    [3000, 4000, []],
  ])('selects files overlapping [%i, %i)', (start, end, keys) => {
    const c = new Catalog();
    c.apply('k', manifest(1, [file('early', { minMs: 0, maxMs: 999 }), file('late', { minMs: 2000, maxMs: 2999 })]));
    expect(c.select(start, end).map((f) => f.key)).toEqual(keys);
  });
});
