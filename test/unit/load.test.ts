import { afterEach, describe, expect, it } from 'vitest';
import { encodeMeta } from '../../src/storage/codec.ts';
import { metaKey } from '../../src/storage/layout.ts';
import { listMetas } from '../../src/storage/load.ts';
import { openEngine, storageParts, type EngineFixture } from '../helpers/engine.ts';

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
    ['a key that is not a metadata object is ignored', { '.streams/sub/x.json': 'x', '.streams/notes.txt': 'x', [metaKey('a')]: encodeMeta(meta('a')) }, ['a'], []],
  ])('%s', async (_, objects, good, damaged) => {
    f = await openEngine();
    const { ctx, quarantine } = storageParts(f);
    for (const [key, body] of Object.entries(objects)) await f.store.putBytes(key, body);
    const listed = await listMetas(ctx);
    expect([...listed.metas.keys()].sort()).toEqual(good);
    expect([...listed.damaged].sort()).toEqual(damaged);
    expect(quarantine.list().map((q) => q.key).sort()).toEqual(damaged.map((n) => metaKey(n)));
  });
});
