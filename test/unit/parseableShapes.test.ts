import { describe, expect, it } from 'vitest';
import { DomainError } from '../../src/errors.ts';
import { isCalendarDate } from '../../src/doors/http/datasetRoutes.ts';
import { arrowType } from '../../src/doors/http/parseableShapes.ts';
import type { ColumnType } from '../../src/model.ts';
import { binWidthMs, planCounts, rfc3339, shapeCounts, whereSql } from '../../src/query/sql/counts.ts';
import { Catalog, type FileEntry, type Manifest } from '../../src/storage/catalog.ts';
import { splitByRows } from '../../src/storage/stats.ts';

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;

describe('counts bins (Parseable defaults)', () => {
  it.each([
    [10 * MIN, undefined, MIN],
    [5 * HOUR, undefined, MIN],
    [5 * HOUR + MIN, undefined, 5 * MIN],
    [DAY, undefined, 5 * MIN],
    [DAY + MIN, undefined, HOUR],
    [10 * DAY, undefined, HOUR],
    [11 * DAY, undefined, DAY],
    [100 * 365 * DAY, undefined, Math.ceil((100 * 365 * DAY) / 10_000)], // widened to at most 10,000 bins
    [10 * MIN, 10, MIN],
    [10 * MIN, 3, 200_000],
    [0, 5, 1],
  ])('span %d ms, numBins %s → width %d ms', (span, numBins, width) => {
    expect(binWidthMs(span, numBins)).toBe(width);
  });

  it.each([
    [Date.UTC(2026, 0, 2, 3, 4, 5), '2026-01-02T03:04:05+00:00'],
    [Date.UTC(2026, 0, 2, 3, 4, 5, 120), '2026-01-02T03:04:05.120+00:00'],
  ])('rfc3339(%d) = %s', (ms, text) => expect(rfc3339(ms)).toBe(text));
});

describe('counts conditions → SQL', () => {
  const one = (c: Record<string, unknown>) => whereSql({ conditionConfig: [c as never] });
  it.each([
    [{ column: 'level', operator: '=', value: 'error' }, `("level" = 'error')`],
    [{ column: 'n', operator: '>=', value: '3' }, `("n" >= 3)`],
    [{ column: 'n', operator: '!=', value: 3 }, `("n" != 3)`],
    [{ column: 'ok', operator: '=', value: 'true' }, `("ok" = true)`],
    [{ column: 'code', operator: '=', value: '007', type: 'string' }, `("code" = '007')`],
    [{ column: 'n', operator: '<', value: '2.50', type: 'number' }, `("n" < 2.5)`],
    [{ column: 'msg', operator: 'contains', value: "50%_o'k" }, `("msg" LIKE '%50\\%\\_o''k%' ESCAPE '\\')`],
    [{ column: 'msg', operator: 'does not begin with', value: 'x' }, `("msg" NOT LIKE 'x%' ESCAPE '\\')`],
    [{ column: 'msg', operator: 'ilike', value: 'Err' }, `("msg" ILIKE '%Err%' ESCAPE '\\')`],
    [{ column: 'we"ird', operator: 'is null' }, `("we""ird" IS NULL)`],
  ])('%j → %s', (cond, sql) => expect(one(cond)).toBe(sql));

  it('joins with the group operator and nests groups', () => {
    expect(
      whereSql({
        operator: 'or',
        conditionConfig: [{ column: 'a', operator: '=', value: '1' }],
        groups: [{ operator: 'and', conditionConfig: [{ column: 'b', operator: 'is not null' }, { column: 'c', operator: '=', value: 'x' }] }],
      }),
    ).toBe(`("a" = 1) OR ((("b" IS NOT NULL) AND ("c" = 'x')))`);
  });

  it.each([
    [{ conditionConfig: [] }, /at least one/],
    [{ conditionConfig: [{ column: 'l', operator: 'contains', value: 'a', type: 'list(utf8)' }] }, /list columns/],
    [{ conditionConfig: [{ column: 'n', operator: '=', value: 'abc', type: 'int' }] }, /not a number/],
    [{ conditionConfig: [{ column: 'b', operator: '=', value: 'yes', type: 'boolean' }] }, /not a boolean/],
  ])('rejects %j', (c, message) => {
    expect(() => whereSql(c as never)).toThrow(DomainError);
    expect(() => whereSql(c as never)).toThrow(message);
  });
});

describe('counts plan and shape', () => {
  const start = Date.UTC(2026, 0, 1, 10, 0, 0);
  const req = { stream: 'app', startTime: new Date(start).toISOString(), endTime: new Date(start + 3 * MIN).toISOString(), numBins: 3 };

  it('lists every bin without groups, zero counts included, last bin clipped to endTime', () => {
    const plan = planCounts({ ...req, endTime: new Date(start + 3 * MIN - 1000).toISOString() }, 'app', 'p_timestamp');
    expect(plan.bins).toBe(3);
    const shaped = shapeCounts(plan, [{ __bin: 1, __count: 4 }]);
    expect(shaped.records.map((r) => r.count)).toEqual([0, 4, 0]);
    expect(shaped.records[2].end_time).toBe(rfc3339(start + 3 * MIN - 1000));
  });

  it('keeps group values under the column names, in the order of the rows', () => {
    const plan = planCounts({ ...req, conditions: { groupBy: ['level', 'host'] } }, 'app', 'p_timestamp');
    expect(plan.sql).toMatch(/"level" AS "__g0", "host" AS "__g1"/);
    expect(plan.sql).toMatch(/"__rank" <= 10/);
    const shaped = shapeCounts(plan, [{ __bin: 0, __g0: 'info', __g1: null, __count: 2 }]);
    expect(shaped).toEqual({
      fields: ['start_time', 'end_time', 'count', 'level', 'host'],
      records: [{ start_time: rfc3339(start), end_time: rfc3339(start + MIN), count: 2, level: 'info', host: null }],
    });
  });

  it.each([
    [{ ...req, startTime: req.endTime, endTime: req.startTime }, /must not be after endTime/],
    [{ ...req, startTime: 'whenever' }, /startTime/],
  ])('rejects %j', (r, message) => expect(() => planCounts(r, 'app', 'p_timestamp')).toThrow(message));
});

