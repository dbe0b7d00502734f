import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { labelColumns } from '../../src/query/promql/storage.ts';
import { PROMETHEUS_KNOWN_TYPES } from '../../src/ingest/prometheus/columns.ts';
import { METRICS_KNOWN_TYPES } from '../../src/ingest/otlp/metrics.ts';
import { parseKey, seriesIndexKey } from '../../src/storage/layout.ts';
import { indexUsable, isMetricsSchema, seriesIndexColumns, seriesRelationSql, writeSeriesIndex } from '../../src/storage/files/seriesIndex.ts';
import type { ColumnType } from '../../src/model.ts';

describe('seriesIndexColumns', () => {
  const cases: [string, Record<string, string>, string[]][] = [
    ['remote write: labels, name and metadata texts; not exemplars nor spans', { ...PROMETHEUS_KNOWN_TYPES, job: 'VARCHAR', instance: 'VARCHAR', p_timestamp: 'TIMESTAMP' }, ['metric_name', 'metric_type', 'metric_description', 'metric_unit', 'job', 'instance']],
    [
      'OTLP metrics: attributes of any type, resource/scope texts, the columns naming a series and the reduced per-sample ones the mapping reads',
      { ...METRICS_KNOWN_TYPES, 'service.name': 'VARCHAR', 'http.route': 'VARCHAR', 'http.response.status_code': 'BIGINT', ratio: 'DOUBLE', 'tls.on': 'BOOLEAN', tags: 'VARCHAR[]' },
      [
        'resource_schema_url',
        'scope_name',
        'scope_version',
        'scope_schema_url',
        'metric_name',
        'metric_description',
        'metric_unit',
        'metric_type',
        'metric_metadata',
        'data_point_sum',
        'data_point_explicit_bounds',
        'data_point_flags',
        'is_monotonic',
        'aggregation_temporality',
        'aggregation_temporality_description',
        'data_point_scale',
        'data_point_quantile_values',
        'service.name',
        'http.route',
        'http.response.status_code',
        'ratio',
        'tls.on',
        'tags',
      ],
    ],
    ['server columns are never indexed, whatever their type', { p_timestamp: 'TIMESTAMP', p_format: 'VARCHAR', P_Other: 'VARCHAR', data_point_value: 'DOUBLE' }, []],
    ['non-text columns are, but for the fixed per-sample ones and times', { n: 'BIGINT', d: 'DOUBLE', b: 'BOOLEAN', l: 'VARCHAR[]', is_monotonic: 'BOOLEAN', is_stale_marker: 'BOOLEAN', t: 'TIMESTAMP_NS', data_point_count: 'BIGINT' }, ['n', 'd', 'b', 'l', 'is_monotonic']],
    ['per-sample columns the OTLP mapping reads: only with OTLP points (flags)', { data_point_sum: 'DOUBLE', data_point_scale: 'BIGINT', data_point_quantile_values: 'VARCHAR', data_point_value: 'DOUBLE' }, []],
    ['a label stored under label_<name> is a text column like any other', { label_data_point_value: 'VARCHAR', label_p_x: 'VARCHAR' }, ['label_data_point_value', 'label_p_x']],
    ['empty schema', {}, []],
  ];
  it.each(cases)('%s', (_name, schema, expected) => {
    expect(seriesIndexColumns(schema)).toEqual(expected);
  });

  it('holds every label column the PromQL adapter reads', () => {
    const schema = { ...PROMETHEUS_KNOWN_TYPES, job: 'VARCHAR', label_metric_name: 'VARCHAR', label_p_x: 'VARCHAR', code: 'VARCHAR' };
    const indexed = new Set(seriesIndexColumns(schema));
    for (const { column } of labelColumns(schema, new Set(Object.keys(PROMETHEUS_KNOWN_TYPES)))) expect(indexed.has(column)).toBe(true);
  });

  it.each([
    [{ data_point_value: 'DOUBLE' }, true],
    [{ data_point_scale: 'BIGINT' }, true],
    [{ message: 'VARCHAR', p_timestamp: 'TIMESTAMP' }, false],
  ])('isMetricsSchema(%j) = %s', (schema, expected) => expect(isMetricsSchema(schema)).toBe(expected));
});

