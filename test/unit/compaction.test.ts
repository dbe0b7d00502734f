import * as path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/server.ts';
import type { FileEntry } from '../../src/storage/catalog.ts';
import { compactDataset, mergeParquet, planCompaction, runParts, timeRuns, UPGRADES_PER_PASS, type MergeInput } from '../../src/storage/files/compaction.ts';
import type { Dataset, StorageContext } from '../../src/storage/dataset/dataset.ts';
import type { Manifests } from '../../src/storage/manifests.ts';
import { compactions } from '../../src/metrics.ts';
import { IdleClosingDuckDB, openDuckDB, withConnection } from '../../src/duckdb.ts';

const file = (key: string, over: Partial<FileEntry> = {}): FileEntry => ({ key, rows: 10, bytes: 100, minMs: 0, maxMs: 1000, columns: ['a'], nodeId: 'n1', ...over });

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

  // Old nanosecond-timed files without the Iceberg time copy (`rewrite` names them): large ones are
  // rewritten alone, UPGRADES_PER_PASS a pass, own files only; small ones go through the ordinary merge.
  const old = (f: FileEntry) => f.key.includes('/old');
  const upgradeCases: [string, FileEntry[], string[][]][] = [
    ['a large old file is rewritten alone', [h('01', 'old1', { bytes: 5000 }), h('01', 'new', { bytes: 5000 })], [['old1']]],
    ['a few a pass', [h('01', 'old1', { bytes: 5000 }), h('01', 'old2', { bytes: 5000 }), h('02', 'old3', { bytes: 5000 })], [['old1'], ['old2']].slice(0, UPGRADES_PER_PASS)],
    ['small old files merge as usual', [h('01', 'old1'), h('01', 'old2')], [['old1', 'old2']]],
    ['another worker’s old file is not touched', [h('01', 'old1', { bytes: 5000, nodeId: 'n2' })], []],
  ];
  it.each(upgradeCases)('%s', (_name, files, groups) => {
    const names = planCompaction(files, 'n1', 1000, old).map((g) => g.map((f) => f.key.replace(/^.*\/([^/]+)\.parquet$/, '$1')).sort());
    expect(names).toEqual(groups);
  });
});

describe('timeRuns: which files compaction joins as stored and which it sorts together', () => {
  const range = (minMs: number, maxMs: number) => ({ minMs, maxMs });
  const cases: [string, { minMs: number; maxMs: number }[], number[][]][] = [
    ['one file', [range(0, 10)], [[0]]],
    ['one after another', [range(0, 10), range(11, 20), range(25, 30)], [[0], [1], [2]]],
    ['touching at one millisecond', [range(0, 10), range(10, 20)], [[0], [1]]],
    ['the second starts inside the first', [range(0, 10), range(9, 20)], [[0, 1]]],
    ['the second lies inside the first', [range(0, 100), range(10, 20)], [[0, 1]]],
    ['a later pair overlaps', [range(0, 10), range(20, 30), range(25, 40)], [[0], [1, 2]]],
    ['overlaps chain through a file between', [range(0, 10), range(5, 20), range(15, 30), range(30, 40)], [[0, 1, 2], [3]]],
    ['a long file holds the run open past a short one', [range(0, 100), range(10, 20), range(50, 60), range(100, 110)], [[0, 1, 2], [3]]],
    ['a pair overlaps between files that follow', [range(0, 10), range(11, 20), range(19, 25), range(26, 30)], [[0], [1, 2], [3]]],
  ];
  it.each(cases)('%s', (_name, files, expected) => {
    expect(timeRuns(files)).toEqual(expected);
  });
});

