import { describe, expect, it } from 'vitest';
import { fileSetKey, GrantSets, HeldSets, setRef, type FileSetInputs } from '../../src/query/promql/grantSets.ts';

const file = (n: number, extra: Partial<{ index: boolean; path: string }> = {}) => ({ key: `m/date=2026-11-28/f${n}.parquet`, path: extra.path ?? `/data/store/m/f${n}.parquet`, ...extra });

const base: FileSetInputs = {
  dataset: 'm',
  labelsOnly: false,
  schemaJson: JSON.stringify({ p_timestamp: 'TIMESTAMP', value: 'DOUBLE', __name__: 'VARCHAR' }),
  timeColumn: 'p_timestamp',
  files: [file(1), file(2), file(3)],
  segments: [{ path: '/data/wal/m/1.ndjson' }],
  cacheBytes: 64 << 20,
};

describe('fileSetKey: snapshots share a file-set part exactly when their inputs are equal', () => {
  it.each<[string, Partial<FileSetInputs>, boolean]>([
    ['the same files and segments again (the next panel)', { files: [file(1), file(2), file(3)], segments: [{ path: '/data/wal/m/1.ndjson' }] }, true],
    ['compaction: two files replaced by their merge', { files: [file(1), { key: 'm/date=2026-11-28/c23.compacted.parquet', path: '/data/store/m/c23.compacted.parquet' }] }, false],
    ['a file removed (retention, or set aside as damaged)', { files: [file(1), file(3)] }, false],
    ["another worker's file arriving through sync", { files: [file(1), file(2), file(3), file(4)] }, false],
    ['a file read through its series index instead', { files: [file(1), file(2, { index: true, path: '/data/store/m/f2.parquet.series' }), file(3)] }, false],
    ['the index found damaged: its file read again', { files: [file(1), file(2), file(3)] }, true],
    ["the same key at another local copy (S3's file cache downloaded it again)", { files: [file(1), file(2, { path: '/cache/f2.parquet' }), file(3)] }, false],
    ['a new WAL segment sealed', { segments: [{ path: '/data/wal/m/1.ndjson' }, { path: '/data/wal/m/2.ndjson' }] }, false],
    ['the WAL flushed (no segment left)', { segments: [] }, false],
    ['a widened column', { schemaJson: JSON.stringify({ p_timestamp: 'TIMESTAMP', value: 'DOUBLE', __name__: 'VARCHAR', job: 'VARCHAR' }) }, false],
    ['label sets instead of samples', { labelsOnly: true }, false],
    ['another dataset with the same files', { dataset: 'n' }, false],
    ['another cache budget', { cacheBytes: 1 << 20 }, false],
  ])('%s', (_what, change, same) => {
    expect(fileSetKey({ ...base, ...change }) === fileSetKey(base)).toBe(same);
  });

  it('file order is part of the key (the scan keeps time order)', () => {
    expect(fileSetKey({ ...base, files: [file(2), file(1), file(3)] })).not.toBe(fileSetKey(base));
  });
});

describe('GrantSets and HeldSets: a part goes whole once per worker, then by id', () => {
  it.each<[string, string[], boolean[]]>([
    // [keys asked in turn by one worker, whether each grant carried the content]
    ['twenty panels over the same files: the first only', ['a', 'a', 'a', 'a'], [true, false, false, false]],
    ['a new minute file between refreshes', ['a', 'a', 'b', 'b'], [true, false, true, false]],
    ['panels alternating between two ranges', ['a', 'b', 'a', 'b', 'a'], [true, true, false, false, false]],
    ['more ranges than the worker keeps: the oldest sent again', ['a', 'b', 'c', 'd', 'e', 'a'], [true, true, true, true, true, true]],
  ])('%s', (_what, keys, whole) => {
    const sets = new GrantSets<string>();
    const held = new HeldSets<string>(4);
    const sent: boolean[] = [];
    for (const key of keys) {
      const ref = setRef(
        sets.get(key, () => `content of ${key}`),
        held.ids(),
      );
      sent.push(ref.set !== undefined);
      // What the worker resolves is always the content built for that key.
      expect(held.resolve(ref)).toBe(`content of ${key}`);
    }
    expect(sent).toEqual(whole);
  });

  it('two workers: each gets the content once, and the same id for the same files', () => {
    const sets = new GrantSets<string>();
    const [w1, w2] = [new HeldSets<string>(), new HeldSets<string>()];
    const r1 = setRef(sets.get('a', () => 'A'), w1.ids());
    w1.resolve(r1);
    const r2 = setRef(sets.get('a', () => 'other'), w2.ids());
    expect(r2).toEqual({ setId: r1.setId, set: 'A' });
    w2.resolve(r2);
    expect(setRef(sets.get('a', () => 'other'), w2.ids())).toEqual({ setId: r1.setId });
  });

  it('a part the service dropped gets a new id: a worker never resolves an id to other content', () => {
    const sets = new GrantSets<string>(2);
    const held = new HeldSets<string>(8);
    const first = setRef(sets.get('a', () => 'A'), held.ids());
    held.resolve(first);
    for (const k of ['b', 'c', 'd']) held.resolve(setRef(sets.get(k, () => k.toUpperCase()), held.ids()));
    expect(sets.size).toBe(2);
    const again = setRef(sets.get('a', () => 'A2'), held.ids());
    expect(again.setId).not.toBe(first.setId);
    expect(again.set).toBe('A2');
    expect(held.resolve(again)).toBe('A2');
  });

  it('an id the worker does not hold resolves to nothing (the worker then fails the query, never guesses)', () => {
    expect(new HeldSets<string>().resolve({ setId: 7 })).toBeUndefined();
  });
});
