import { describe, expect, it } from 'vitest';
import { fewMinutes, segmentGroups } from '../../src/storage/files/flush.ts';
import { planUnits } from '../../src/storage/files/parquetWriter.ts';

describe('a WAL backlog is flushed about P_FLUSH_BYTES at a time', () => {
  it.each<[string, number[], number, number[][]]>([
    ['nothing', [], 10, []],
    ['one segment', [4], 10, [[4]]],
    ['small segments share a group up to the limit', [4, 4, 2, 4], 10, [[4, 4, 2], [4]]],
    ['a segment over the limit is a group of its own', [3, 25, 3], 10, [[3], [25], [3]]],
    ['segments of exactly the limit', [10, 10], 10, [[10], [10]]],
  ])('%s', (_, sizes, limit, groups) => {
    const segments = sizes.map((bytes, seq) => ({ seq, bytes }));
    expect(segmentGroups(segments, limit).map((g) => g.map((s) => s.bytes))).toEqual(groups);
    // Order and membership are kept: every segment once, oldest first.
    expect(segmentGroups(segments, limit).flat().map((s) => s.seq)).toEqual(sizes.map((_, i) => i));
  });
});

describe('a flush is written in units of bounded partitions, whatever the data\'s times', () => {
  const MIN = 60_000;
  const HOUR = 3_600_000;
  const minutes = (n: number, step = MIN, rows = 1) => Array.from({ length: n }, (_, i) => ({ startMs: i * step, rows }));
  it.each<[string, { startMs: number; rows: number }[], 'minute' | 'hour', number[]]>([
    ['nothing', [], 'minute', []],
    ['live data: a couple of minutes, one unit', minutes(2), 'minute', [2]],
    ['three minutes: two units', minutes(3), 'minute', [2, 1]],
    ['the most minutes kept at minute grain', minutes(4), 'minute', [2, 2]],
    ['more minutes: hour grain, rows summed per hour', minutes(5, 30 * MIN, 7), 'hour', [2, 1]],
    ['one record a minute for 5,000 minutes: 84 hours in units', minutes(5000), 'hour', [2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2]],
    ['times before 1970 fall in their own hour', [{ startMs: -MIN, rows: 1 }, { startMs: 0, rows: 1 }, { startMs: MIN, rows: 1 }, { startMs: -2 * HOUR, rows: 1 }, { startMs: 3 * HOUR, rows: 1 }], 'hour', [2, 2]],
  ])('%s', (_, parts, grain, unitSizes) => {
    // Small limits (4 minute partitions, 2 per unit) so the cases stay readable.
    const plan = planUnits([...parts].reverse(), 4, 2);
    expect(plan.grain).toBe(grain);
    expect(plan.units.map((u) => u.length)).toEqual(unitSizes);
    const flat = plan.units.flat();
    // Consecutive, each partition once, every row counted.
    expect(flat.map((p) => p.startMs)).toEqual([...flat.map((p) => p.startMs)].sort((a, b) => a - b));
    expect(new Set(flat.map((p) => p.startMs)).size).toBe(flat.length);
    expect(flat.reduce((s, p) => s + p.rows, 0)).toBe(parts.reduce((s, p) => s + p.rows, 0));
    if (grain === 'hour') for (const p of flat) expect(((p.startMs % HOUR) + HOUR) % HOUR).toBe(0);
  });
});

describe('a flush writes straight from the WAL only when its rows surely fall in a few minutes', () => {
  const MIN = 60_000;
  it.each<[string, string, { firstAppendMs?: number; lastAppendMs?: number; minTimeMs?: number; maxTimeMs?: number }[], boolean]>([
    ['receipt-timed, appended within a minute', 'p_timestamp', [{ firstAppendMs: 0, lastAppendMs: MIN }], true],
    ['receipt-timed, two segments 29 minutes apart', 'p_timestamp', [{ firstAppendMs: 0, lastAppendMs: MIN }, { firstAppendMs: 28 * MIN, lastAppendMs: 29 * MIN }], true],
    ['receipt-timed, a backlog of an hour', 'p_timestamp', [{ firstAppendMs: 0, lastAppendMs: MIN }, { firstAppendMs: 59 * MIN, lastAppendMs: 60 * MIN }], false],
    ['a segment recovered at start (no append times)', 'p_timestamp', [{ firstAppendMs: 0, lastAppendMs: MIN }, {}], false],
    ['records with their own time, no range reported (OTLP, remote write)', 'time_unix_nano', [{ firstAppendMs: 0, lastAppendMs: 1, minTimeMs: -Infinity, maxTimeMs: Infinity }], false],
    ['a time field, events within 29 minutes over two segments', 'ts', [{ minTimeMs: 5 * MIN, maxTimeMs: 6 * MIN }, { minTimeMs: -23 * MIN, maxTimeMs: MIN }], true],
    ['a time field, a backfill over an hour appended within a second', 'ts', [{ firstAppendMs: 0, lastAppendMs: 1, minTimeMs: 0, maxTimeMs: 60 * MIN }], false],
    ['a time field, one batch without a range', 'ts', [{ minTimeMs: 0, maxTimeMs: MIN }, { minTimeMs: -Infinity, maxTimeMs: Infinity }], false],
    ['a time field, a segment recovered at start', 'ts', [{ minTimeMs: 0, maxTimeMs: MIN }, {}], false],
  ])('%s', (_, timeColumn, segments, expected) => {
    expect(fewMinutes(segments, timeColumn)).toBe(expected);
  });
});
