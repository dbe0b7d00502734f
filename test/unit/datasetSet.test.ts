import { afterEach, describe, expect, it } from 'vitest';
import { DomainError } from '../../src/errors.ts';
import { encodeMeta } from '../../src/storage/codec.ts';
import { metaKey } from '../../src/storage/layout.ts';
import { openEngine, storageParts, type EngineFixture } from '../helpers/engine.ts';

// Which datasets a worker serves: create (exactly once across workers), discovery of datasets created
// elsewhere, and the sync that follows other workers' deletes. Two "workers" here are two DatasetSets
// with their own node id and data dir over one object store.

const fixtures: EngineFixture[] = [];
afterEach(async () => {
  for (const f of fixtures.splice(0)) await f.cleanup();
});

async function workers(n: number) {
  const first = await openEngine({}, 'w1');
  fixtures.push(first);
  const all = [first];
  for (let i = 2; i <= n; i++) {
    const f = await openEngine({}, `w${i}`, { dir: first.dir });
    fixtures.push(f);
    all.push(f);
  }
  return Promise.all(
    all.map(async (f) => {
      const parts = storageParts(f);
      await parts.datasets.init(['select']);
      return parts;
    }),
  );
}

const kindOf = (err: unknown) => (err instanceof DomainError ? err.kind : String(err));

describe('create', () => {
  it('is idempotent: the second create returns the same generation, not created', async () => {
    const [a] = await workers(1);
    const one = await a!.datasets.create('app', 'json');
    const two = await a!.datasets.create('app', 'json');
    expect(one.created).toBe(true);
    expect(two).toEqual({ meta: one.meta, created: false });
  });

  it.each([
    ['App', 'conflict'], // differs only in case from "app"
    ['select', 'invalid'], // a reserved SQL keyword
    ['p_logs', 'invalid'],
    ['1abc', 'invalid'],
    ['', 'invalid'],
  ])('%j is refused (%s)', async (name, kind) => {
    const [a] = await workers(1);
    await a!.datasets.create('app', 'json');
    expect(kindOf(await a!.datasets.create(name, 'json').catch((e: unknown) => e))).toBe(kind);
  });

  it('three workers creating one dataset at once end in one generation, created exactly once', async () => {
    const all = await workers(3);
    const results = await Promise.all(all.map((w) => w.datasets.create('race', 'json')));
    expect(new Set(results.map((r) => r.meta.generation)).size).toBe(1);
    expect(results.filter((r) => r.created)).toHaveLength(1);
  });
});

describe('discovery and sync across workers', () => {
  it('a dataset created on one worker is found on another at its first lookup, not after a refresh', async () => {
    const [a, b] = await workers(2);
    const { meta } = await a!.datasets.create('app', 'json');
    expect(b!.datasets.find('app')).toBeUndefined();
    expect(await b!.datasets.resolve('app')).toEqual(meta);
    expect(kindOf(await b!.datasets.require('nope').catch((e: unknown) => e))).toBe('not_found');
  });

  it.each([
    ['deleted', false],
    ['deleted and created again', true],
  ])('a dataset %s on another worker: sync follows', async (_, recreate) => {
    const [a, b] = await workers(2);
    const { meta: first } = await a!.datasets.create('app', 'json');
    await b!.datasets.resolve('app');
    await a!.datasets.delete('app');
    const second = recreate ? (await a!.datasets.create('app', 'json')).meta : undefined;
    await b!.datasets.sync();
    expect(b!.datasets.find('app')?.generation).toBe(second?.generation);
    if (second) expect(second.generation).not.toBe(first.generation);
  });

  it('damaged metadata is not a delete: the other worker keeps serving the dataset and reports it', async () => {
    const [a, b] = await workers(2);
    await a!.datasets.create('app', 'json');
    await b!.datasets.resolve('app');
    await a!.ctx.store.putBytes(metaKey('app'), 'not json');
    await b!.datasets.sync();
    expect(b!.datasets.find('app')).toBeDefined();
    expect(b!.quarantine.list('app')).toEqual([expect.objectContaining({ key: metaKey('app'), kind: 'metadata' })]);
    // Restored: picked up again at the next sync, the report cleared.
    await a!.ctx.store.putBytes(metaKey('app'), encodeMeta(b!.datasets.find('app')!));
    await b!.datasets.sync();
    expect(b!.quarantine.list('app')).toEqual([]);
  });
});
