import { describe, expect, test } from 'vitest';
import { autoBucketSeconds, parseTimestamp, parseTimestampNs, resolveBound, resolveRange } from '../../console/src/lib/time.ts';
import { defaultColumns, firstDataset, histogramSql, ident, stripTrailingLimit } from '../../console/src/lib/sql.ts';
import { normalizeSchema } from '../../console/src/lib/schema.ts';
import { aggregationFor, computeLines, histogramQuantile, isLabelColumn, type MetricPoint } from '../../console/src/lib/metrics.ts';
import { buildWaterfall, parseJsonList, spanAttributes } from '../../console/src/lib/traces.ts';
import { toCsv, toNdjson } from '../../console/src/lib/export.ts';

// The console's pure rules (time ranges, SQL it writes, schema shapes, metric maths, trace trees, exports).

const NOW = Date.parse('2026-11-23T12:00:00Z');

describe('time', () => {
  test.each([
    ['now', NOW],
    ['15m', NOW - 15 * 60_000],
    ['now-2h', NOW - 2 * 3_600_000],
    ['30d', NOW - 30 * 86_400_000],
    ['2026-11-23T10:00:00Z', Date.parse('2026-11-23T10:00:00Z')],
  ])('bound %s', (text, ms) => expect(resolveBound(text, NOW)).toBe(ms));

  test('a range must start before it ends; junk is refused', () => {
    expect(() => resolveRange({ from: 'now', to: '5m' }, NOW)).toThrow(/before its end/);
    expect(() => resolveBound('yesterday', NOW)).toThrow(/not a time/);
  });

  test.each([
    ['2026-11-23T02:09:37.979Z', Date.parse('2026-11-23T02:09:37.979Z')],
    ['2026-11-23T02:09:37.979', Date.parse('2026-11-23T02:09:37.979Z')], // Parseable's zone-less layout is UTC
    ['2026-11-23T02:09:37.979123456Z', Date.parse('2026-11-23T02:09:37.979Z')],
    ['2026-11-23 02:09:37+02:00', Date.parse('2026-11-23T00:09:37Z')],
    ['2026-11-23', Date.parse('2026-11-23T00:00:00Z')],
    ['nonsense', undefined],
    [null, undefined],
  ])('timestamp %s', (v, ms) => expect(parseTimestamp(v)).toBe(ms));

  test('nanosecond timestamps keep their digits', () => {
    expect(parseTimestampNs('2026-11-23T02:09:37.979123456Z')! - parseTimestampNs('2026-11-23T02:09:37.979Z')!).toBe(123456n);
  });

  test.each([
    [5 * 60_000, 5],
    [15 * 60_000, 15],
    [3_600_000, 60],
    [86_400_000, 1800],
    [30 * 86_400_000, 43200],
  ])('a %i ms range gets %i s buckets (at most 80 bars)', (span, bucket) => {
    expect(autoBucketSeconds(NOW - span, NOW)).toBe(bucket);
    expect(span / 1000 / bucket).toBeLessThanOrEqual(80);
  });
});

describe('sql', () => {
  test.each([
    ['app', 'app'],
    ['my-logs', '"my-logs"'],
    ['service.name', '"service.name"'],
    ['Level', '"Level"'],
    ['order', '"order"'],
    ['a"b', '"a""b"'],
  ])('ident %s', (name, quoted) => expect(ident(name)).toBe(quoted));

  test.each([
    ['SELECT * FROM app LIMIT 100', 'SELECT * FROM app'],
    ['SELECT * FROM app ORDER BY t DESC\nLIMIT 100 OFFSET 5;', 'SELECT * FROM app ORDER BY t DESC'],
    ['SELECT * FROM (SELECT * FROM app LIMIT 5) q', 'SELECT * FROM (SELECT * FROM app LIMIT 5) q'],
  ])('strip limit %s', (sql, out) => expect(stripTrailingLimit(sql)).toBe(out));

  test.each([
    ['SELECT * FROM app', 'app'],
    ['select x from "otel-logs" where y', 'otel-logs'],
    ['SELECT 1', undefined],
  ])('first dataset of %s', (sql, ds) => expect(firstDataset(sql)).toBe(ds));

  test('histogram SQL wraps the query without its LIMIT, or reads the dataset', () => {
    expect(histogramSql({ query: 'SELECT * FROM app LIMIT 10' }, 'p_timestamp', 60)).toBe(
      "SELECT time_bucket(INTERVAL '60 seconds', CAST(p_timestamp AS TIMESTAMP)) AS t, count(*) AS n FROM (SELECT * FROM app) AS q GROUP BY t ORDER BY t",
    );
    expect(histogramSql({ dataset: 'otel-logs' }, 'time_unix_nano', 15)).toContain('FROM "otel-logs" GROUP BY t');
  });

  test('default columns: time first, then level and message, p_* last', () => {
    expect(defaultColumns(['p_metadata', 'user', 'msg', 'p_timestamp', 'level'], 'p_timestamp')).toEqual(['p_timestamp', 'level', 'msg', 'user', 'p_metadata']);
  });
});

