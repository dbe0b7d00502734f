import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RecentSizes } from '../../src/storage/objects/recentSizes.ts';
import { LocalObjectStore, SIZE_FRESH_MS } from '../../src/storage/objects/objectStore.ts';

/**
 * A local file's size as acquire() sees it (recentSizes.ts): looked at again once the window is past,
 * and at once after this store wrote or deleted the key. Real files in a temp directory, a fake clock.
 */
describe('RecentSizes', () => {
  let dir: string;
  let now = 0;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'recent-sizes-'));
    now = 0;
  });
  afterEach(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  // Each case: a file of 10 bytes looked at at time 0, then changed at `changeAt`, then looked at `at`.
  const cases: { name: string; change: (file: string, sizes: RecentSizes) => Promise<void>; at: number; expected: number | 'ENOENT' }[] = [
    { name: 'truncated, inside the window: the size seen', change: (f) => fs.truncate(f, 4), at: 999, expected: 10 },
    { name: 'truncated, past the window: the new size', change: (f) => fs.truncate(f, 4), at: 1_000, expected: 4 },
    { name: 'deleted, inside the window: the size seen', change: (f) => fs.rm(f), at: 500, expected: 10 },
    { name: 'deleted, past the window: ENOENT', change: (f) => fs.rm(f), at: 1_500, expected: 'ENOENT' },
    {
      name: 'rewritten and forgotten (this store wrote it): the new size at once',
      change: async (f, s) => {
        await fs.writeFile(f, 'x'.repeat(25));
        s.forget([f]);
      },
      at: 1,
      expected: 25,
    },
    {
      name: 'deleted under a directory forgotten: ENOENT at once',
      change: async (f, s) => {
        await fs.rm(f);
        s.forgetUnder(path.dirname(f));
      },
      at: 1,
      expected: 'ENOENT',
    },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const sizes = new RecentSizes(1_000, () => now);
      const file = path.join(dir, 'a.parquet');
      await fs.writeFile(file, '0123456789');
      expect(sizes.size(file)).toBe(10);
      await c.change(file, sizes);
      now = c.at;
      if (c.expected === 'ENOENT') expect(() => sizes.size(file)).toThrow(expect.objectContaining({ code: 'ENOENT' }) as Error);
      else expect(sizes.size(file)).toBe(c.expected);
    });
  }

  it('drops everything past its bound, and looks again', async () => {
    const sizes = new RecentSizes(1_000, () => now, 2);
    const files = ['a', 'b', 'c'].map((n) => path.join(dir, n));
    for (const f of files) await fs.writeFile(f, f);
    for (const f of files) sizes.size(f);
    await fs.truncate(files[0], 1);
    // a was dropped when c came in: looked at again.
    expect(sizes.size(files[0])).toBe(1);
  });
});

describe('LocalObjectStore.acquire', () => {
  it('sees a key it rewrote or deleted at once, inside the window', async () => {
    const root = await fs.mkdtemp(path.join(os.tmpdir(), 'local-store-'));
    try {
      expect(SIZE_FRESH_MS).toBeGreaterThan(0);
      const store = new LocalObjectStore(root);
      await store.putBytes('ds/a.parquet', 'x'.repeat(10));
      expect((await store.acquire(['ds/a.parquet'])).sizes).toEqual([10]);
      await store.putBytes('ds/a.parquet', 'x'.repeat(30));
      expect((await store.acquire(['ds/a.parquet'])).sizes).toEqual([30]);
      await store.delete(['ds/a.parquet']);
      await expect(store.acquire(['ds/a.parquet'])).rejects.toMatchObject({ key: 'ds/a.parquet' });
      await store.putBytes('ds/b.parquet', 'x');
      expect((await store.acquire(['ds/b.parquet'])).sizes).toEqual([1]);
      await store.deletePrefix('ds');
      await expect(store.acquire(['ds/b.parquet'])).rejects.toMatchObject({ key: 'ds/b.parquet' });
    } finally {
      await fs.rm(root, { recursive: true, force: true });
    }
  });
});
