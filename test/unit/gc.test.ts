import { afterEach, describe, expect, it } from 'vitest';
import { encodeMeta } from '../../src/storage/codec.ts';
import { manifestKey, metaKey, schemaKey } from '../../src/storage/layout.ts';
import { openEngine, storageParts, type EngineFixture } from '../helpers/engine.ts';

let f: EngineFixture | undefined;
afterEach(async () => {
  await f?.cleanup();
  f = undefined;
});

const meta = (name: string, generation: string) => ({ name, generation, kind: 'json' as const, timeColumn: 'p_timestamp', createdAt: '2026-11-25T00:00:00.000Z' });
const dataKey = (name: string, generation: string) => `${name}/date=2026-11-25/hour=10/minute=00/${generation}.n1.000000000001_0.parquet`;

async function storeWith(objects: string[]) {
  f = await openEngine();
  for (const key of objects) await f.store.putBytes(key, 'x');
  return storageParts(f);
}
const keys = async () => (await f!.store.list('')).map((o) => o.key).sort();

describe('orphan sweep: objects of generations no dataset has, deleted when two sweeps in a row find them', () => {
  it('the first sweep only suspects, the second deletes; the live generation is never touched', async () => {
    const live = [metaKey('app'), dataKey('app', 'g2'), manifestKey('app', 'g2', 'n1', 1)];
    const orphans = [dataKey('app', 'g1'), schemaKey('app', 'g1', 'n1'), dataKey('gone', 'g0')];
    const { gc } = await storeWith([...live, ...orphans]);
    const current = new Map([['app', 'g2']]);
    expect(await gc.sweep(current, new Set())).toBe(0);
    expect(await keys()).toEqual([...live, ...orphans].sort());
    expect(await gc.sweep(current, new Set())).toBe(orphans.length);
    expect(await keys()).toEqual(live.sort());
  });

  it('a generation created between two sweeps is live in the second one', async () => {
    const { gc, ctx } = await storeWith([dataKey('app', 'g1')]);
    await gc.sweep(new Map(), new Set()); // g1 suspected: no dataset has it yet
    await ctx.store.putBytes(metaKey('app'), encodeMeta(meta('app', 'g1')));
    expect(await gc.sweep(new Map([['app', 'g1']]), new Set())).toBe(0);
    expect(await keys()).toContain(dataKey('app', 'g1'));
  });

  it('a dataset whose metadata cannot be read keeps everything', async () => {
    const { gc } = await storeWith([dataKey('hurt', 'g1')]);
    await gc.sweep(new Map(), new Set(['hurt']));
    expect(await gc.sweep(new Map(), new Set(['hurt']))).toBe(0);
    expect(await keys()).toEqual([dataKey('hurt', 'g1')]);
  });
});

describe('removed files are deleted after their grace period', () => {
  it.each([
    ['not yet due', 1_000, 500, true],
    ['due', 1_000, 1_000, false],
  ])('%s', async (_, at, now, kept) => {
    const { gc } = await storeWith([dataKey('app', 'g1')]);
    gc.schedule([dataKey('app', 'g1')], at);
    await gc.collect(now);
    expect((await keys()).includes(dataKey('app', 'g1'))).toBe(kept);
  });

  it('purgeGeneration deletes one generation of a dataset, never a newer one', async () => {
    const { gc } = await storeWith([dataKey('app', 'g1'), manifestKey('app', 'g1', 'n1', 3), dataKey('app', 'g2'), dataKey('apple', 'g1')]);
    expect(await gc.purgeGeneration('app', 'g1')).toBe(2);
    expect(await keys()).toEqual([dataKey('app', 'g2'), dataKey('apple', 'g1')].sort());
  });
});
