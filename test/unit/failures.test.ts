import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import type { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDuckDB, withConnection } from '../../src/duckdb.ts';
import { FAULT_KINDS } from '../../src/failpoint.ts';
import { classifyFailure, type FailureKind } from '../../src/failures.ts';
import type { DiskGuard } from '../../src/storage/diskSpace.ts';
import { StorageEngine } from '../../src/storage/engine.ts';
import { quarantineDir } from '../../src/storage/layout.ts';
import { LocalObjectStore } from '../../src/storage/objects/objectStore.ts';

const seg = '/data/wal/app/0123/000000000001.ndjson';
const other = '/data/wal/app/0123/000000000002.ndjson';
const errno = (code: string, message = `${code}: failed`) => Object.assign(new Error(message), { code });

/** The class each injected fault (src/failpoint.ts) is classified as: what the storage engine acts on. */
const FAULT_CLASS: Record<string, FailureKind> = {
  oom: 'memory',
  enomem: 'memory',
  'duckdb-emfile': 'files',
  emfile: 'files',
  enfile: 'files',
  'duckdb-enospc': 'disk',
  enospc: 'disk',
  eio: 'io',
};

/**
 * The faults for the stages of a flush or a salvage: every stage meets every class, and the faults of
 * a class take turns over the stages so that each wording (Node's errno, DuckDB's message) still meets
 * the engine. The engine acts on the class alone (classifyFailure, tested per fault above), so the
 * full stage x fault product only repeated the same path.
 */
function stageFaults(stages: string[]): (readonly [string, string])[] {
  const byClass = new Map<FailureKind, string[]>();
  for (const kind of FAULT_KINDS) byClass.set(FAULT_CLASS[kind]!, [...(byClass.get(FAULT_CLASS[kind]!) ?? []), kind]);
  return stages.flatMap((stage, i) => [...byClass.values()].map((kinds) => [stage, kinds[i % kinds.length]!] as const));
}

describe('failure classification: only a parse error naming the segment is damage', () => {
  const cases: [string, unknown, string[], FailureKind][] = [
    ['DuckDB out of memory', new Error('Out of Memory Error: failed to allocate data of size 16.0 MiB (1.8 GiB/1.8 GiB used)'), [seg], 'memory'],
    ['DuckDB out of memory naming the segment', new Error(`Out of Memory Error: could not allocate block while reading "${seg}"`), [seg], 'memory'],
    ['allocation failure (C++)', new Error('std::bad_alloc'), [seg], 'memory'],
    ['ENOMEM', errno('ENOMEM'), [seg], 'memory'],
    ['EMFILE', errno('EMFILE'), [seg], 'files'],
    ['ENFILE', errno('ENFILE'), [seg], 'files'],
    ['DuckDB cannot open the segment: EMFILE', new Error(`IO Error: Cannot open file "${seg}": Too many open files`), [seg], 'files'],
    ['ENOSPC', errno('ENOSPC'), [seg], 'disk'],
    ['EDQUOT', errno('EDQUOT'), [seg], 'disk'],
    ['DuckDB temp file on a full disk', new Error('IO Error: Could not write file "/data/tmp/duckdb/x.block": No space left on device'), [seg], 'disk'],
    ['EIO', errno('EIO'), [seg], 'io'],
    ['EAGAIN', errno('EAGAIN'), [seg], 'io'],
    ['DuckDB read failing with an I/O error', new Error(`IO Error: Could not read from file "${seg}": Input/output error`), [seg], 'io'],
    ['malformed JSON in the segment', new Error(`Invalid Input Error: Malformed JSON in file "${seg}", at byte 1 in line 3: unexpected character. `), [seg], 'damaged'],
    ['a value that does not convert', new Error(`Invalid Input Error: JSON transform error in file "${seg}", in line 1: invalid timestamp field format`), [seg], 'damaged'],
    ['malformed JSON in another file', new Error(`Invalid Input Error: Malformed JSON in file "${other}", at byte 1 in line 3`), [seg], 'other'],
    ['malformed JSON naming no file', new Error('Invalid Input Error: Malformed JSON at byte 1'), [seg], 'other'],
    ['a missing segment', new Error(`IO Error: No files found that match the pattern "${seg}"`), [seg], 'other'],
    ['an error without a message', 'boom', [seg], 'other'],
    ['an interrupted query', new Error('INTERRUPT Error: Interrupted!'), [seg], 'other'],
  ];
  it.each(cases)('%s', (_label, err, files, kind) => {
    expect(classifyFailure(err, files)).toBe(kind);
  });

  it('every injected fault has its class below', () => {
    expect(Object.keys(FAULT_CLASS).sort()).toEqual([...FAULT_KINDS].sort());
  });

  it.each(FAULT_KINDS)('the injected fault %s is a resource error of its class, never damage', async (kind) => {
    process.env.P_FAULT = `probe:${kind}:1`;
    const { faultpoint } = await import('../../src/failpoint.ts');
    let thrown: unknown;
    try {
      faultpoint('probe');
    } catch (err) {
      thrown = err;
    }
    delete process.env.P_FAULT;
    expect(thrown).toBeInstanceOf(Error);
    expect(classifyFailure(thrown, [seg])).toBe(FAULT_CLASS[kind]);
  });
});

