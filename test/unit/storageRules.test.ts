import { describe, expect, it } from 'vitest';
import { flattenEvent } from '../../src/ingest/flatten.ts';
import { Catalog, type FileEntry, type Manifest } from '../../src/storage/catalog.ts';
import { followInTime, planCompaction } from '../../src/storage/compaction.ts';

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

describe('planCompaction: own small files, per hour, in runs near the target', () => {
  const h = (hour: string, name: string, over: Partial<FileEntry> = {}) => file(`ds/date=2026-11-23/hour=${hour}/minute=00/${name}.parquet`, over);
  const cases: [string, FileEntry[], string[][]][] = [
    ['two small files of one hour merge', [h('01', 'a'), h('01', 'b')], [['a', 'b']]],
    ['one file alone is left', [h('01', 'a'), h('02', 'b')], []],
    ['hours are merged separately', [h('01', 'a'), h('01', 'b'), h('02', 'c'), h('02', 'd')], [['a', 'b'], ['c', 'd']]],
    ['another worker’s files are not touched', [h('01', 'a'), h('01', 'b', { nodeId: 'n2' })], []],
    ['files at the target size are left alone', [h('01', 'a', { bytes: 1000 }), h('01', 'b'), h('01', 'c')], [['b', 'c']]],
    ['runs split near the target', [h('01', 'a', { bytes: 400 }), h('01', 'b', { bytes: 400 }), h('01', 'c', { bytes: 400 }), h('01', 'd', { bytes: 400 })], [['a', 'b'], ['c', 'd']]],
  ];
  it.each(cases)('%s', (_name, files, groups) => {
    const names = planCompaction(files, 'n1', 1000).map((g) => g.map((f) => f.key.replace(/^.*\/([^/]+)\.parquet$/, '$1')).sort());
    expect(names.sort()).toEqual(groups);
  });
});

describe('flattenEvent', () => {
  it.each([
    ['nested objects join with _', { http: { method: 'GET', req: { bytes: 3 } } }, { http_method: 'GET', http_req_bytes: 3 }],
    ['arrays are kept as JSON text', { tags: ['a', 1, { b: 2 }] }, { tags: '["a",1,{"b":2}]' }],
    ['nulls define no column', { a: null, b: { c: null }, d: 1 }, { d: 1 }],
    ['scalars stay as they are', { s: 'x', n: 1.5, t: true }, { s: 'x', n: 1.5, t: true }],
  ])('%s', (_name, event, row) => {
    expect({ ...flattenEvent(event as Record<string, unknown>, 10) }).toEqual(row);
  });
  it('refuses nesting deeper than the limit', () => {
    expect(() => flattenEvent({ a: { b: { c: { d: 1 } } } }, 3)).toThrow(/deeper than the limit of 3/);
  });
});

describe('followInTime: when compaction may join files as stored instead of sorting them', () => {
  const range = (minMs: number, maxMs: number) => ({ minMs, maxMs });
  const cases: [string, { minMs: number; maxMs: number }[], boolean][] = [
    ['one file', [range(0, 10)], true],
    ['one after another', [range(0, 10), range(11, 20), range(25, 30)], true],
    ['touching at one millisecond', [range(0, 10), range(10, 20)], true],
    ['the second starts inside the first', [range(0, 10), range(9, 20)], false],
    ['the second lies inside the first', [range(0, 100), range(10, 20)], false],
    ['a later pair overlaps', [range(0, 10), range(20, 30), range(25, 40)], false],
    ['listed out of order', [range(20, 30), range(0, 10)], false],
  ];
  it.each(cases)('%s', (_name, files, expected) => {
    expect(followInTime(files)).toBe(expected);
  });
});