describe('runParts: of overlapping files only the window where they overlap is sorted', () => {
  const ts = (ms: number) => `TIMESTAMP '${new Date(ms).toISOString().replace('T', ' ').replace('Z', '')}'`;
  const f = (path: string, minMs: number, maxMs: number) => ({ path, minMs, maxMs });
  const cases: [string, ReturnType<typeof f>[], [string[], string, boolean][]][] = [
    ['a file alone is read as stored', [f('a', 0, 10)], [[['a'], '', false]]],
    [
      'two files overlapping at the seam',
      [f('a', 0, 1000), f('b', 990, 2000)],
      [
        [['a'], `t < ${ts(990)}`, false],
        [['a', 'b'], `t >= ${ts(990)} AND t < ${ts(1001)}`, true],
        [['b'], `t >= ${ts(1001)}`, false],
      ],
    ],
    [
      'the first file holds the second: its head and tail as stored',
      [f('a', 0, 5000), f('b', 1000, 2000)],
      [
        [['a'], `t < ${ts(1000)}`, false],
        [['a', 'b'], `t >= ${ts(1000)} AND t < ${ts(2001)}`, true],
        [['a'], `t >= ${ts(2001)}`, false],
      ],
    ],
    [
      'a chain of three: the window spans from the second start to the end before the last',
      [f('a', 0, 1000), f('b', 900, 2000), f('c', 1900, 3000)],
      [
        [['a'], `t < ${ts(900)}`, false],
        [['a', 'b', 'c'], `t >= ${ts(900)} AND t < ${ts(2001)}`, true],
        [['c'], `t >= ${ts(2001)}`, false],
      ],
    ],
  ];
  it.each(cases)('%s', (_name, run, expected) => {
    expect(runParts(run, 't')).toEqual(expected);
  });
});

describe('compactDataset: each merge takes its turn among the flushes', () => {
  it('asks for one turn per group, one group at a time', async () => {
    const h = (hour: string, name: string) => file(`ds/date=2026-11-23/hour=${hour}/minute=00/${name}.parquet`);
    const files = [h('01', 'a'), h('01', 'b'), h('02', 'c'), h('02', 'd')];
    // Only what compactDataset reads before a merge: the catalog, the quarantine and two settings.
    const ds = { deleted: false, catalog: { all: () => files } } as unknown as Dataset;
    const ctx = { quarantine: { has: () => false }, settings: { nodeId: 'n1', compactionTargetBytes: 1000 } } as unknown as StorageContext;
    const turns: number[] = [];
    let inTurn = 0;
    // A turn that records itself and does not run the merge (no store or DuckDB here).
    const turn = async <T>(_fn: () => Promise<T>): Promise<T> => {
      inTurn++;
      turns.push(inTurn);
      await new Promise((r) => setTimeout(r, 5));
      inTurn--;
      return undefined as T;
    };
    expect(await compactDataset(ctx, {} as Manifests, ds, turn)).toBe(4);
    expect(turns).toEqual([1, 1]);
  });

  it('starts no further merge once the service is shutting down', async () => {
    const h = (hour: string, name: string) => file(`ds/date=2026-11-23/hour=${hour}/minute=00/${name}.parquet`);
    const files = [h('01', 'a'), h('01', 'b'), h('02', 'c'), h('02', 'd')];
    const ds = { deleted: false, catalog: { all: () => files } } as unknown as Dataset;
    const ctx = { quarantine: { has: () => false }, settings: { nodeId: 'n1', compactionTargetBytes: 1000 } } as unknown as StorageContext;
    let stopping = false;
    let merges = 0;
    // The shutdown begins during the first merge.
    const turn = async <T>(_fn: () => Promise<T>): Promise<T> => {
      merges++;
      stopping = true;
      return undefined as T;
    };
    expect(await compactDataset(ctx, {} as Manifests, ds, turn, () => stopping)).toBe(2);
    expect(merges).toBe(1);
  });

  it('lets the storage DuckDB go after a merge, without waiting for its idle time', async () => {
    const h = (name: string) => file(`ds/date=2026-11-23/hour=01/minute=00/${name}.parquet`);
    const files = [h('a'), h('b')];
    const ds = { deleted: false, catalog: { all: () => files } } as unknown as Dataset;
    const dir = await tempDir('compact-release-');
    // An idle time no test waits for: a close seen here is the release after the merge.
    const duck = new IdleClosingDuckDB(() => openDuckDB({ dataDir: dir, threads: 1, memoryLimit: '64MB', tempDir: path.join(dir, 'tmp') }), 3_600_000);
    const ctx = { duck, quarantine: { has: () => false }, settings: { nodeId: 'n1', compactionTargetBytes: 1000 } } as unknown as StorageContext;
    let openDuringMerge = false;
    // The merge's stand-in uses the storage DuckDB as a merge does, and the pass then stops (no pause).
    const turn = async <T>(_fn: () => Promise<T>): Promise<T> => {
      await withConnection(duck, (conn) => conn.run('SELECT 1'));
      openDuringMerge = duck.isOpen;
      return undefined as T;
    };
    expect(await compactDataset(ctx, {} as Manifests, ds, turn, () => openDuringMerge && !duck.isOpen)).toBe(2);
    expect(openDuringMerge).toBe(true);
    expect(duck.isOpen).toBe(false);
    expect(duck.opens).toBe(1);
  });

  it('a failing group ends only itself: the other groups and hours are merged, the failure counted', async () => {
    const h = (hour: string, name: string) => file(`ds/date=2026-11-23/hour=${hour}/minute=00/${name}.parquet`);
    const files = [h('01', 'a'), h('01', 'b'), h('02', 'c'), h('02', 'd'), h('03', 'e'), h('03', 'f')];
    const ds = { deleted: false, meta: { name: 'ds' }, catalog: { all: () => files } } as unknown as Dataset;
    const ctx = { quarantine: { has: () => false }, settings: { nodeId: 'n1', compactionTargetBytes: 1000 } } as unknown as StorageContext;
    const failedBefore = (await compactions.get()).values.find((v) => v.labels.result === 'failed')?.value ?? 0;
    let merges = 0;
    // The first group's merge fails as the issue's did (a binder error), on every pass.
    const turn = async <T>(_fn: () => Promise<T>): Promise<T> => {
      if (merges++ === 0) throw new Error('Binder Error: Column "x" referenced that exists in the SELECT clause');
      return undefined as T;
    };
    expect(await compactDataset(ctx, {} as Manifests, ds, turn)).toBe(4);
    expect(merges).toBe(3);
    const failedAfter = (await compactions.get()).values.find((v) => v.labels.result === 'failed')?.value ?? 0;
    expect(failedAfter - failedBefore).toBe(1);
  });
});

