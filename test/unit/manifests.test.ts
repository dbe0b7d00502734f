import { afterEach, describe, expect, it } from 'vitest';
import { Catalog } from '../../src/storage/catalog.ts';
import { encodeManifest, type Manifest } from '../../src/storage/codec.ts';
import { manifestKey } from '../../src/storage/layout.ts';
import { Manifests } from '../../src/storage/manifests.ts';
import { openEngine, storageParts, type EngineFixture } from '../helpers/engine.ts';

let f: EngineFixture | undefined;
afterEach(async () => {
  await f?.cleanup();
  f = undefined;
});

const meta = { name: 'app', generation: 'g1', kind: 'json' as const, timeColumn: 'p_timestamp', createdAt: '2026-11-25T00:00:00.000Z' };
const file = (key: string) => ({ key, rows: 10, bytes: 100, minMs: 0, maxMs: 1000, columns: ['a'], nodeId: 'n2' });
const manifest = (nodeId: string, seq: number, add: string[], remove: string[] = []): Manifest => ({
  version: 1,
  generation: 'g1',
  nodeId,
  seq,
  createdAt: new Date(0).toISOString(),
  add: add.map(file),
  remove,
  walSegments: [],
  ingestedBytes: 0,
});

async function parts() {
  f = await openEngine({}, 'n1');
  return storageParts(f);
}

describe('Manifests', () => {
  it("reads every worker's manifests into the catalog; a damaged one is set aside, the rest applied, and a restored one picked up", async () => {
    const { manifests, quarantine, ctx } = await parts();
    const k1 = manifestKey('app', 'g1', 'n2', 1);
    const k2 = manifestKey('app', 'g1', 'n2', 2);
    const k3 = manifestKey('app', 'g1', 'n3', 1);
    await ctx.store.putBytes(k1, encodeManifest(manifest('n2', 1, ['f1', 'f2'])));
    await ctx.store.putBytes(k2, '{"truncated');
    await ctx.store.putBytes(k3, encodeManifest(manifest('n3', 1, ['f3'], ['f1'])));
    const catalog = new Catalog();
    await manifests.read(meta, catalog);
    expect(catalog.all().map((x) => x.key).sort()).toEqual(['f2', 'f3']);
    expect(quarantine.list('app')).toEqual([expect.objectContaining({ key: k2, kind: 'manifest' })]);
    await ctx.store.putBytes(k2, encodeManifest(manifest('n2', 2, ['f4'])));
    await manifests.read(meta, catalog);
    expect(catalog.all().map((x) => x.key).sort()).toEqual(['f2', 'f3', 'f4']);
    expect(quarantine.list('app')).toEqual([]);
  });

  it.each([
    ['no manifests yet', [], 0, 1],
    ['own manifests up to 7', [7, 3], 0, 8],
    ['an own manifest that cannot be read still holds its number', [9], 0, 10],
    ['a flush asking for at least 20', [3], 20, 20],
  ])('reserve: %s', async (name, ownSeqs, atLeast, expected) => {
    const { manifests, ctx } = await parts();
    for (const seq of ownSeqs) {
      const body = name.includes('cannot be read') ? 'garbage' : encodeManifest(manifest('n1', seq, [`own${seq}`]));
      await ctx.store.putBytes(manifestKey('app', 'g1', 'n1', seq), body);
    }
    await manifests.read(meta, new Catalog());
    expect(manifests.reserve(atLeast)).toBe(expected);
    expect(manifests.reserve()).toBe(expected + 1);
  });

  it('files an own manifest removes are handed to the garbage collector, due after the grace period', async () => {
    const { ctx } = await parts();
    await ctx.store.putBytes('f1', 'x');
    await ctx.store.putBytes(manifestKey('app', 'g1', 'n1', 1), encodeManifest(manifest('n1', 1, ['f1'])));
    await ctx.store.putBytes(manifestKey('app', 'g1', 'n1', 2), encodeManifest(manifest('n1', 2, [], ['f1'])));
    const removed: { keys: string[]; at: number }[] = [];
    await new Manifests(ctx, (keys, at) => removed.push({ keys, at })).read(meta, new Catalog());
    expect(removed).toEqual([{ keys: ['f1'], at: 0 + f!.settings.deleteGraceMs }]);
  });
});