describe('schema shapes', () => {
  test("today's DuckDB-typed shape", () => {
    const s = normalizeSchema({ name: 'app', kind: 'json', time_column: 'p_timestamp', fields: [{ name: 'msg', data_type: 'VARCHAR' }, { name: 'n', data_type: 'BIGINT' }, { name: 'p_timestamp', data_type: 'TIMESTAMP' }, { name: 'b', data_type: 'BIGINT[]' }] });
    expect(s.timeColumn).toBe('p_timestamp');
    expect(s.fields.map((f) => f.kind)).toEqual(['text', 'number', 'time', 'list']);
  });

  test("Arrow's shape, time column from the kind", () => {
    const s = normalizeSchema(
      { fields: [{ name: 'body', data_type: 'Utf8', nullable: true }, { name: 'time_unix_nano', data_type: { Timestamp: ['Nanosecond', null] } }, { name: 'v', data_type: 'Float64' }, { name: 'ok', data_type: 'Boolean' }, { name: 'l', data_type: { List: {} } }], metadata: {} },
      'otel-logs',
    );
    expect(s.timeColumn).toBe('time_unix_nano');
    expect(s.fields.map((f) => `${f.name}:${f.type}:${f.kind}`)).toEqual(['body:Utf8:text', 'time_unix_nano:Timestamp:time', 'v:Float64:number', 'ok:Boolean:bool', 'l:List:list']);
  });

  test('anything else is an empty schema, not a crash', () => {
    expect(normalizeSchema(null).fields).toEqual([]);
    expect(normalizeSchema({ fields: [{ nope: 1 }] }).fields).toEqual([]);
  });
});

describe('metrics', () => {
  test.each([
    ['gauge', false, 'cpu', 'avg'],
    ['sum', true, 'requests', 'rate'],
    ['sum', false, 'queue', 'avg'],
    ['counter', null, 'up', 'rate'],
    [null, null, 'http_requests_total', 'rate'],
    ['histogram', null, 'latency', 'quantile'],
    ['summary', null, 'latency', 'mean'],
    ['exponential_histogram', null, 'latency', 'mean'],
  ])('%s (monotonic %s) %s → %s', (type, mono, name, agg) => expect(aggregationFor(type, mono, name)).toBe(agg));

  test.each([
    [0.5, [10, 20, 30], [0, 10, 0, 0], 15], // all in (10, 20]: the middle
    [0.9, [10, 20, 30], [5, 5, 0, 0], 18],
    [0.99, [10], [0, 4], 10], // in the +Inf bucket: the highest bound
    [0.5, [10], [0, 0], null],
  ])('quantile %f of %j %j', (q, bounds, counts, v) => {
    const got = histogramQuantile(q, bounds, counts);
    if (v === null) expect(got).toBeNull();
    else expect(got).toBeCloseTo(v, 6);
  });

  const t0 = Date.parse('2026-11-23T12:00:00Z');
  const pt = (min: number, value: number, extra: Partial<MetricPoint> = {}): MetricPoint => ({ t: t0 + min * 60_000, series: 's', group: '', value, ...extra });

  test('rate of a cumulative counter, a reset counted from zero', () => {
    const lines = computeLines([pt(0, 100), pt(1, 160), pt(2, 220), pt(3, 30)], 'rate', 60, t0, t0 + 4 * 60_000);
    expect(lines.series[0].values).toEqual([null, 1, 1, 0.5]);
  });

  test('rate of a delta counter is its sum per second', () => {
    const lines = computeLines([pt(0, 120, { temporality: 1 }), pt(1, 60, { temporality: 1 })], 'rate', 60, t0, t0 + 2 * 60_000);
    expect(lines.series[0].values).toEqual([2, 1]);
  });

  test('average by group, gaps as null', () => {
    const lines = computeLines([pt(0, 1, { group: 'a' }), pt(0, 3, { group: 'a' }), pt(2, 5, { group: 'b' })], 'avg', 60, t0, t0 + 3 * 60_000);
    expect(lines.series).toEqual([{ label: 'a', values: [2, null, null] }, { label: 'b', values: [null, null, 5] }]);
  });

  test('histogram quantiles from the increase of cumulative bucket counts', () => {
    const h = (min: number, counts: number[]) => pt(min, 0, { value: null, bounds: [10, 20], bucketCounts: counts });
    // Increase in minute 1: 0 below 10, 10 in (10,20], 0 above → median 15.
    const lines = computeLines([h(0, [100, 0, 0]), h(1, [100, 10, 0])], 'quantile', 60, t0, t0 + 2 * 60_000, 0.5);
    expect(lines.series[0].values[1]).toBeCloseTo(15, 6);
  });

  test('labels are what a data point carries besides the OTLP columns', () => {
    expect(['host', 'route', 'service.name'].every(isLabelColumn)).toBe(true);
    expect(['metric_name', 'data_point_value', 'time_unix_nano', 'p_timestamp', 'scope_name', 'is_monotonic'].some(isLabelColumn)).toBe(false);
  });
});

