import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { log } from '../../src/log.ts';
import { DomainError } from '../../src/errors.ts';
import { listFiles } from '../helpers/files.ts';
import { createDataset, openEngine, rows, type EngineFixture } from '../helpers/engine.ts';
import { waitFor } from '../helpers/wait.ts';

// The storage engine's facade, in process over a LocalObjectStore in a temp dir (test/helpers/engine.ts):
// the one ingest sink and its conflicts, flush, snapshots, retention, restart. The system tests cover
// the same through HTTP and real crashes; these say which rule broke, in milliseconds.

let f: EngineFixture | undefined;
afterEach(async () => {
  await f?.cleanup();
  f = undefined;
});

const count = (e: EngineFixture, name: string) => e.engine.stats(name).current.rows;

describe('append: the one ingest sink', () => {
  it.each([
    ['a new column is added', [{ a: 'x' }], [{ b: 1 }], { a: 'VARCHAR', b: 'BIGINT' }],
    ['an integer column widens to DOUBLE', [{ n: 1 }], [{ n: 1.5 }], { n: 'DOUBLE' }],
    ['the same types change nothing', [{ s: 'x', n: 2 }], [{ s: 'y', n: 3 }], { s: 'VARCHAR', n: 'BIGINT' }],
  ])('%s', async (_, first, second, columns) => {
    f = await openEngine();
    await createDataset(f.engine, 'app');
    expect(await f.engine.append('app', rows(first), 10)).toEqual({ count: first.length });
    expect(await f.engine.append('app', rows(second), 10)).toEqual({ count: second.length });
    expect(f.engine.schemaOf('app').schema).toMatchObject({ ...columns, p_timestamp: 'TIMESTAMP' });
    expect(count(f, 'app')).toBe(2);
  });

  it.each([
    // A batch placed against an old schema that no longer fits: nothing is stored, the current schema comes back.
    ['a VARCHAR where the column became BIGINT', [{ x: 1 }], [{ x: 'one' }], 'x'],
    ['a BOOLEAN where the column is DOUBLE', [{ x: 1.5 }], [{ x: true }], 'x'],
  ])('conflict: %s', async (_, first, second, column) => {
    f = await openEngine();
    await createDataset(f.engine, 'app');
    await f.engine.append('app', rows(first), 10);
    const answer = await f.engine.append('app', rows(second), 10);
    expect(answer).toMatchObject({ conflict: expect.stringContaining(column) });
    expect(count(f, 'app')).toBe(1);
  });

  it('a batch that would pass P_MAX_COLUMNS conflicts instead of being stored', async () => {
    f = await openEngine({ maxColumns: 3 });
    await createDataset(f.engine, 'app');
    await f.engine.append('app', rows([{ a: 1, b: 2 }]), 10);
    expect(await f.engine.append('app', rows([{ c: 1, d: 2 }]), 10)).toHaveProperty('conflict');
    expect(Object.keys(f.engine.schemaOf('app').schema).sort()).toEqual(['a', 'b', 'p_timestamp']);
  });

  it('an empty batch stores nothing and changes nothing', async () => {
    f = await openEngine();
    await createDataset(f.engine, 'app');
    expect(await f.engine.append('app', { lines: '', rows: 0, types: new Map(), fixed: [] }, 0)).toEqual({ count: 0 });
    expect(f.engine.stats('app').wal.rows).toBe(0);
  });

  it('a full WAL answers unavailable with a retry hint and stores nothing', async () => {
    f = await openEngine({ walMaxBytes: 10 });
    await createDataset(f.engine, 'app');
    await f.engine.append('app', rows([{ a: 'first batch fits: the check is before the append' }]), 10);
    const err = await f.engine.append('app', rows([{ a: 'second' }]), 10).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DomainError);
    expect((err as DomainError).kind).toBe('unavailable');
    expect(count(f, 'app')).toBe(1);
  });

  it('appending to a dataset that does not exist is notFound', async () => {
    f = await openEngine();
    const err = await f.engine.append('nope', rows([{ a: 1 }]), 1).catch((e: unknown) => e);
    expect((err as DomainError).kind).toBe('not_found');
  });
});