describe('Arrow types of our columns', () => {
  it.each<[ColumnType, unknown]>([
    ['VARCHAR', 'Utf8'],
    ['BIGINT', 'Int64'],
    ['DOUBLE', 'Float64'],
    ['BOOLEAN', 'Boolean'],
    ['TIMESTAMP', { Timestamp: ['Millisecond', null] }],
    ['TIMESTAMP_NS', { Timestamp: ['Nanosecond', null] }],
    ['VARCHAR[]', { List: { name: 'item', data_type: 'Utf8', nullable: true, dict_id: 0, dict_is_ordered: false, metadata: {} } }],
    ['BIGINT[]', { List: { name: 'item', data_type: 'Int64', nullable: true, dict_id: 0, dict_is_ordered: false, metadata: {} } }],
    ['DOUBLE[]', { List: { name: 'item', data_type: 'Float64', nullable: true, dict_id: 0, dict_is_ordered: false, metadata: {} } }],
  ])('%s → %j', (type, arrow) => expect(arrowType(type)).toEqual(arrow));
});

describe('stats ?date= values', () => {
  it.each([
    ['2026-11-22', true],
    ['2024-02-29', true],
    ['2026-02-29', false],
    ['2026-02-30', false],
    ['2026-13-01', false],
    ['2026-1-01', false],
    ['20261122', false],
    ['', false],
  ])('%s → %s', (text, ok) => expect(isCalendarDate(text)).toBe(ok));
});

describe('request bytes split over files by rows', () => {
  it.each([
    [100, [1, 1], [50, 50]],
    [100, [1, 2], [33, 67]],
    [7, [3], [7]],
    [5, [0, 0], [5, 0]],
    [0, [4, 4], [0, 0]],
    [10, [], []],
  ])('%d over %j → %j', (total, rows, shares) => {
    expect(splitByRows(total, rows)).toEqual(shares);
    if (rows.length) expect(shares.reduce((s, x) => s + x, 0)).toBe(total);
  });
});

describe('catalog: what retention deleted', () => {
  const file = (key: string, rows: number, bytes: number, rawBytes: number): FileEntry => ({ key, rows, bytes, rawBytes, minMs: 0, maxMs: 1, columns: [], nodeId: 'n' });
  const manifest = (m: Partial<Manifest>): Manifest => ({ version: 1, generation: 'g', nodeId: 'n', seq: 1, createdAt: '', add: [], remove: [], walSegments: [], ingestedBytes: 0, ...m });

  it('counts each deleted file once, whichever worker deleted it and in whatever order manifests arrive', () => {
    const a = file('ds/date=2026-01-01/hour=00/a.parquet', 10, 100, 1000);
    const b = file('ds/date=2026-01-02/hour=00/b.parquet', 5, 50, 500);
    const deletions = [manifest({ remove: [a.key], deleted: [{ key: a.key, rows: 10, bytes: 100, rawBytes: 1000 }] }), manifest({ nodeId: 'm', remove: [a.key], deleted: [{ key: a.key, rows: 10, bytes: 100, rawBytes: 1000 }] })];
    for (const order of [
      [manifest({ add: [a, b], ingestedBytes: 1500 }), ...deletions],
      [deletions[1], manifest({ add: [a, b], ingestedBytes: 1500 }), deletions[0]],
    ]) {
      const c = new Catalog();
      order.forEach((m, i) => c.apply(`m${i}`, m));
      expect(c.deletedTotals()).toEqual({ rows: 10, bytes: 100, rawBytes: 1000, files: 1 });
      expect(c.totals()).toEqual({ rows: 5, bytes: 50, rawBytes: 500, files: 1 });
      expect(c.totals('2026-01-02')).toEqual({ rows: 5, bytes: 50, rawBytes: 500, files: 1 });
      expect(c.totals('2026-01-01')).toEqual({ rows: 0, bytes: 0, rawBytes: 0, files: 0 });
      expect(c.ingestedBytes - c.deletedTotals().rawBytes).toBe(500);
    }
  });

  it('a merge (remove without `deleted`) deletes nothing', () => {
    const c = new Catalog();
    const parts = [file('ds/x/1.parquet', 1, 10, 10), file('ds/x/2.parquet', 2, 10, 20)];
    c.apply('m1', manifest({ add: parts, ingestedBytes: 30 }));
    c.apply('m2', manifest({ add: [file('ds/x/merged.parquet', 3, 15, 30)], remove: parts.map((p) => p.key) }));
    expect(c.deletedTotals()).toEqual({ rows: 0, bytes: 0, rawBytes: 0, files: 0 });
    expect(c.totals()).toEqual({ rows: 3, bytes: 15, rawBytes: 30, files: 1 });
  });
});
