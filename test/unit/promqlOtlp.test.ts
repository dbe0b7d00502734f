import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { METRICS_KNOWN_TYPES } from '../../src/ingest/otlp/metrics.ts';
import { PROMETHEUS_KNOWN_TYPES } from '../../src/ingest/prometheus/columns.ts';
import { otlpSeriesView } from '../../src/query/promql/otlp.ts';
import { floatLabelSql, metricNameSql, promLabelName } from '../../src/query/promql/otlpNames.ts';
import { seriesSql } from '../../src/query/promql/storage.ts';
import { seriesIndexColumns, seriesRelationSql, writeSeriesIndex } from '../../src/storage/files/seriesIndex.ts';
import type { ColumnType } from '../../src/model.ts';

/**
 * The OTLP → Prometheus rules of src/query/promql/otlp.ts, run in DuckDB as the query workers run them.
 * Expected names and labels are the ones prometheus/otlptranslator's own tests give for the same input.
 */

let instance: DuckDBInstance;
let conn: DuckDBConnection;
beforeAll(async () => {
  instance = await DuckDBInstance.create(':memory:');
  conn = await instance.connect();
});
afterAll(() => {
  conn.closeSync();
  instance.closeSync();
});

const rows = async (sql: string) => (await conn.runAndReadAll(sql)).getRowObjectsJS();
const str = (v: string | null) => (v === null ? 'NULL' : `'${v.replaceAll("'", "''")}'`);

describe('metric names (otlptranslator, with suffixes)', () => {
  it.each([
    // name, unit, type, monotonic → Prometheus name
    ['http.server.request.duration', 's', 'histogram', null, 'http_server_request_duration_seconds'],
    ['http.server.requests', '{request}', 'sum', true, 'http_server_requests_total'],
    ['requests.count', '1', 'sum', true, 'requests_count_total'],
    ['system.cpu.utilization', '1', 'gauge', null, 'system_cpu_utilization_ratio'],
    ['cpu.ratio', '1', 'gauge', null, 'cpu_ratio'],
    ['memory.usage', 'By', 'gauge', null, 'memory_usage_bytes'],
    ['network.io', 'By/s', 'sum', true, 'network_io_bytes_per_second_total'],
    ['queue.size', '{item}', 'sum', false, 'queue_size'],
    ['disk.time', 'ms', 'sum', false, 'disk_time_milliseconds'],
    ['foo_total', '', 'sum', true, 'foo_total'],
    ['total.foo', '', 'sum', true, 'foo_total'],
    ['latency_seconds', 's', 'histogram', null, 'latency_seconds'],
    ['temp', 'Cel', 'gauge', null, 'temp_celsius'],
    ['weird__name..x', '', 'gauge', null, 'weird_name_x'],
    ['name:with:colons', '', 'gauge', null, 'name:with:colons'],
    ['2xx.count', '', 'sum', true, '_2xx_count_total'],
    ['per.thing', 'km/h', 'gauge', null, 'per_thing_km_per_hour'],
    ['héllo.wörld', '', 'gauge', null, 'h_llo_w_rld'],
    ['data.rate', 'MiBy/{tick}', 'gauge', null, 'data_rate_mebibytes'],
    ['x', '%', 'gauge', null, 'x_percent'],
    ['disk.size', 'TiBy', 'gauge', null, 'disk_size_tibibytes'],
  ] as const)('%s [%s] %s → %s', async (name, unit, type, mono, want) => {
    const rel = `(SELECT ${str(name)} AS metric_name, ${str(unit)} AS metric_unit, ${str(type)} AS metric_type, ${mono === null ? 'NULL' : mono}::BOOLEAN AS is_monotonic)`;
    const [r] = await rows(metricNameSql(rel, ['metric_name', 'metric_unit', 'metric_type', 'is_monotonic']));
    expect(r.__promql_base).toBe(want);
  });
});

describe('label names (otlptranslator LabelNamer)', () => {
  it.each([
    ['http.method', 'http_method'],
    ['service.instance.id', 'service_instance_id'],
    ['123invalid', 'key_123invalid'],
    ['_private', '_private'],
    ['a..b', 'a__b'],
    ['__reserved__', '__reserved__'],
    ['a-b/c d', 'a_b_c_d'],
    ['ünï', '_n_'],
    ['ok_label', 'ok_label'],
  ])('%s → %s', (key, want) => {
    expect(promLabelName(key)).toBe(want);
  });

  it.each([
    ['1.0', '1'],
    ['0.005', '0.005'],
    ['2.5', '2.5'],
    ['1000', '1000'],
    ["'inf'", '+Inf'],
    ["'-inf'", '-Inf'],
  ])('le/quantile text of %s is %s', async (v, want) => {
    const [r] = await rows(`SELECT ${floatLabelSql(`${v}::DOUBLE`)} AS t`);
    expect(r.t).toBe(want);
  });
});