describe('flush, restart and WAL recovery', () => {
  it('shutdown flushes every acknowledged row into Parquet; a restart reads them from the catalog', async () => {
    f = await openEngine();
    await createDataset(f.engine, 'app');
    for (let i = 0; i < 5; i++) await f.engine.append('app', rows([{ i }, { i: i + 100 }]), 20);
    await f.engine.shutdown();
    await f.restart();
    const s = f.engine.stats('app');
    expect(s.current.rows).toBe(10);
    expect(s.wal.rows).toBe(0);
    expect(s.current.files).toBeGreaterThan(0);
  });

  it('a flush on shutdown that failed for lack of disk is not followed by "a flush succeeded" (issue 30 A15)', async () => {
    f = await openEngine();
    await createDataset(f.engine, 'full');
    await createDataset(f.engine, 'idle');
    await f.engine.append('full', rows([{ i: 1 }]), 20);
    const said: string[] = [];
    const spies = (['info', 'warn', 'error'] as const).map((level) => vi.spyOn(log, level).mockImplementation((msg) => void said.push(msg)));
    process.env.P_FAULT = 'flush-parquet:enospc:100';
    try {
      await f.engine.shutdown();
    } finally {
      delete process.env.P_FAULT;
      for (const s of spies) s.mockRestore();
    }
    const failed = said.indexOf('flush on shutdown failed; data stays in the WAL');
    expect(failed).toBeGreaterThanOrEqual(0);
    // The idle dataset had nothing to flush: that is no flush, and says nothing about the disk.
    expect(said.slice(failed).filter((m) => /flush succeeded/.test(m))).toEqual([]);
  });

  it('a crash (no shutdown) keeps every acknowledged row in the WAL, which the restart recovers', async () => {
    f = await openEngine();
    await createDataset(f.engine, 'app');
    await f.engine.append('app', rows([{ a: 1 }, { a: 2 }]), 20);
    await f.engine.append('app', rows([{ a: 3 }]), 10);
    await f.restart();
    expect(f.engine.stats('app').wal.rows).toBe(3);
    expect(f.engine.schemaOf('app').schema).toMatchObject({ a: 'BIGINT' });
  });

  it.each([
    ['half a line', '{"a":9,"p_timestamp":"2026-'],
    ['a whole line without its commit marker', '{"a":9,"p_timestamp":"2026-11-25T00:00:00.000Z"}\n'],
  ])('a torn write (%s) after the last commit marker is cut at recovery, never acknowledged', async (_, torn) => {
    f = await openEngine();
    await createDataset(f.engine, 'app');
    await f.engine.append('app', rows([{ a: 1 }]), 10);
    const [segment] = await listFiles(path.join(f.settings.dataDir, 'wal', 'app'), '.ndjson');
    await fs.appendFile(segment!, torn);
    await f.restart();
    expect(f.engine.stats('app').wal.rows).toBe(1);
    await f.engine.shutdown();
    await f.restart();
    expect(f.engine.stats('app').current.rows).toBe(1);
  });

  it('segments already in Parquet (a crash after the manifest, before the WAL cleanup) are dropped at restart, not stored twice', async () => {
    f = await openEngine();
    await createDataset(f.engine, 'app');
    await f.engine.append('app', rows([{ a: 1 }, { a: 2 }]), 20);
    const walDir = path.join(f.settings.dataDir, 'wal', 'app');
    const before = await listFiles(walDir, '.ndjson');
    const copies = await Promise.all(before.map(async (p) => [p, await fs.readFile(p)] as const));
    await f.engine.shutdown();
    // Put the flushed segments back, as if the process died before deleting them.
    for (const [p, body] of copies) await fs.writeFile(p, body);
    await f.restart();
    expect(f.engine.stats('app').wal.rows).toBe(0);
    expect(f.engine.stats('app').current.rows).toBe(2);
  });
});

describe('a flush of a dataset with a time field partitions by the events\' time', () => {
  // Events a day old: their partitions are unlike the receive time's whichever way the flush writes.
  const base = Date.parse('2026-11-24T10:58:30Z');
  const MIN = 60_000;
  it.each<[string, number[], boolean, string[]]>([
    // Within half an hour, as the ingest worker reports it: one COPY straight from the WAL.
    ['events within a few minutes, their range reported', [0, MIN, 2 * MIN], true, ['date=2026-11-24/hour=10/minute=58', 'date=2026-11-24/hour=10/minute=59', 'date=2026-11-24/hour=11/minute=00']],
    ['the same without a range (the units)', [0, MIN, 2 * MIN], false, ['date=2026-11-24/hour=10/minute=58', 'date=2026-11-24/hour=10/minute=59', 'date=2026-11-24/hour=11/minute=00']],
    ['a backfill over hours', [0, 3 * 60 * MIN], true, ['date=2026-11-24/hour=10/minute=58', 'date=2026-11-24/hour=13/minute=58']],
  ])('%s', async (_, offsets, reported, partitions) => {
    f = await openEngine();
    await f.engine.create('app', 'json', { field: 'ts' });
    const batch = rows(offsets.map((o, i) => ({ ts: new Date(base + o).toISOString(), i })));
    batch.types.set('ts', ['TIMESTAMP']);
    batch.fixed = ['ts'];
    if (reported) batch.timeRange = { minMs: base + Math.min(...offsets), maxMs: base + Math.max(...offsets) };
    await f.engine.append('app', batch, 100);
    await f.engine.shutdown();
    const files = await listFiles(path.join(f.dir, 'store', 'app'), '.parquet');
    expect(files.map((p) => path.relative(path.join(f!.dir, 'store', 'app'), path.dirname(p))).sort()).toEqual(partitions);
    expect(f.engine.stats('app').current.rows).toBe(offsets.length);
  });
});