describe('indexUsable', () => {
  const cases: [string, { columns: string[]; seriesIndex?: { bytes: number; columns: string[] } }, string[], boolean][] = [
    ['no index', { columns: ['metric_name'] }, ['metric_name'], false],
    ['index with every index column', { columns: ['metric_name', 'job'], seriesIndex: { bytes: 1, columns: ['metric_name', 'job'] } }, ['metric_name', 'job'], true],
    ['a column added after the file was written (NULL in the file and its index)', { columns: ['metric_name'], seriesIndex: { bytes: 1, columns: ['metric_name'] } }, ['metric_name', 'job'], true],
    ['a column of the file that became text later: not in its index', { columns: ['metric_name', 'code'], seriesIndex: { bytes: 1, columns: ['metric_name'] } }, ['metric_name', 'code'], false],
    [
      'an OTLP file indexed before the mapping’s columns were (no flags nor int attribute): not usable',
      { columns: ['metric_name', 'data_point_flags', 'data_point_value', 'code'], seriesIndex: { bytes: 1, columns: ['metric_name'] } },
      seriesIndexColumns({ metric_name: 'VARCHAR', data_point_flags: 'BIGINT', data_point_value: 'DOUBLE', code: 'BIGINT' }),
      false,
    ],
    [
      'an OTLP file indexed with them',
      { columns: ['metric_name', 'data_point_flags', 'data_point_value', 'code'], seriesIndex: { bytes: 1, columns: ['metric_name', 'data_point_flags', 'code'] } },
      seriesIndexColumns({ metric_name: 'VARCHAR', data_point_flags: 'BIGINT', data_point_value: 'DOUBLE', code: 'BIGINT' }),
      true,
    ],
    [
      'a remote-write file (no flags) in a dataset that later got OTLP points: its old index still serves',
      { columns: ['metric_name', 'data_point_value', 'job'], seriesIndex: { bytes: 1, columns: ['metric_name', 'job'] } },
      seriesIndexColumns({ metric_name: 'VARCHAR', data_point_value: 'DOUBLE', job: 'VARCHAR', data_point_flags: 'BIGINT' }),
      true,
    ],
  ];
  it.each(cases)('%s', (_name, f, columns, expected) => expect(indexUsable(f, columns)).toBe(expected));
});

describe('series index keys', () => {
  it.each([
    'm/date=2026-01-01/hour=00/minute=05/abc.node1.000000000012_0.parquet',
    'm/date=2026-01-01/hour=00/abc.node1.000000000013.compacted.parquet',
  ])('%s: beside the file, same generation and node, never taken for data', (key) => {
    const idx = seriesIndexKey(key);
    expect(idx.endsWith('.parquet')).toBe(false);
    expect(parseKey(idx)).toEqual({ ...parseKey(key), role: 'series-index' });
    expect(parseKey(key)?.role).toBe('data');
  });
});