describe('trace waterfall', () => {
  const span = (id: string, parent: string, startMs: number, durMs: number, extra: Record<string, unknown> = {}) => ({
    span_span_id: id,
    span_parent_span_id: parent,
    span_name: id,
    span_start_time_unix_nano: new Date(Date.parse('2026-11-23T12:00:00Z') + startMs).toISOString(),
    span_duration_ns: durMs * 1e6,
    ...extra,
  });

  test('children follow their parent, siblings by start; orphans are roots; offsets from the first start', () => {
    const wf = buildWaterfall([span('c2', 'root', 50, 10), span('root', '', 0, 100), span('c1', 'root', 10, 20), span('g', 'c1', 12, 5), span('orphan', 'missing', 120, 5, { span_status_code: 2 })]);
    expect(wf.spans.map((s) => `${s.id}:${s.depth}`)).toEqual(['root:0', 'c1:1', 'g:2', 'c2:1', 'orphan:0']);
    expect(wf.spans.find((s) => s.id === 'g')!.offsetNs).toBe(12e6);
    expect(wf.totalNs).toBe(125e6);
    expect(wf.spans.find((s) => s.id === 'orphan')!.error).toBe(true);
  });

  test('a cycle of parent ids does not loop', () => {
    const wf = buildWaterfall([span('a', 'b', 0, 1), span('b', 'a', 1, 1)]);
    expect(wf.spans.length).toBeLessThanOrEqual(2);
  });

  test('attributes leave out what the waterfall shows and zero dropped counts', () => {
    expect(spanAttributes(span('a', '', 0, 1, { 'http.method': 'GET', span_dropped_events_count: 0, empty: null }))).toEqual([['http.method', 'GET']]);
    expect(parseJsonList('[{"name":"e"}]')).toEqual([{ name: 'e' }]);
    expect(parseJsonList('not json')).toEqual([]);
  });
});

describe('downloads', () => {
  test('CSV quotes what needs quoting; NDJSON keeps the chosen columns', () => {
    const rows = [{ a: 'x,y', b: 'say "hi"', c: { n: 1 } }, { a: 'line\nbreak', b: null }];
    expect(toCsv(['a', 'b', 'c'], rows)).toBe('a,b,c\r\n"x,y","say ""hi""","{""n"":1}"\r\n"line\nbreak",,\r\n');
    expect(toNdjson(['b', 'a'], rows)).toBe('{"b":"say \\"hi\\"","a":"x,y"}\n{"b":null,"a":"line\\nbreak"}\n');
  });
});