describe('snapshots', () => {
  it('hold the files in range and the unflushed WAL: each row in exactly one of them', async () => {
    f = await openEngine();
    await createDataset(f.engine, 'app');
    await f.engine.append('app', rows([{ a: 1 }]), 10);
    await f.engine.shutdown();
    await f.restart();
    await f.engine.append('app', rows([{ a: 2 }]), 10);
    const snap = await f.engine.snapshot('app', 0, Date.now() + 60_000);
    try {
      expect(snap.files.reduce((n, x) => n + x.rows, 0) + snap.segments.reduce((n, s) => n + s.rows, 0)).toBe(2);
      expect(snap.files).toHaveLength(1);
    } finally {
      snap.release();
    }
    const outside = await f.engine.snapshot('app', 0, 1000);
    expect(outside.files).toHaveLength(0);
    outside.release();
  });

  it('a Parquet file missing from the store is set aside and the rest is served', async () => {
    f = await openEngine();
    await createDataset(f.engine, 'app');
    await f.engine.append('app', rows([{ a: 1 }]), 10);
    await f.engine.shutdown();
    await f.restart();
    await f.engine.append('app', rows([{ a: 2 }]), 10);
    await f.engine.shutdown();
    await f.restart();
    const files = await listFiles(path.join(f.dir, 'store', 'app'), '.parquet');
    expect(files).toHaveLength(2);
    await fs.rm(files[0]!);
    const snap = await f.engine.snapshot('app', 0, Date.now() + 60_000);
    snap.release();
    expect(snap.files).toHaveLength(1);
    expect(f.engine.stats('app').quarantined).toEqual([expect.objectContaining({ kind: 'parquet', reason: expect.stringMatching(/missing/) })]);
  });

  it('a file whose size differs from the catalog (truncated) is set aside too', async () => {
    f = await openEngine();
    await createDataset(f.engine, 'app');
    await f.engine.append('app', rows([{ a: 1 }]), 10);
    await f.engine.shutdown();
    await f.restart();
    const [file] = await listFiles(path.join(f.dir, 'store', 'app'), '.parquet');
    await fs.truncate(file!, 10);
    const snap = await f.engine.snapshot('app', 0, Date.now() + 60_000);
    snap.release();
    expect(snap.files).toHaveLength(0);
    expect(f.engine.stats('app').quarantined[0]).toMatchObject({ kind: 'parquet', reason: expect.stringMatching(/truncated/) });
  });

  it('of a deleted dataset is notFound', async () => {
    f = await openEngine();
    await createDataset(f.engine, 'app');
    await f.engine.delete('app');
    const err = await f.engine.snapshot('app', 0, 1).catch((e: unknown) => e);
    expect((err as DomainError).kind).toBe('not_found');
  });
});

describe('retention', () => {
  it('removes files entirely older than the rule and counts them as deleted', async () => {
    const old = Date.now() - 10 * 86_400_000;
    f = await openEngine();
    await createDataset(f.engine, 'app');
    await f.engine.append('app', rows([{ a: 1 }, { a: 2 }], old), 20);
    await f.engine.append('app', rows([{ a: 3 }]), 10);
    await f.engine.shutdown();
    await f.restart({ compactionIntervalMs: 50 });
    await f.engine.setRetention('app', [{ description: 'a week', action: 'delete', duration: '7d' }]);
    f.engine.start();
    await waitFor('retention', async () => f!.engine.stats('app').deleted.rows === 2);
    expect(f.engine.stats('app').current.rows).toBe(1);
    // The file itself goes after the grace period (0 here), by the garbage collector.
    await waitFor('the expired file deleted', async () => (await listFiles(path.join(f!.dir, 'store', 'app'), '.parquet')).length === 1);
    await f.engine.shutdown();
  });
});