describe('the series relation: index or file, the same tuples', () => {
  let dir: string;
  let instance: DuckDBInstance;
  const schema: Record<string, ColumnType> = { metric_name: 'VARCHAR', job: 'VARCHAR', time_unix_nano: 'TIMESTAMP_NS', data_point_value: 'DOUBLE', data_point_exemplars: 'VARCHAR' };
  const columns = Object.entries(schema) as [string, ColumnType][];
  const files: { path: string; columns: string[]; seriesIndex: { bytes: number; columns: string[] } }[] = [];

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'series-index-'));
    instance = await DuckDBInstance.create(':memory:');
    const conn = await instance.connect();
    // Two files: `up{job=a}` in both, `down` only in the first, with an older file that lacks `job`.
    const rows = [
      `('up', 'a', TIMESTAMP_NS '2026-01-01 00:00:00', 1.0, 'ex1'), ('up', 'a', TIMESTAMP_NS '2026-01-01 00:00:30', 2.0, 'ex2'), ('down', 'b', TIMESTAMP_NS '2026-01-01 00:00:15', 3.0, NULL)`,
      `('up', 'a', TIMESTAMP_NS '2026-01-01 00:01:00', 4.0, NULL), ('up', 'c', TIMESTAMP_NS '2026-01-01 00:01:45', 5.0, NULL)`,
    ];
    for (const [i, values] of rows.entries()) {
      const file = path.join(dir, `f${i}.parquet`);
      await conn.run(`COPY (SELECT * FROM (VALUES ${values}) t(metric_name, job, time_unix_nano, data_point_value, data_point_exemplars)) TO '${file}' (FORMAT parquet)`);
      const seriesIndex = await writeSeriesIndex(instance, { dataPath: file, columns, timeColumn: 'time_unix_nano', target: `${file}.series`, zstdLevel: 3 });
      files.push({ path: file, columns: columns.map(([n]) => n), seriesIndex });
    }
    const old = path.join(dir, 'old.parquet');
    await conn.run(`COPY (SELECT 'up' AS metric_name, TIMESTAMP_NS '2026-01-01 00:00:05' AS time_unix_nano, 1.0 AS data_point_value) TO '${old}' (FORMAT parquet)`);
    const oldColumns: [string, ColumnType][] = [['metric_name', 'VARCHAR'], ['time_unix_nano', 'TIMESTAMP_NS'], ['data_point_value', 'DOUBLE']];
    files.push({ path: old, columns: ['metric_name', 'time_unix_nano', 'data_point_value'], seriesIndex: await writeSeriesIndex(instance, { dataPath: old, columns: oldColumns, timeColumn: 'time_unix_nano', target: `${old}.series`, zstdLevel: 3 }) });
    conn.closeSync();
  });
  afterAll(async () => {
    instance?.closeSync();
    await fs.rm(dir, { recursive: true, force: true });
  });

  const read = async (useIndex: boolean[]) => {
    const sql = seriesRelationSql(
      { schema, timeColumn: 'time_unix_nano', files: files.map((f, i) => ({ ...f, path: useIndex[i] ? `${f.path}.series` : f.path, index: useIndex[i] })), segments: [] },
      0,
      Date.parse('2030-01-01T00:00:00Z'),
    );
    const conn = await instance.connect();
    try {
      const rows = (await conn.runAndReadAll(`SELECT metric_name, job, epoch_ms(p_min_time) AS lo, epoch_ms(p_max_time) AS hi, p_rows FROM (${sql}) ORDER BY ALL`)).getRowsJS();
      return rows.map((r) => r.map((v) => (typeof v === 'bigint' ? Number(v) : v)));
    } finally {
      conn.closeSync();
    }
  };

  it('holds the index columns only (no per-sample text), one tuple per label set and file', async () => {
    expect(files[0].seriesIndex.columns).toEqual(['metric_name', 'job']);
    const t = Date.parse('2026-01-01T00:00:00Z');
    expect(await read([true, true, true])).toEqual([
      ['down', 'b', t + 15_000, t + 15_000, 1],
      ['up', 'a', t, t + 30_000, 2],
      ['up', 'a', t + 60_000, t + 60_000, 1],
      ['up', 'c', t + 105_000, t + 105_000, 1],
      ['up', null, t + 5_000, t + 5_000, 1],
    ]);
  });

  it.each([
    [[false, false, false]],
    [[true, false, true]],
    [[false, true, false]],
  ])('reads the same tuples whichever files are read through their index (%j)', async (useIndex) => {
    expect(await read(useIndex)).toEqual(await read([true, true, true]));
  });
});
