import { describe, expect, it } from 'vitest';
import { decodeMetricMetadata, encodeMetricMetadata, type StoredMetricFamily } from '../../src/storage/codec.ts';
import { metricMetadataKey, parseKey } from '../../src/storage/layout.ts';
import { applyFamilies, boundFamily, familyBytes, mergeFamilies, METRIC_METADATA_LIMITS, MetricMetadataStore, type MetricMetadataLimits } from '../../src/storage/metricMetadata.ts';
import type { DatasetMeta } from '../../src/storage/codec.ts';
import { openEngine, storageParts } from '../helpers/engine.ts';

const LIMITS: MetricMetadataLimits = { families: 3, helpChars: 10, unitChars: 4, nameChars: 20 };
const fam = (family: string, type = 'counter', help = '', unit = '') => ({ family, type, help, unit });
const stored = (type: string, at: number, help = '', unit = ''): StoredMetricFamily => ({ type, help, unit, at });

describe('remembered metric metadata: bounds', () => {
  it.each([
    ['keeps a family within the bounds as it is', fam('up', 'gauge', 'Is it up', 's'), fam('up', 'gauge', 'Is it up', 's')],
    ['cuts a long help text', fam('up', 'gauge', 'x'.repeat(50)), fam('up', 'gauge', 'x'.repeat(10))],
    ['cuts a long unit', fam('up', 'gauge', '', 'seconds'), fam('up', 'gauge', '', 'seco')],
    ['an unknown type word reads unknown', fam('up', 'weird'), fam('up', 'unknown')],
    ['refuses a name past the bound', fam('n'.repeat(21)), undefined],
    ['refuses an empty name', fam(''), undefined],
  ])('%s', (_, input, expected) => {
    expect(boundFamily(input, LIMITS)).toEqual(expected);
  });
});

describe('remembered metric metadata: one worker applies a request', () => {
  const own = new Map([['a', stored('counter', 1)], ['b', stored('gauge', 1)]]);
  it.each<[string, ReturnType<typeof fam>[], { changed: boolean; dropped: number; types?: Record<string, [string, number]> }]>([
    ['an unchanged repeat changes nothing (no write)', [fam('a', 'counter'), fam('b', 'gauge')], { changed: false, dropped: 0 }],
    ['a new family is added, stamped now', [fam('c', 'histogram')], { changed: true, dropped: 0, types: { a: ['counter', 1], b: ['gauge', 1], c: ['histogram', 9] } }],
    ['a changed family is replaced, stamped now', [fam('a', 'gauge')], { changed: true, dropped: 0, types: { a: ['gauge', 9], b: ['gauge', 1] } }],
    ['families past the limit are dropped, changes to known ones still apply', [fam('c'), fam('d'), fam('e'), fam('b', 'counter')], { changed: true, dropped: 2, types: { a: ['counter', 1], b: ['counter', 9], c: ['counter', 9] } }],
    ['an unusable name counts as dropped', [fam('')], { changed: false, dropped: 1 }],
  ])('%s', (_, incoming, want) => {
    const { next, dropped } = applyFamilies(own, incoming, 9, LIMITS);
    expect(dropped).toBe(want.dropped);
    expect(next !== undefined).toBe(want.changed);
    if (want.types) expect(Object.fromEntries([...next!].map(([k, v]) => [k, [v.type, v.at]]))).toEqual(want.types);
    expect(own.get('a')).toEqual(stored('counter', 1)); // the input table is never modified
  });
});

describe('remembered metric metadata: workers merged on read', () => {
  it.each<[string, Map<string, StoredMetricFamily>[], Record<string, string>]>([
    ['the union of what workers received', [new Map([['a', stored('counter', 1)]]), new Map([['b', stored('gauge', 2)]])], { a: 'counter', b: 'gauge' }],
    ['the family received last wins', [new Map([['a', stored('counter', 5)]]), new Map([['a', stored('gauge', 7)]])], { a: 'gauge' }],
    ['on a tie the first table (key order) wins', [new Map([['a', stored('counter', 5)]]), new Map([['a', stored('gauge', 5)]])], { a: 'counter' }],
    ['at most the limit of families, by name', [new Map([['d', stored('gauge', 1)], ['a', stored('gauge', 1)]]), new Map([['c', stored('gauge', 1)], ['b', stored('gauge', 1)]])], { a: 'gauge', b: 'gauge', c: 'gauge' }],
  ])('%s', (_, tables, want) => {
    expect(Object.fromEntries([...mergeFamilies(tables, LIMITS)].map(([k, v]) => [k, v.type]))).toEqual(want);
  });

  it('a worker\'s object reads back as written, whatever the family names', () => {
    const table = new Map([['__proto__', stored('gauge', 1)], ['constructor', stored('counter', 2, 'h', 's')], ['up', stored('gauge', 3)]]);
    expect(decodeMetricMetadata('k', encodeMetricMetadata(table))).toEqual(table);
  });

  it('a worker\'s object key belongs to its dataset generation (deleted with it, swept as an orphan)', () => {
    expect(parseKey(metricMetadataKey('prom', 'g1', 'node-a'))).toEqual({ role: 'metric-metadata', dataset: 'prom', generation: 'g1', nodeId: 'node-a' });
  });
});

describe('remembered metric metadata: every dataset together is bounded in memory (issue 30 A9)', () => {
  it('tables past the bound are dropped from memory and read back from the store, nothing lost', async () => {
    const f = await openEngine();
    try {
      const { ctx } = storageParts(f);
      const maxBytes = 200 * 1024;
      const store = new MetricMetadataStore(ctx, METRIC_METADATA_LIMITS, maxBytes);
      const meta = (i: number) => ({ name: `m${i}`, generation: 'g1' }) as DatasetMeta;
      // Each request: 50 families with 1 KiB of help (about 100 KiB held), to a new dataset each time.
      const families = (i: number, n = 50) => Array.from({ length: n }, (_, k) => fam(`fam_${i}_${k}`, 'gauge', 'h'.repeat(1024)));
      const sent = (i: number, n = 50) => families(i, n).reduce((sum, x) => sum + familyBytes(x.family, x), 0);
      for (let i = 0; i < 30; i++) {
        await store.remember(meta(i), families(i));
        expect(store.memory.bytes).toBeLessThanOrEqual(Math.max(maxBytes, sent(i)));
      }
      expect(store.memory.datasets).toBeLessThan(30);
      // The first dataset's table was dropped from memory; a new family is added to what the store holds.
      await store.remember(meta(0), [fam('fam_0_new', 'counter')]);
      const read = await store.read(meta(0));
      expect([...read.keys()].sort()).toEqual([...families(0).map((x) => x.family), 'fam_0_new'].sort());
    } finally {
      await f.cleanup();
    }
  });
});