describe('the series view over a relation with few columns', () => {
  it('maps a dataset that only ever got gauges and sums (no histogram, summary or remote-write columns)', async () => {
    const schema = { time_unix_nano: 'TIMESTAMP_NS', data_point_flags: 'BIGINT', metric_name: 'VARCHAR', metric_type: 'VARCHAR', data_point_value: 'DOUBLE', host: 'VARCHAR' };
    const rel = `(SELECT TIMESTAMP_NS '2026-01-01' AS time_unix_nano, 0::BIGINT AS data_point_flags, 'cpu.temp' AS metric_name, 'gauge' AS metric_type, 51.5::DOUBLE AS data_point_value, 'h1' AS host)`;
    const view = otlpSeriesView(rel, schema, { timeColumn: 'time_unix_nano', prometheusColumns: new Map(Object.entries(PROMETHEUS_KNOWN_TYPES)), otlpColumns: new Set(Object.keys(METRICS_KNOWN_TYPES)) })!;
    expect(view.histogramColumns).toEqual([]);
    const out = await rows(`SELECT "l:__name__" AS name, "l:host" AS host, data_point_value AS v, is_stale_marker AS s FROM (${view.sql})`);
    expect(out).toEqual([{ name: 'cpu_temp', host: 'h1', v: 51.5, s: false }]);
  });

  it('wraps a series-index-like relation: names and labels from the columns it has', async () => {
    // Text columns plus what the names and buckets need, no values (what a per-file series index keeps).
    const schema = {
      time_unix_nano: 'TIMESTAMP_NS',
      data_point_flags: 'BIGINT',
      metric_name: 'VARCHAR',
      metric_unit: 'VARCHAR',
      metric_type: 'VARCHAR',
      is_monotonic: 'BOOLEAN',
      aggregation_temporality: 'BIGINT',
      data_point_explicit_bounds: 'DOUBLE[]',
      'service.name': 'VARCHAR',
    };
    const rel =
      `(SELECT * FROM (VALUES (TIMESTAMP_NS '2026-01-01', 0::BIGINT, 'lat', 's', 'histogram', NULL::BOOLEAN, 2::BIGINT, [0.5, 1.0]::DOUBLE[], 'api'), ` +
      `(TIMESTAMP_NS '2026-01-01', 0::BIGINT, 'reqs', '', 'sum', true, 2::BIGINT, NULL, 'api')) ` +
      `t(time_unix_nano, data_point_flags, metric_name, metric_unit, metric_type, is_monotonic, aggregation_temporality, data_point_explicit_bounds, "service.name"))`;
    const view = otlpSeriesView(rel, schema, { timeColumn: 'time_unix_nano', prometheusColumns: new Map(Object.entries(PROMETHEUS_KNOWN_TYPES)), otlpColumns: new Set(Object.keys(METRICS_KNOWN_TYPES)) })!;
    const out = await rows(`SELECT DISTINCT "l:__name__" AS name, "l:le" AS le, "l:job" AS job FROM (${view.sql}) ORDER BY name, le`);
    expect(out).toEqual([
      { name: 'lat_seconds_bucket', le: '+Inf', job: 'api' },
      { name: 'lat_seconds_bucket', le: '0.5', job: 'api' },
      { name: 'lat_seconds_bucket', le: '1', job: 'api' },
      { name: 'lat_seconds_count', le: null, job: 'api' },
      { name: 'lat_seconds_sum', le: null, job: 'api' },
      { name: 'reqs_total', le: null, job: 'api' },
    ]);
  });

  it('needs no mapping for a dataset without OTLP points', () => {
    expect(otlpSeriesView('t', { metric_name: 'VARCHAR', data_point_value: 'DOUBLE' }, { timeColumn: 'time_unix_nano', prometheusColumns: new Map(), otlpColumns: new Set() })).toBeUndefined();
  });
});

