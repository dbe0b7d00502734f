import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LinkDir, type Link } from '../../src/query/worker/linkDir.ts';

/**
 * A query worker's link directory (linkDir.ts): an SQL job's directory holds exactly its links; a PromQL
 * job's keeps the links of the file sets of its dataset the worker holds, and drops a set's once it is no longer held.
 * Checked against the directory's real content (hard links in a temp directory).
 */
describe('LinkDir', () => {
  let root: string;
  let dir: string;
  const src = (n: string): Link => ({ name: `${n}.parquet`, src: path.join(root, 'store', `${n}.parquet`) });
  const onDisk = async () => (await fs.readdir(dir)).sort();
  const names = (...ns: string[]) => ns.map((n) => `${n}.parquet`).sort();

  beforeEach(async () => {
    root = await fs.mkdtemp(path.join(os.tmpdir(), 'linkdir-'));
    dir = path.join(root, 'files');
    await fs.mkdir(dir);
    await fs.mkdir(path.join(root, 'store'));
    for (const n of ['a', 'b', 'c', 'd', 'e']) await fs.writeFile(src(n).src, n);
  });
  afterEach(async () => {
    await fs.rm(root, { recursive: true, force: true });
  });

  const set = (...ns: string[]) => ({ dataset: 'app', links: ns.map(src) });

  it.each([
    {
      what: 'SQL jobs: exactly each job\'s links',
      steps: [{ links: ['a', 'b'] }, { links: ['b', 'c'] }],
      expected: [names('a', 'b'), names('b', 'c')],
    },
    {
      what: 'PromQL: the other held set\'s links stay',
      steps: [
        { links: ['a', 'b'], setId: 1, held: { 1: ['a', 'b'] } },
        { links: ['b', 'c'], setId: 2, held: { 1: ['a', 'b'], 2: ['b', 'c'] } },
      ],
      expected: [names('a', 'b'), names('a', 'b', 'c')],
    },
    {
      what: 'PromQL: a set no longer held loses its links at the next sync',
      steps: [
        { links: ['a', 'b'], setId: 1, held: { 1: ['a', 'b'] } },
        { links: ['c'], setId: 2, held: { 1: ['a', 'b'], 2: ['c'] } },
        { links: ['d'], setId: 3, held: { 2: ['c'], 3: ['d'] } },
      ],
      expected: [names('a', 'b'), names('a', 'b', 'c'), names('c', 'd')],
    },
    {
      what: 'an SQL job after PromQL ones: exactly its links',
      steps: [
        { links: ['a', 'b'], setId: 1, held: { 1: ['a', 'b'] } },
        { links: ['c', 'd'], setId: 2, held: { 1: ['a', 'b'], 2: ['c', 'd'] } },
        { links: ['e'] },
      ],
      expected: [names('a', 'b'), names('a', 'b', 'c', 'd'), names('e')],
    },
    {
      what: 'a held set after an SQL job removed its links: linked again',
      steps: [
        { links: ['a', 'b'], setId: 1, held: { 1: ['a', 'b'] } },
        { links: ['e'] },
        { links: ['a', 'b'], setId: 1, held: { 1: ['a', 'b'] } },
      ],
      expected: [names('a', 'b'), names('e'), names('a', 'b')],
    },
    {
      what: 'PromQL: a held set of another dataset loses its links (access is per dataset)',
      steps: [
        { links: ['a', 'b'], setId: 1, held: { 1: ['a', 'b'] } },
        { links: ['c'], setId: 2, held: { 1: ['a', 'b'], 2: ['c'] }, other: [2] },
        { links: ['d'], setId: 3, held: { 1: ['a', 'b'], 2: ['c'], 3: ['d'] }, other: [2] },
      ],
      expected: [names('a', 'b'), names('c'), names('d')],
    },
  ])('$what', async ({ steps, expected }) => {
    const d = new LinkDir(dir);
    for (const [i, s] of steps.entries()) {
      // Sets are of dataset `app` unless listed in `other` (dataset `other`).
      const other = new Set<number>('other' in s ? (s.other as number[]) : []);
      const datasetOf = (id: number) => (other.has(id) ? 'other' : 'app');
      const held = s.held ? Object.entries(s.held).map(([id, ns]) => [Number(id), { ...set(...ns), dataset: datasetOf(Number(id)) }] as const) : undefined;
      await d.sync(s.links.map(src), s.setId === undefined ? undefined : { setId: s.setId, dataset: datasetOf(s.setId), held: held! });
      expect(await onDisk(), `step ${i}`).toEqual(expected[i]);
      expect(d.names(), `step ${i}`).toEqual(expected[i]);
    }
  });

  it('a set whose links are all there is not looked at again (a file gone since stays linked)', async () => {
    const d = new LinkDir(dir);
    const held = [[1, set('a', 'b')] as const];
    await d.sync(set('a', 'b').links, { setId: 1, dataset: 'app', held });
    await fs.rm(src('a').src);
    await d.sync(set('a', 'b').links, { setId: 1, dataset: 'app', held });
    // The link keeps the file's bytes: the decoded or linked file is still the one granted.
    expect(await fs.readFile(path.join(dir, 'a.parquet'), 'utf8')).toBe('a');
  });

  it('a file gone before it was linked: not_found (the query is retried)', async () => {
    const d = new LinkDir(dir);
    await fs.rm(src('c').src);
    await expect(d.sync(set('a', 'c').links)).rejects.toMatchObject({ kind: 'not_found' });
  });
});