/**
 * Each resource error injected at each stage of a flush and of a salvage (P_FAULT, src/failpoint.ts),
 * on the real storage engine (local store, DuckDB): the flush is retried, every acknowledged row ends
 * up in Parquet, and nothing valid is set aside.
 */
describe('resource errors during flush and salvage are retried, never damage', () => {
  let dir: string;
  let duck: DuckDBInstance;
  let engine: StorageEngine;
  let n = 0;

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'lakehouse-faults-'));
    await fs.mkdir(path.join(dir, 'tmp'));
    duck = await openDuckDB({ dataDir: dir, threads: 1, memoryLimit: '256MB', tempDir: path.join(dir, 'tmp', 'duckdb') });
    engine = new StorageEngine(new LocalObjectStore(path.join(dir, 'store')), duck, {
      dataDir: dir,
      nodeId: 'n1',
      maxColumns: 100,
      flushIntervalMs: 20,
      flushBytes: 16 * 1024 * 1024,
      walMaxBytes: 1024 * 1024 * 1024,
      zstdLevel: 1,
      rowGroupRows: 122_880,
      catalogRefreshMs: 60_000,
      compactionIntervalMs: 3_600_000,
      compactionTargetBytes: 128 * 1024 * 1024,
      deleteGraceMs: 60_000,
      orphanSweepMs: 3_600_000,
      // Every scenario fails a flush on purpose: retry at once rather than after the service's 500 ms+.
      flushRetryBaseMs: 10,
    });
    await engine.init([]);
    engine.start();
  });
  afterAll(async () => {
    delete process.env.P_FAULT;
    await engine?.shutdown();
    await fs.rm(dir, { recursive: true, force: true });
  });

  const types = new Map([
    ['p_timestamp', ['TIMESTAMP' as const]],
    ['id', ['BIGINT' as const]],
    ['msg', ['VARCHAR' as const]],
  ]);
  const rows = (from: number, count: number, minutesApart = false) =>
    Array.from({ length: count }, (_, i) => {
      const minute = minutesApart ? from + i : (from + i) % 60;
      return `${JSON.stringify({ p_timestamp: new Date(Date.UTC(2026, 0, 1, 0, minute)).toISOString(), id: from + i, msg: `event ${from + i}` })}\n`;
    }).join('');

  /**
   * Appends 3 batches of `perBatch` rows (and a malformed line when `damaged`), with the fault set
   * before; `minutesApart`: each row a minute after the one before, as a backfill may send them.
   */
  async function scenario(fault: string, damaged: boolean, perBatch = 50, minutesApart = false) {
    const name = `ds${++n}`;
    await engine.create(name, 'json');
    process.env.P_FAULT = fault;
    for (let b = 0; b < 3; b++) {
      await engine.append(name, { lines: rows(b * perBatch, perBatch, minutesApart), rows: perBatch, types, fixed: [] }, 100);
      if (damaged && b === 1) await engine.append(name, { lines: '{"p_timestamp": "2026-01-01T00:00:00Z", "id": 9, garbage\n', rows: 1, types, fixed: [] }, 10);
    }
    const deadline = Date.now() + 30_000;
    // Flushed: the WAL is empty, and the flush has finished, so a disk fault's stop on appends is lifted
    // (the segments go a few awaits before that) and cannot refuse the next scenario's first append.
    const disk = (engine as unknown as { disk: DiskGuard }).disk;
    while (engine.stats(name).wal.segments > 0 || disk.blocked) {
      if (Date.now() > deadline) throw new Error(`${name}: not flushed (${JSON.stringify(engine.stats(name).wal)})`);
      await new Promise((r) => setTimeout(r, 10));
    }
    delete process.env.P_FAULT;
    const snap = await engine.snapshot(name, 0, Number.MAX_SAFE_INTEGER);
    try {
      const ids = await withConnection(duck, async (conn) =>
        (await conn.runAndReadAll(`SELECT count(*)::INT AS n, count(DISTINCT id)::INT AS d, min(id)::INT AS lo, max(id)::INT AS hi FROM read_parquet([${snap.files.map((f) => `'${f.path}'`).join(', ')}])`)).getRowObjectsJson(),
      );
      return { name, ids: ids[0], quarantined: engine.quarantine.list(name), keys: snap.files.map((f) => f.key) };
    } finally {
      snap.release();
    }
  }

  const flushStages = ['flush-parquet', 'flush-upload', 'flush-schema', 'flush-manifest'];
  const flushCases = stageFaults(flushStages);
  it.each(flushCases)('flush: %s fails with %s, then succeeds', async (stage, kind) => {
    const { ids, quarantined } = await scenario(`${stage}:${kind}:1`, false);
    expect(ids).toEqual({ n: 150, d: 150, lo: 0, hi: 149 });
    expect(quarantined).toEqual([]);
  });

  it.each(FAULT_KINDS)("the issue's case: the flush and both salvage checks fail with %s on a valid segment", async (kind) => {
    const { ids, quarantined } = await scenario(['flush-parquet', 'salvage-check', 'salvage-recheck'].map((p) => `${p}:${kind}:2`).join(','), false);
    expect(ids).toEqual({ n: 150, d: 150, lo: 0, hi: 149 });
    expect(quarantined).toEqual([]);
  });

  it('a flush of 6,000 rows one minute apart whose units run out of memory: written in smaller units, hour files', async () => {
    // 6,000 minutes are 100 hours: two units of 64 and 36 hours. The first 6 COPYs fail: the first unit
    // is written again in halves down to one partition, and the flush completes without a retry.
    const { ids, quarantined, keys } = await scenario('flush-unit:oom:6', false, 2000, true);
    expect(ids).toEqual({ n: 6000, d: 6000, lo: 0, hi: 5999 });
    expect(quarantined).toEqual([]);
    expect(keys.length).toBe(100);
    for (const key of keys) expect(key).toMatch(/\/date=\d{4}-\d{2}-\d{2}\/hour=\d{2}\/[^/]+\.parquet$/);
  });

  // A real damaged line in the WAL starts a salvage; the resource error hits the salvage at each step.
  const salvageStages = ['salvage-check', 'salvage-read', 'salvage-bad-lines', 'salvage-rewrite', 'salvage-recheck'];
  const salvageCases = stageFaults(salvageStages);
  it.each(salvageCases)('salvage: %s fails with %s; only the damaged line is set aside', async (stage, kind) => {
    const { name, ids, quarantined } = await scenario(`${stage}:${kind}:1`, true);
    expect(ids).toEqual({ n: 150, d: 150, lo: 0, hi: 149 });
    // The one damaged line is cut out (set aside in its .bad-lines file); no segment is set aside whole.
    expect(quarantined.map((q) => q.reason)).toEqual([expect.stringMatching(/^1 unreadable line\(s\) cut out/)]);
    const aside = path.join(quarantineDir(dir), 'wal', name);
    const files = await fs.readdir(aside, { recursive: true });
    const setAside = files.filter((f) => f.endsWith('.ndjson'));
    expect(setAside).toEqual([]);
  });
});
