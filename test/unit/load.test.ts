import { afterEach, describe, expect, it } from 'vitest';
import { encodeMeta } from '../../src/storage/codec.ts';
import type { DatasetMeta } from '../../src/storage/engine.ts';
import { metaKey } from '../../src/storage/layout.ts';
import { listMetas } from '../../src/storage/dataset/load.ts';
import { createDataset, openEngine, rows, storageParts, type EngineFixture } from '../helpers/engine.ts';

let f: EngineFixture | undefined;
afterEach(async () => {
  await f?.cleanup();
  f = undefined;
});

const meta = (name: string) => ({ name, generation: `gen${name}`, kind: 'json' as const, timeColumn: 'p_timestamp', createdAt: '2026-11-25T00:00:00.000Z' });

describe('listMetas: every readable dataset metadata object, the damaged ones apart', () => {
  it.each([
    ['one good object', { [metaKey('a')]: encodeMeta(meta('a')) }, ['a'], []],
    ['not JSON', { [metaKey('a')]: encodeMeta(meta('a')), [metaKey('b')]: '{"name":' }, ['a'], ['b']],
    ['JSON of the wrong shape', { [metaKey('b')]: '{"name":"b"}' }, [], ['b']],
    ['an unknown format version', { [metaKey('b')]: JSON.stringify({ ...meta('b'), version: 99 }) }, [], ['b']],
    // A copied or renamed object whose content names another dataset: damaged, and it never stands in for that one.
    ['misnamed: names a dataset that also has its own object', { [metaKey('a')]: encodeMeta(meta('a')), [metaKey('b')]: encodeMeta(meta('a')) }, ['a'], ['b']],
    ['misnamed: names a dataset that has no object', { [metaKey('a')]: encodeMeta(meta('a')), [metaKey('b')]: encodeMeta(meta('zz')) }, ['a'], ['b']],
    ['misnamed and not JSON beside good ones', { [metaKey('a')]: encodeMeta(meta('a')), [metaKey('b')]: encodeMeta(meta('c')), [metaKey('c')]: encodeMeta(meta('c')), [metaKey('d')]: 'x' }, ['a', 'c'], ['b', 'd']],
    ['a key that is not a metadata object is ignored', { '.streams/sub/x.json': 'x', '.streams/notes.txt': 'x', [metaKey('a')]: encodeMeta(meta('a')) }, ['a'], []],
  ])('%s', async (_, objects, good, damaged) => {
    f = await openEngine();
    const { ctx, quarantine } = storageParts(f);
    for (const [key, body] of Object.entries(objects)) await f.store.putBytes(key, body);
    const listed = await listMetas(ctx);
    expect([...listed.metas.keys()].sort()).toEqual(good);
    expect([...listed.damaged].sort()).toEqual(damaged);
    expect(quarantine.list().map((q) => q.key).sort()).toEqual(damaged.map((n) => metaKey(n)));
    // Each dataset listed is the one its own object describes.
    for (const [name, m] of listed.metas) expect(m).toMatchObject({ name, generation: `gen${name}` });
  });
});

describe('engine start with damaged and misnamed dataset objects', () => {
  // The engine stored `a`, `b` and `c` with a row each; then the object of `victim` was replaced by
  // `content` (`c`'s metadata as is or renamed, or garbage). A restart sets it aside and serves the others.
  it.each([
    ['names another dataset that exists', 'b', (c: DatasetMeta) => encodeMeta(c)],
    ['names a dataset that does not exist', 'b', (c: DatasetMeta) => encodeMeta({ ...c, name: 'zz' })],
    ["a dataset's own object rewritten to name another", 'a', (c: DatasetMeta) => encodeMeta(c)],
    ['not JSON', 'b', () => '{'],
  ])('%s', async (_, victim, content) => {
    f = await openEngine();
    for (const name of ['a', 'b', 'c']) {
      await createDataset(f.engine, name);
      await f.engine.append(name, rows([{ name }]), 10);
    }
    await f.store.putBytes(metaKey(victim), content(f.engine.find('c')!));
    const engine = await f.restart();
    const expected = ['a', 'b', 'c'].filter((n) => n !== victim);
    expect(engine.list().map((m) => m.name).sort()).toEqual(expected);
    expect(engine.health().quarantined).toEqual([expect.objectContaining({ key: metaKey(victim), kind: 'metadata' })]);
    for (const name of expected) {
      // Each survivor is its own dataset (not the one the misnamed object copied), with its data, and takes appends.
      expect(engine.find(name)).toMatchObject({ name });
      expect(engine.stats(name).current.rows).toBe(1);
      expect(await engine.append(name, rows([{ name }]), 10)).toEqual({ count: 1 });
    }
  });
});