describe('mergeParquet: files that differ in columns merge by column name', () => {
  // [name, files: [columns, rows of (t seconds, x)]]: each read of the merge names only its own files' columns.
  type Spec = [string, [string[], [number, string | null][]][]];
  const cases: Spec[] = [
    ['the overlapping pair: the first lacks x', [[['t', 'b'], [[0, null], [9, null]]], [['t', 'b', 'x'], [[5, 'v5'], [14, 'v14']]], [['t', 'b'], [[20, null], [29, null]]]]],
    ['the later file lacks x', [[['t', 'b', 'x'], [[0, 'v0'], [9, 'v9']]], [['t', 'b'], [[5, null], [14, null]]]]],
    ['files that follow one another, x only in the middle', [[['t', 'b'], [[0, null]]], [['t', 'b', 'x'], [[1, 'v1']]], [['t', 'b'], [[2, null]]]]],
  ];
  it.each(cases)('%s', async (_name, files) => {
    const dir = await tempDir();
    const db = await DuckDBInstance.create(':memory:', { threads: '1' });
    const conn = await db.connect();
    try {
      const inputs: MergeInput[] = [];
      for (const [i, [columns, rows]] of files.entries()) {
        const p = path.join(dir, `${i}.parquet`);
        const values = rows.map(([sec, x]) => `(TIMESTAMP '2026-11-23 01:00:00' + INTERVAL ${sec} SECOND, 'b${sec}', ${x === null ? 'NULL' : `'${x}'`})`).join(', ');
        const select = columns.join(', ');
        await conn.run(`COPY (SELECT ${select} FROM (VALUES ${values}) v(t, b, x)) TO '${p}' (FORMAT parquet)`);
        const ms = rows.map(([sec]) => Date.UTC(2026, 10, 23, 1) + sec * 1000);
        inputs.push({ path: p, minMs: Math.min(...ms), maxMs: Math.max(...ms), columns });
      }
      const runs = timeRuns(inputs).map((run) => run.map((i) => inputs[i]));
      const target = path.join(dir, 'merged.parquet');
      const columns: [string, 'TIMESTAMP' | 'VARCHAR'][] = [['t', 'TIMESTAMP'], ['b', 'VARCHAR'], ['x', 'VARCHAR']];
      const written = await mergeParquet(db, { runs, columns, timeColumn: 't', target, zstdLevel: 1, rowGroupRows: 1000 });
      const expected = files.flatMap(([, rows]) => rows).map(([sec, x]) => ({ b: `b${sec}`, x })).sort((a, b) => a.b.localeCompare(b.b));
      const got = (await conn.runAndReadAll(`SELECT b, x FROM '${target}' ORDER BY b`)).getRowObjectsJson();
      expect(got).toEqual(expected);
      expect(written.rows).toBe(expected.length);
    } finally {
      conn.closeSync();
      db.closeSync();
    }
  });
});