describe('the series view over OTLP rows', () => {
  const schema: Record<string, string> = {
    ...METRICS_KNOWN_TYPES,
    is_stale_marker: 'BOOLEAN',
    'service.name': 'VARCHAR',
    'service.namespace': 'VARCHAR',
    'service.instance.id': 'VARCHAR',
    'http.route': 'VARCHAR',
    'http.response.status_code': 'BIGINT',
    http_route: 'VARCHAR',
    code: 'VARCHAR',
    job: 'VARCHAR',
  };
  const opts = {
    timeColumn: 'time_unix_nano',
    prometheusColumns: new Map(Object.entries(PROMETHEUS_KNOWN_TYPES)),
    otlpColumns: new Set(Object.keys(METRICS_KNOWN_TYPES)),
  };

  beforeAll(async () => {
    const cols = Object.entries(schema)
      .map(([c, t]) => `"${c}" ${t}`)
      .join(', ');
    await conn.run(`CREATE TABLE m (${cols})`);
    const ins = (o: Record<string, string>) =>
      conn.run(`INSERT INTO m (${Object.keys(o).map((k) => `"${k}"`).join(', ')}) VALUES (${Object.values(o).join(', ')})`);
    const common = (t: string) => ({
      time_unix_nano: `TIMESTAMP_NS '${t}'`,
      data_point_flags: '0',
      'service.name': `'svc'`,
      'service.namespace': `'shop'`,
      'service.instance.id': `'i-1'`,
    });
    await ins({ ...common('2026-01-01 00:00:00'), metric_name: `'http.server.requests'`, metric_unit: `'{request}'`, metric_type: `'sum'`, is_monotonic: 'true', aggregation_temporality: '2', data_point_value: '42', 'http.route': `'/a'`, 'http.response.status_code': '200', http_route: `'x'` });
    await ins({ ...common('2026-01-01 00:00:00'), metric_name: `'deltas'`, metric_type: `'sum'`, is_monotonic: 'true', aggregation_temporality: '1', data_point_value: '1' });
    await ins({ ...common('2026-01-01 00:00:00'), metric_name: `'lat'`, metric_unit: `'s'`, metric_type: `'histogram'`, aggregation_temporality: '2', data_point_count: '6', data_point_sum: '3.5', data_point_bucket_counts: '[1, 2, 3]', data_point_explicit_bounds: '[0.5, 1.0]' });
    await ins({ ...common('2026-01-01 00:00:00'), metric_name: `'rpc'`, metric_unit: `'ms'`, metric_type: `'summary'`, data_point_count: '4', data_point_sum: '10', data_point_quantile_values: `'[{"quantile":0.5,"value":2},{"quantile":0.99,"value":7.5}]'` });
    await ins({ ...common('2026-01-01 00:00:00'), metric_name: `'size'`, metric_unit: `'By'`, metric_type: `'exponential_histogram'`, aggregation_temporality: '2', data_point_count: '7', data_point_sum: '70', data_point_scale: '10', data_point_zero_count: '1', data_point_zero_threshold: '0', data_point_positive_offset: '-3', data_point_positive_bucket_counts: '[1, 1, 1, 1, 2]', data_point_negative_offset: '0', data_point_negative_bucket_counts: '[]' });
    await ins({ ...common('2026-01-01 00:00:00'), metric_name: `'nosum'`, metric_type: `'exponential_histogram'`, aggregation_temporality: '2', data_point_count: '1', data_point_scale: '0', data_point_zero_count: '0', data_point_zero_threshold: '0', data_point_positive_offset: '0', data_point_positive_bucket_counts: '[1]' });
    await ins({ ...common('2026-01-01 00:00:15'), metric_name: `'temp'`, metric_unit: `'Cel'`, metric_type: `'gauge'`, data_point_flags: '1' });
    // A remote-write row of the same dataset: no flags column value; its labels are its text columns.
    await ins({ time_unix_nano: `TIMESTAMP_NS '2026-01-01 00:00:00'`, metric_name: `'up'`, data_point_value: '1', job: `'node'`, code: `'200'`, is_stale_marker: 'false' });
    const view = otlpSeriesView('m', schema, opts)!;
    await conn.run(`CREATE VIEW v AS ${view.sql}`);
  });

  const series = async (where = 'true') => {
    const view = otlpSeriesView('m', schema, opts)!;
    const out = await rows(`SELECT * FROM v WHERE ${where}`);
    return out.map((r) => {
      const labels: Record<string, string> = {};
      for (const l of view.labels) if (r[l.column] !== null && r[l.column] !== '') labels[l.label] = r[l.column] as string;
      return { labels, v: r.data_point_value, stale: r.is_stale_marker, r };
    });
  };

  it('gives a counter its _total name, sanitised labels, job and instance; an int attribute is text', async () => {
    const [s] = await series(`"l:__name__" = 'http_server_requests_total'`);
    expect(s.labels).toEqual({
      __name__: 'http_server_requests_total',
      job: 'shop/svc',
      instance: 'i-1',
      // `http.route` and `http_route` both become http_route: joined in key order, as the translator does.
      http_route: '/a;x',
      http_response_status_code: '200',
      service_name: 'svc',
      service_namespace: 'shop',
      service_instance_id: 'i-1',
    });
    expect(s.v).toBe(42);
  });

  it('leaves out delta sums', async () => {
    expect(await series(`"l:__name__" LIKE 'deltas%'`)).toEqual([]);
  });

  it('expands a histogram into cumulative _bucket{le}, _sum and _count', async () => {
    const got = (await series(`"l:__name__" LIKE 'lat_seconds%'`)).map((s) => [s.labels.__name__, s.labels.le ?? null, s.v]).sort();
    expect(got).toEqual([
      ['lat_seconds_bucket', '+Inf', 6],
      ['lat_seconds_bucket', '0.5', 1],
      ['lat_seconds_bucket', '1', 3],
      ['lat_seconds_count', null, 6],
      ['lat_seconds_sum', null, 3.5],
    ]);
  });

  it('expands a summary into {quantile}, _sum and _count', async () => {
    const got = (await series(`"l:__name__" LIKE 'rpc%'`)).map((s) => [s.labels.__name__, s.labels.quantile ?? null, s.v]).sort();
    expect(got).toEqual([
      ['rpc_milliseconds', '0.5', 2],
      ['rpc_milliseconds', '0.99', 7.5],
      ['rpc_milliseconds_count', null, 4],
      ['rpc_milliseconds_sum', null, 10],
    ]);
  });

  it('turns an exponential histogram into a native one, scale 10 merged down to 8', async () => {
    const [s] = await series(`"l:__name__" = 'size_bytes'`);
    expect(Number(s.r.data_point_scale)).toBe(8);
    // OTLP buckets -3..1 at scale 10 → (i >> 2): -1,-1,-1,0,0 → Prometheus buckets from 0 (offset +1): [3, 3].
    expect(JSON.parse(s.r.data_point_positive_spans as string)).toEqual([{ offset: 0, length: 2 }]);
    expect(s.r.data_point_positive_counts).toEqual([3, 3]);
    expect(s.r.data_point_count).toBe(7);
    expect(s.r.data_point_sum).toBe(70);
    expect(s.r.data_point_zero_count).toBe(1);
    // Unset (0) zero threshold: the default the exporter gives converted histograms.
    expect(s.r.data_point_zero_threshold).toBe(1e-128);
  });

  it('leaves out an exponential histogram without a sum, as the exporter does', async () => {
    expect(await series(`"l:__name__" LIKE 'nosum%'`)).toEqual([]);
  });

  it('makes a point flagged "no recorded value" a staleness marker', async () => {
    const [s] = await series(`"l:__name__" = 'temp_celsius'`);
    expect(s.stale).toBe(true);
    expect(s.v).toBeNull();
  });

  it('passes remote-write rows through with their own labels', async () => {
    const [s] = await series(`"l:__name__" = 'up'`);
    expect(s.labels).toEqual({ __name__: 'up', job: 'node', code: '200' });
    expect(s.v).toBe(1);
  });

  it('works under seriesSql with matchers on mapped names and labels', async () => {
    const view = otlpSeriesView('m', schema, opts)!;
    // Label sets are asked of a relation with each tuple's time span: here each row its own.
    const spans = '(SELECT *, time_unix_nano AS p_min_time, time_unix_nano AS p_max_time FROM v)';
    const sql = seriesSql(spans, 'time_unix_nano', true, view.labels, {
      matchers: [
        { type: '=', name: '__name__', value: 'lat_seconds_bucket' },
        { type: '=~', name: 'job', value: 'shop/.*' },
      ],
      start: Date.parse('2025-12-31T00:00:00Z'),
      end: Date.parse('2026-01-02T00:00:00Z'),
      labelsOnly: true,
    }, true, view.histogramColumns);
    const out = await rows(sql);
    expect(out.map((r) => r['l:le']).sort()).toEqual(['+Inf', '0.5', '1']);
  });

  it('gives the same label sets over a series index (or its file read in its place) as over the rows, one tuple per series', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'otlp-index-'));
    try {
      const file = path.join(dir, 'm.parquet');
      // Every row of m, again 15 s later with other values (a new quantile value, a coarser scale), plus
      // a histogram without a sum (no _sum series) and an exponential histogram too coarse to map.
      await conn.run(`CREATE TABLE m2 AS SELECT * FROM m`);
      await conn.run(
        `INSERT INTO m2 SELECT * REPLACE (time_unix_nano + INTERVAL 15 SECOND AS time_unix_nano, data_point_value + 1 AS data_point_value, ` +
          `data_point_count * 2 AS data_point_count, data_point_sum * 2 AS data_point_sum, data_point_scale // 2 AS data_point_scale, ` +
          `replace(data_point_quantile_values, '"value":2', '"value":3') AS data_point_quantile_values) FROM m`,
      );
      await conn.run(
        `INSERT INTO m2 (time_unix_nano, data_point_flags, metric_name, metric_type, aggregation_temporality, data_point_count, data_point_bucket_counts, data_point_explicit_bounds, "http.response.status_code") ` +
          `VALUES (TIMESTAMP_NS '2026-01-01 00:00:30', 0, 'bare', 'histogram', 2, 3, [1, 2], [0.25], 404), ` +
          `(TIMESTAMP_NS '2026-01-01 00:00:30', 0, 'coarse', 'exponential_histogram', 2, 3, NULL, NULL, NULL)`,
      );
      await conn.run(`UPDATE m2 SET data_point_sum = 1, data_point_scale = -5 WHERE metric_name = 'coarse'`);
      await conn.run(`COPY m2 TO '${file}' (FORMAT parquet)`);
      const columns = Object.entries(schema) as [string, ColumnType][];
      const index = await writeSeriesIndex(instance, { dataPath: file, columns, timeColumn: 'time_unix_nano', target: `${file}.series`, zstdLevel: 3 });
      expect(index.columns).toEqual(expect.arrayContaining(['data_point_flags', 'data_point_quantile_values', 'http.response.status_code']));
      // One tuple per series of m (each row of m is one), and the two added ones.
      const [{ n }] = await rows(`SELECT count(*)::INTEGER AS n FROM read_parquet('${file}.series')`);
      const [{ series: inRows }] = await rows(`SELECT count(*)::INTEGER AS series FROM m`);
      expect(n).toBe((inRows as number) + 2);

      const whole = otlpSeriesView('m2', schema, opts)!;
      const labels = whole.labels.map((l) => `"${l.column}"`).join(', ');
      const want = await rows(`SELECT DISTINCT ${labels} FROM (${whole.sql}) ORDER BY ALL`);
      expect(want.some((r) => r['l:__name__'] === 'bare_bucket')).toBe(true);
      expect(want.some((r) => r['l:__name__'] === 'bare_sum' || r['l:__name__'] === 'coarse')).toBe(false);
      const indexSchema = Object.fromEntries(seriesIndexColumns(schema).map((c) => [c, schema[c]]));
      for (const useIndex of [true, false]) {
        const relation = seriesRelationSql(
          { schema: schema as Record<string, ColumnType>, timeColumn: 'time_unix_nano', files: [{ path: useIndex ? `${file}.series` : file, columns: columns.map(([c]) => c), seriesIndex: index, index: useIndex }], segments: [] },
          0,
          Date.parse('2030-01-01T00:00:00Z'),
        );
        const view = otlpSeriesView(`(${relation})`, indexSchema, { ...opts, spanColumns: ['p_min_time', 'p_max_time'], remoteWriteRows: true })!;
        expect(view.labels).toEqual(whole.labels);
        expect(await rows(`SELECT DISTINCT ${labels} FROM (${view.sql}) ORDER BY ALL`)).toEqual(want);
        // Under seriesSql, as the engine asks: a quantile label from the index's quantiles.
        const sql = seriesSql(`(${view.sql})`, 'time_unix_nano', true, view.labels, {
          matchers: [{ type: '=', name: '__name__', value: 'rpc_milliseconds' }],
          start: Date.parse('2026-01-01T00:00:10Z'),
          end: Date.parse('2026-01-02T00:00:00Z'),
          labelsOnly: true,
        });
        expect((await rows(sql)).map((r) => r['l:quantile']).sort()).toEqual(['0.5', '0.99']);
      }
    } finally {
      await conn.run('DROP TABLE IF EXISTS m2');
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});
