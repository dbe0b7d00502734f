/**
 * The streaming split of a wide dataset's WAL into per-minute step files (src/storage/wal/walSplit.ts,
 * issue 30 A11): every line with a time lands in exactly one step of its minute, commit markers and
 * rows without a time are dropped as every reader drops them, damaged lines are kept for DuckDB to
 * refuse, and no step costs more than its budget (unless it is one line).
 */
import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { groupSteps, halveStep, lineCost, minuteOf, splitWalLines, stepBudget, STEP_FIXED_BYTES, type LineStep } from '../../src/storage/wal/walSplit.ts';

describe('minuteOf: the minute DuckDB casts a WAL time value into', () => {
  it.each([
    ['2026-11-25T10:01:59.999Z', Date.UTC(2026, 10, 25, 10, 1)],
    ['2026-11-25 10:01:00', Date.UTC(2026, 10, 25, 10, 1)],
    ['2026-11-25T10:01:30.123456789Z', Date.UTC(2026, 10, 25, 10, 1)],
    ['2026-11-25T10:01:30+02:00', Date.UTC(2026, 10, 25, 8, 1)],
    ['2026-11-25T10:01:30', Date.UTC(2026, 10, 25, 10, 1)],
    ['yesterday', NaN],
    [1764064860000, NaN],
    [true, NaN],
  ] as [unknown, number][])('%s → %s', (value, minute) => {
    expect(minuteOf(value)).toBe(minute);
  });
});

describe('the step budget', () => {
  it('is the memory limit less what DuckDB holds anyway, never negative', () => {
    expect(stepBudget(85 * 1024 * 1024)).toBe(85 * 1024 * 1024 - STEP_FIXED_BYTES);
    expect(stepBudget(STEP_FIXED_BYTES / 2)).toBe(0);
  });

  it('holds the rows measured to flush by lines, and not those measured to fail (docs/memory.md)', () => {
    // [columns, bytes of a row's line, memory MiB, rows that flushed, rows that ran out of memory]: measured
    // with the storage DuckDB's settings, walLinesSql → one unpartitioned zstd COPY (scripts/bench/wide-lines.mjs).
    const runs: [number, number, number, number, number][] = [
      [300, 7_060, 85, 75, 100],
      [300, 66_970, 85, 25, 50],
      [300, 7_060, 128, 200, 300],
      [600, 14_300, 200, 200, 300],
      [2000, 48_450, 341, 77, 100],
      [100, 102_255, 85, 15, 20],
      [100, 102_255, 200, 48, 60],
    ];
    for (const [columns, lineBytes, mib, ok, failed] of runs) {
      const rows = Math.floor(stepBudget(mib * 1024 * 1024) / lineCost(columns, lineBytes));
      expect(rows, `${columns} columns at ${mib} MiB`).toBeGreaterThan(0);
      expect(rows, `${columns} columns at ${mib} MiB`).toBeLessThanOrEqual(ok);
      expect(rows, `${columns} columns at ${mib} MiB`).toBeLessThan(failed);
    }
  });

  it('groups consecutive steps while their cost fits, at least one step a group', () => {
    const step = (cost: number) => ({ path: `s${cost}`, minuteMs: 0, rows: 1, cost });
    const groups = groupSteps([step(4), step(5), step(2), step(20), step(1)], 10);
    expect(groups.map((g) => g.map((s) => s.cost))).toEqual([[4, 5], [2], [20], [1]]);
  });
});

describe('splitWalLines', () => {
  const minute = (m: number) => Date.UTC(2026, 10, 25, 10, m);
  const at = (m: number, s = 0) => new Date(minute(m) + s * 1000).toISOString();

  async function split(lines: string[], budget: number) {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'wal-split-'));
    const segments = [path.join(dir, '1.ndjson'), path.join(dir, '2.ndjson')];
    const half = Math.ceil(lines.length / 2);
    await fs.writeFile(segments[0], `${lines.slice(0, half).join('\n')}\n`);
    await fs.writeFile(segments[1], `${lines.slice(half).join('\n')}\n`);
    const steps = await splitWalLines(segments, 'ts', 3, budget, path.join(dir, 'steps'));
    const contents = await Promise.all(steps.map(async (s) => (await fs.readFile(s.path, 'utf8')).split('\n').filter(Boolean)));
    return { dir, steps, contents };
  }

  it('puts every timed line in one step of its minute, drops markers and rows without a time, keeps damaged lines', async () => {
    const rows = [0, 1, 0, 2, 1, 0].map((m, i) => JSON.stringify({ ts: at(m, i), a: `v${i}`, b: i }));
    const lines = [rows[0], '{}', rows[1], JSON.stringify({ a: 'no time' }), rows[2], JSON.stringify({ ts: null }), rows[3], '{"ts": "2026-', rows[4], '{}', rows[5], '{}'];
    const { dir, steps, contents } = await split(lines, 1e12);
    try {
      // One step per minute and one for the line whose time could not be read.
      const byMinute = new Map(steps.map((s, i) => [s.minuteMs, contents[i]]));
      expect(byMinute.get(minute(0))).toEqual([rows[0], rows[2], rows[5]]);
      expect(byMinute.get(minute(1))).toEqual([rows[1], rows[4]]);
      expect(byMinute.get(minute(2))).toEqual([rows[3]]);
      expect(steps.filter((s) => Number.isNaN(s.minuteMs)).map((s) => s.rows)).toEqual([1]);
      expect(contents.flat().sort()).toEqual([...rows, '{"ts": "2026-'].sort());
      expect(steps.map((s) => s.rows)).toEqual(contents.map((c) => c.length));
      expect(steps.map((s) => s.cost)).toEqual(contents.map((c) => c.reduce((sum, l) => sum + lineCost(3, Buffer.byteLength(l)), 0)));
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it('cuts a minute into further steps once a step would pass its budget; halving a step keeps its lines', async () => {
    const rows = Array.from({ length: 25 }, (_, i) => JSON.stringify({ ts: at(3, i), a: 'x'.repeat(i * 10) }));
    const budget = 3 * lineCost(3, Buffer.byteLength(rows[24]));
    const { dir, steps, contents } = await split(rows, budget);
    try {
      expect(contents.flat()).toEqual(rows);
      for (const s of steps) expect(s.cost).toBeLessThanOrEqual(budget);
      // A step ends only when the next line would not fit.
      for (const [i, s] of steps.slice(0, -1).entries()) expect(s.cost + lineCost(3, Buffer.byteLength(contents[i + 1][0]))).toBeGreaterThan(budget);
      const big = steps.reduce((a, b) => (b.rows > a.rows ? b : a));
      const halves = (await halveStep(big)) as [LineStep, LineStep];
      const halfLines = await Promise.all(halves.map(async (h) => (await fs.readFile(h.path, 'utf8')).split('\n').filter(Boolean)));
      expect(halfLines.flat()).toEqual(contents[steps.indexOf(big)]);
      expect(halves.map((h) => h.rows)).toEqual(halfLines.map((l) => l.length));
      expect(await halveStep({ ...big, rows: 1 })).toBeUndefined();
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});
