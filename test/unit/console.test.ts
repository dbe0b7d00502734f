import { describe, expect, test } from 'vitest';
import { DuckDBInstance } from '@duckdb/node-api';
import { autoBucketSeconds, BUCKETS_S, histogramBars, parseTimestamp, parseTimestampNs, resolveBound, resolveRange } from '../../console/src/lib/time.ts';
import { defaultColumns, firstDataset, histogramSql, ident, stripTrailingLimit, stripTrailingOrder } from '../../console/src/lib/sql.ts';
import { normalizeSchema } from '../../console/src/lib/schema.ts';
import { computeLines, histogramQuantile, type MetricPoint } from '../../console/src/lib/metrics.ts';
import {
  aggregationOf, chartLanguage, isLabelColumn, labelsOf, linesFromRange, metricKind, metricPromql, queryRangeParams, rateWindowSeconds, seriesLabel, toPoints, withFamilyMetadata,
  type FamilyMetadata, type MetricKind,
} from '../../console/src/lib/metricsQuery.ts';
import { addCondition, valueCondition } from '../../console/src/lib/sql.ts';
import { chips, levelClass, logLayout, looksLikeLogs } from '../../console/src/lib/logs.ts';
import { seriesColors } from '../../console/src/lib/metrics.ts';
import { autoWidth } from '../../console/src/lib/format.ts';
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

  test.each([
    ['SELECT * FROM app\nORDER BY time DESC', 'SELECT * FROM app'],
    ['SELECT * FROM "my-logs" ORDER BY "service.name" ASC NULLS LAST, 2, t.x desc', 'SELECT * FROM "my-logs"'],
    ['SELECT a FROM x UNION ALL SELECT a FROM y ORDER BY a', 'SELECT a FROM x UNION ALL SELECT a FROM y'],
    // Kept: not plain columns, not at the top level, or inside a quoted name or string.
    ['SELECT * FROM app ORDER BY lower(msg)', 'SELECT * FROM app ORDER BY lower(msg)'],
    ['SELECT * FROM (SELECT * FROM app ORDER BY t)', 'SELECT * FROM (SELECT * FROM app ORDER BY t)'],
    ['SELECT row_number() OVER (ORDER BY t) FROM app', 'SELECT row_number() OVER (ORDER BY t) FROM app'],
    ['SELECT "x order by y" FROM app', 'SELECT "x order by y" FROM app'],
    ["SELECT * FROM app WHERE m = 'a order by b'", "SELECT * FROM app WHERE m = 'a order by b'"],
  ])('strip order %s', (sql, out) => expect(stripTrailingOrder(sql)).toBe(out));

  test('histogram SQL wraps the query without its LIMIT and trailing ORDER BY, or reads the dataset', () => {
    expect(histogramSql({ query: 'SELECT * FROM app\nORDER BY p_timestamp DESC\nLIMIT 1000' }, 'p_timestamp', 60)).toBe(
      "SELECT time_bucket(INTERVAL '60 seconds', CAST(p_timestamp AS TIMESTAMP), TIMESTAMP '1970-01-01') AS t, count(*) AS n FROM (SELECT * FROM app) AS q GROUP BY t ORDER BY t",
    );
    expect(histogramSql({ query: 'SELECT * FROM app LIMIT 10' }, 'p_timestamp', 60)).toBe(
      "SELECT time_bucket(INTERVAL '60 seconds', CAST(p_timestamp AS TIMESTAMP), TIMESTAMP '1970-01-01') AS t, count(*) AS n FROM (SELECT * FROM app) AS q GROUP BY t ORDER BY t",
    );
    expect(histogramSql({ dataset: 'otel-logs' }, 'time_unix_nano', 15)).toContain('FROM "otel-logs" GROUP BY t');
  });

  // The SQL's buckets, run by DuckDB, must land on the grid the bars are drawn on, for every bucket
  // size the console picks (DuckDB's default origin, a Monday in 2000, put 2-day and 7-day buckets off it).
  test.each(BUCKETS_S)('histogram of %i s buckets: each bar counts exactly the events of its bucket', async (bucket) => {
    const startMs = Date.parse('2026-11-23T12:34:56.789Z') - 40 * bucket * 1000;
    const endMs = startMs + 40 * bucket * 1000;
    const events = Array.from({ length: 400 }, (_, i) => startMs + Math.floor(((i * 7919) % 400) * (endMs - startMs) / 400) + (i % 3));
    const conn = await (await DuckDBInstance.create(':memory:')).connect();
    try {
      await conn.run(`CREATE TABLE app AS SELECT make_timestamp(ms * 1000) AS p_timestamp FROM unnest([${events.join(', ')}]::BIGINT[]) AS u(ms)`);
      const rows = (await conn.runAndReadAll(histogramSql({ query: 'SELECT * FROM app ORDER BY p_timestamp DESC LIMIT 1000' }, 'p_timestamp', bucket))).getRowObjectsJson();
      const bars = histogramBars(rows, startMs, endMs, bucket);
      const expected = bars.times.map((t) => events.filter((ms) => ms >= t * 1000 && ms < (t + bucket) * 1000).length);
      expect(bars.counts).toEqual(expected);
      expect(bars.counts.reduce((a, b) => a + b, 0)).toBe(events.filter((ms) => ms >= bars.times[0] * 1000).length);
    } finally {
      conn.closeSync();
    }
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
  // name, stored type, monotonic, points with OTLP buckets / an `le` label / a `quantile` label → kind → line maths
  test.each([
    ['cpu', 'gauge', false, 0, 0, 0, 'gauge', 'avg'],
    ['requests', 'sum', true, 0, 0, 0, 'counter', 'rate'],
    ['queue', 'sum', false, 0, 0, 0, 'gauge', 'avg'],
    ['up', 'counter', null, 0, 0, 0, 'counter', 'rate'],
    ['latency', 'histogram', null, 10, 0, 0, 'histogram', 'quantile'],
    ['latency', 'summary', null, 0, 0, 0, 'mean', 'mean'],
    ['latency', 'exponential_histogram', null, 0, 0, 0, 'mean', 'mean'],
    // Prometheus without metadata: the conventions.
    ['http_requests_total', null, null, 0, 0, 0, 'counter', 'rate'],
    ['http_request_duration_seconds_bucket', null, null, 0, 40, 0, 'prom-histogram', 'quantile'],
    ['http_request_duration_seconds_count', null, null, 0, 0, 0, 'counter', 'rate'],
    ['http_request_duration_seconds_sum', null, null, 0, 0, 0, 'counter', 'rate'],
    ['go_gc_duration_seconds', null, null, 0, 0, 25, 'prom-summary', 'avg'],
    ['process_resident_memory_bytes', null, null, 0, 0, 0, 'gauge', 'avg'],
    // Prometheus with remote-write metadata (the family's type on every series of the family).
    ['http_request_duration_seconds_bucket', 'histogram', null, 0, 40, 0, 'prom-histogram', 'quantile'],
    ['http_request_duration_seconds_count', 'histogram', null, 0, 0, 0, 'counter', 'rate'],
    ['go_gc_duration_seconds', 'summary', null, 0, 0, 25, 'prom-summary', 'avg'],
    ['go_gc_duration_seconds_sum', 'summary', null, 0, 0, 0, 'counter', 'rate'],
    ['prometheus_build_info', 'gauge', null, 0, 0, 0, 'gauge', 'avg'],
    ['scrape_samples', 'counter', null, 0, 0, 0, 'counter', 'rate'],
  ] as const)('%s (%s, monotonic %s, buckets %i, le %i, quantile %i) → %s, %s', (name, type, monotonic, otlpBuckets, le, quantile, kind, agg) => {
    expect(metricKind({ name, type, monotonic, otlpBuckets, le, quantile })).toBe(kind);
    expect(aggregationOf(kind)).toBe(agg);
  });

  // Metadata the dataset remembers (Prometheus' own family names: a counter's with `_total`).
  const families: FamilyMetadata = {
    prometheus_http_requests_total: [{ type: 'counter', help: 'Requests.', unit: '' }],
    prometheus_http_request_duration_seconds: [{ type: 'histogram', help: 'Latency.', unit: 'seconds' }],
    jobs_done: [{ type: 'counter', help: '', unit: '' }],
    mystery: [{ type: 'unknown', help: '', unit: '' }],
    jobs: [{ type: 'counter', help: '', unit: '' }],
  };
  // series name, type on its rows → type used, typed by the remembered metadata, kind
  test.each([
    ['prometheus_http_requests_total', null, 'counter', true, 'counter'],
    ['prometheus_http_request_duration_seconds_count', null, 'histogram', true, 'counter'],
    ['jobs_done', null, 'counter', true, 'counter'],
    // OpenMetrics names a counter's family without `_total`.
    ['jobs_total', null, 'counter', true, 'counter'],
    ['mystery', null, null, false, 'gauge'],
    ['not_remembered', null, null, false, 'gauge'],
    // A type on the rows (sent with the samples, or OTLP's) is the more specific one.
    ['jobs_done', 'gauge', 'gauge', false, 'gauge'],
  ] as const)('%s (rows typed %s) → %s (by metadata %s) → %s', (name, type, want, byMeta, kind) => {
    const m = withFamilyMetadata({ name, type, monotonic: null, unit: null, points: 1, otlpBuckets: 0, le: 0, quantile: 0 }, families);
    expect(m.type).toBe(want);
    expect(m.typedByMetadata ?? false).toBe(byMeta);
    expect(metricKind(m)).toBe(kind);
  });

  test("a classic histogram's le buckets become per-bucket counts, drawn as a quantile", () => {
    const at = (min: number) => new Date(Date.parse('2026-11-23T12:00:00Z') + min * 60_000).toISOString();
    const rows = (min: number, cum: [string, number][]) => cum.map(([le, v]) => ({ t: at(min), series: 'a', grp: '', le, v }));
    // Cumulative per le: in minute 1 ten more requests, all in (0.1, 0.5].
    const records = [...rows(0, [['0.1', 100], ['0.5', 100], ['+Inf', 100]]), ...rows(1, [['0.1', 100], ['0.5', 110], ['+Inf', 110]])];
    const points = toPoints(records, 'prom-histogram', (v) => Date.parse(String(v)));
    expect(points.map((p) => [p.bounds, p.bucketCounts])).toEqual([[[0.1, 0.5], [100, 0, 0]], [[0.1, 0.5], [100, 10, 0]]]);
    const t0 = Date.parse('2026-11-23T12:00:00Z');
    const lines = computeLines(points, 'quantile', 60, t0, t0 + 2 * 60_000, 0.5);
    expect(lines.series[0].values[1]).toBeCloseTo(0.3, 6);
  });

  // metric, kind, group, step (s), quantile → the PromQL the chart runs (null: the SQL path)
  test.each([
    ['http_requests_total', 'counter', 'route', 30, 0.9, 'sum by (route) (rate(http_requests_total[5m]))'],
    ['http_requests_total', 'counter', '', 300, 0.9, 'sum (rate(http_requests_total[20m]))'],
    ['room_temperature_celsius', 'gauge', 'sensor', 30, 0.9, 'avg by (sensor) (room_temperature_celsius)'],
    ['room_temperature_celsius', 'gauge', '', 30, 0.9, 'avg (room_temperature_celsius)'],
    ['rpc_duration_seconds', 'prom-summary', 'quantile', 30, 0.9, 'avg by (quantile) (rpc_duration_seconds)'],
    ['http_request_duration_seconds_bucket', 'prom-histogram', 'route', 30, 0.95, 'histogram_quantile(0.95, sum by (le, route) (rate(http_request_duration_seconds_bucket[5m])))'],
    ['http_request_duration_seconds_bucket', 'prom-histogram', '', 120, 0.5, 'histogram_quantile(0.5, sum by (le) (rate(http_request_duration_seconds_bucket[8m])))'],
    ['rpc_latency', 'mean', 'job', 15, 0.9, 'histogram_avg(sum by (job) (rate(rpc_latency[5m])))'],
    // Names PromQL does not take bare (OTLP's dots) are quoted, as Prometheus 3 allows.
    ['http.server.requests', 'counter', 'http.route', 30, 0.9, 'sum by ("http.route") (rate({"http.server.requests"}[5m]))'],
    ['http.server.duration', 'histogram', '', 30, 0.9, null],
  ] as const)('%s as %s by "%s", step %is, q %f → %s', (metric, kind, group, step, q, want) => {
    expect(metricPromql(metric, kind as MetricKind, group, step, q)).toBe(want);
  });

  test.each([
    [15, 300],
    [60, 300],
    [75, 300],
    [120, 480],
    [3600, 14400],
  ])('rate window at step %is: %is', (step, want) => expect(rateWindowSeconds(step)).toBe(want));

  // the dataset's columns → how its chart is queried
  test.each([
    [['metric_name', 'data_point_value', 'is_stale_marker', 'route'], 'promql'],
    [['metric_name', 'data_point_value', 'data_point_bucket_counts', 'resource_service.name'], 'sql'],
  ] as const)('columns %j → %s', (cols, want) => expect(chartLanguage((c) => (cols as readonly string[]).includes(c))).toBe(want));

  test('query_range starts on a step boundary and covers the range', () => {
    const p = queryRangeParams('up', Date.parse('2026-01-01T00:00:07Z'), Date.parse('2026-01-01T01:00:07Z'), 30);
    expect(Object.fromEntries(p)).toEqual({ query: 'up', start: String(Date.parse('2026-01-01T00:00:00Z') / 1000), end: String(Date.parse('2026-01-01T01:00:07Z') / 1000), step: '30' });
  });

  test.each([
    [{ __name__: 'up', job: 'api', instance: 'a:1' }, 'up{instance="a:1", job="api"}'],
    [{ __name__: 'up' }, 'up'],
    [{ code: '500' }, '{code="500"}'],
    [{}, '{}'],
  ])('series %j is printed %s', (metric, want) => expect(seriesLabel(metric)).toBe(want));

  test('a query_range matrix becomes lines on the step grid, gaps where a step has no sample or no finite value', () => {
    const t0 = Date.parse('2026-01-01T00:00:00Z');
    const s0 = t0 / 1000;
    const lines = linesFromRange(
      {
        resultType: 'matrix',
        result: [
          { metric: { route: '/slow' }, values: [[s0 + 60, '2'], [s0 + 120, 'NaN']] },
          { metric: { route: '/fast' }, values: [[s0, '10'], [s0 + 60, '10.5'], [s0 + 120, '+Inf']] },
        ],
      },
      t0,
      t0 + 120_000,
      60,
      (m) => m.route,
    );
    expect(lines.times).toEqual([s0, s0 + 60, s0 + 120]);
    expect(lines.series).toEqual([
      { label: '/fast', values: [10, 10.5, null] },
      { label: '/slow', values: [null, 2, null] },
    ]);
    // A scalar expression is one series without labels.
    expect(linesFromRange({ resultType: 'matrix', result: [{ metric: {}, values: [[s0, '3']] }] }, t0, t0 + 60_000, 60).series).toEqual([{ label: '{}', values: [3, null] }]);
  });

  test("group-by offers the labels the metric's points carry", () => {
    expect(labelsOf({ c0: 10, c1: 0, c2: 3 }, ['host', 'route', 'le'])).toEqual(['host', 'le']);
    expect(labelsOf(undefined, ['host'])).toEqual([]);
  });

  test('many series get distinct colours', () => {
    const c = seriesColors(['#111', '#222'], 30, false);
    expect(new Set(c).size).toBe(30);
  });

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

  test('rate of samples sparser than the buckets is still per second; series of a group add up', () => {
    // One sample a minute in 30 s buckets: 60 more a minute is 1/s, not 2/s; two such series are 2/s.
    const a = [pt(0, 0), pt(1, 60), pt(2, 120)];
    const b = a.map((p) => ({ ...p, series: 'other' }));
    const lines = computeLines([...a, ...b], 'rate', 30, t0, t0 + 3 * 60_000);
    expect(lines.series[0].values).toEqual([null, null, 2, null, 2, null]);
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

describe('field list filters', () => {
  test.each([
    ['SELECT * FROM app', "level = 'error'", "SELECT * FROM app\nWHERE level = 'error'"],
    ['SELECT * FROM app\nORDER BY p_timestamp DESC\nLIMIT 1000', "level = 'error'", "SELECT * FROM app\nWHERE level = 'error'\nORDER BY p_timestamp DESC\nLIMIT 1000"],
    ["SELECT * FROM app WHERE a = 1 OR b = 2 ORDER BY t LIMIT 5;", 'c = 3', 'SELECT * FROM app WHERE (a = 1 OR b = 2)\n  AND c = 3\nORDER BY t LIMIT 5'],
    ['SELECT level, count(*) FROM app GROUP BY 1', 'x = 1', 'SELECT level, count(*) FROM app\nWHERE x = 1\nGROUP BY 1'],
    // Anything not plain is wrapped: always right.
    ['SELECT * FROM (SELECT * FROM app) t', 'x = 1', 'SELECT * FROM (\nSELECT * FROM (SELECT * FROM app) t\n) AS q\nWHERE x = 1'],
    ['SELECT * FROM a UNION ALL SELECT * FROM b', 'x = 1', 'SELECT * FROM (\nSELECT * FROM a UNION ALL SELECT * FROM b\n) AS q\nWHERE x = 1'],
  ])('%s + %s', (sql, cond, want) => expect(addCondition(sql, cond)).toBe(want));

  test.each([
    ['level', 'text', 'error', false, "level = 'error'"],
    ['level', 'text', "it's", true, "level IS DISTINCT FROM 'it''s'"],
    ['status', 'number', '500', false, 'status = 500'],
    ['ok', 'bool', 'true', true, 'ok IS DISTINCT FROM true'],
    ['p_timestamp', 'time', '2026-11-23 10:00:00', false, "CAST(p_timestamp AS VARCHAR) = '2026-11-23 10:00:00'"],
    ['service.name', 'text', 'shop', false, `"service.name" = 'shop'`],
    ['body', 'text', 'x'.repeat(200), false, `starts_with(CAST(body AS VARCHAR), '${'x'.repeat(200)}')`],
  ])('%s (%s) %s exclude=%s', (field, kind, value, exclude, want) => expect(valueCondition(field, kind, value, exclude)).toBe(want));
});

describe('log lines', () => {
  test('find the time, level and message whatever the dataset calls them', () => {
    expect(logLayout(['p_timestamp', 'level', 'msg', 'user'], 'p_timestamp')).toEqual({ time: 'p_timestamp', level: 'level', message: 'msg' });
    expect(logLayout(['time_unix_nano', 'severity_text', 'body'], 'time_unix_nano')).toEqual({ time: 'time_unix_nano', level: 'severity_text', message: 'body' });
    expect(looksLikeLogs(logLayout(['n', 'severity_text'], undefined))).toBe(false);
  });

  test.each([
    ['ERROR', 'error'], ['fatal', 'error'], ['Warning', 'warn'], ['INFO', 'info'], ['debug', 'debug'], ['TRACE', 'debug'], [17, 'error'], [13, 'warn'], [9, 'info'], [5, 'debug'], ['custom', 'other'],
  ] as const)('level %s is %s', (v, c) => expect(levelClass(v)).toBe(c));

  test('chips are the other non-empty fields, in column order', () => {
    const layout = { time: 't', level: 'level', message: 'msg' };
    expect(chips({ t: 1, level: 'info', msg: 'hi', user: 'ann', empty: '', none: null, n: 0 }, ['t', 'user', 'level', 'msg', 'empty', 'none', 'n'], layout)).toEqual([['user', 'ann'], ['n', 0]]);
    // OTLP's bookkeeping only when it says something.
    expect(chips({ flags: 0, dropped_attributes_count: 0, scope_dropped_attributes_count: 2 }, ['flags', 'dropped_attributes_count', 'scope_dropped_attributes_count'], layout)).toEqual([['scope_dropped_attributes_count', 2]]);
  });

  test('columns are as wide as most of their values, within bounds', () => {
    const rows = Array.from({ length: 100 }, (_, i) => ({ short: 'ab', long: i < 95 ? 'x'.repeat(40) : 'y'.repeat(5000) }));
    // Short values: as wide as the name.
    expect(autoWidth('short', rows)).toBe(Math.round(('short'.length + 2) * 7.6 + 18));
    expect(autoWidth('a', [{ a: 1 }])).toBe(64);
    // The few very long values do not make it 640 px wide.
    expect(autoWidth('long', rows)).toBe(Math.round(40 * 7.6 + 18));
  });
});
