import { DuckDBInstance, type DuckDBMaterializedResult } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkRange, parseDurationParam, parsePromDuration, parseTime, PromqlParamError } from '../../src/doors/http/prometheus/promqlParams.ts';
import { encodeSeries, labelColumns, matcherSql, seriesSql, type Matcher } from '../../src/query/promql/storage.ts';

describe('Prometheus API parameters', () => {
  it.each([
    ['1767225600', 1767225600000],
    ['1767225600.123', 1767225600123],
    ['1767225600.1235', 1767225600124],
    ['-1.5', -1500],
    ['2026-01-01T00:00:00Z', 1767225600000],
    ['2026-01-01T01:00:00.5+01:00', 1767225600500],
  ])('time %s → %i ms', (text, ms) => {
    expect(parseTime(text, 'time')).toBe(ms);
  });

  it.each(['yesterday', '2026-01-01', '1e400x', ''])('time %j is bad_data (or the fallback when empty)', (text) => {
    if (text === '') expect(parseTime(text, 'time', 42)).toBe(42);
    else expect(() => parseTime(text, 'time')).toThrow(PromqlParamError);
  });

  it.each([
    ['15s', 15_000],
    ['1h30m', 5_400_000],
    ['1d', 86_400_000],
    ['100ms', 100],
    ['2w', 1_209_600_000],
    ['0', 0],
  ])('duration %s → %i ms', (text, ms) => {
    expect(parsePromDuration(text)).toBe(ms);
  });

  it.each(['30m1h', '1h1h', '5', 'm', '1.5h', '5x'])('duration %j is not a Prometheus duration', (text) => {
    expect(parsePromDuration(text)).toBeUndefined();
  });

  it('takes seconds or a duration as a step, and checks ranges with Prometheus wording', () => {
    expect(parseDurationParam('15', 'step')).toBe(15_000);
    expect(parseDurationParam('0.5', 'step')).toBe(500);
    expect(parseDurationParam('1m', 'step')).toBe(60_000);
    expect(() => parseDurationParam('soon', 'step')).toThrow('cannot parse "soon" to a valid duration');
    expect(() => checkRange(10, 0, 1)).toThrow('end timestamp must not be before start time');
    expect(() => checkRange(0, 10, 0)).toThrow('zero or negative query resolution step widths are not accepted');
    expect(() => checkRange(0, 11_001_000, 1000)).toThrow('exceeded maximum resolution of 11,000 points');
    expect(() => checkRange(0, 11_000_000, 1000)).not.toThrow();
  });
});

describe('PromQL storage adapter', () => {
  it('maps a metrics schema to labels: metric_name is __name__, fixed and p_ columns are not labels, label_ prefixes come off', () => {
    const fixed = new Set(['metric_name', 'time_unix_nano', 'data_point_value', 'metric_type', 'is_stale_marker']);
    const schema = { metric_name: 'VARCHAR', job: 'VARCHAR', metric_type: 'VARCHAR', label_metric_type: 'VARCHAR', label_foo: 'VARCHAR', p_timestamp: 'TIMESTAMP', label_p_x: 'VARCHAR', data_point_value: 'DOUBLE', code_utf8: 'VARCHAR', n: 'BIGINT' };
    expect(labelColumns(schema, fixed)).toEqual([
      { label: '__name__', column: 'metric_name' },
      { label: 'job', column: 'job' },
      { label: 'metric_type', column: 'label_metric_type' },
      { label: 'label_foo', column: 'label_foo' },
      { label: 'p_x', column: 'label_p_x' },
      { label: 'code_utf8', column: 'code_utf8' },
    ]);
  });

  describe('matchers pushed down to DuckDB keep every row Prometheus would select', () => {
    let conn: Awaited<ReturnType<DuckDBInstance['connect']>>;
    beforeAll(async () => {
      conn = await (await DuckDBInstance.create(':memory:')).connect();
    });
    afterAll(() => conn.closeSync());

    // Rows: a label's value (NULL: absent). Expected: which rows Prometheus' matcher selects.
    const values = ['api', 'API', '', null, 'a\nb', 'web-1'];
    const cases: [Matcher, boolean[]][] = [
      [{ type: '=', name: 'l', value: 'api' }, [true, false, false, false, false, false]],
      [{ type: '=', name: 'l', value: '' }, [false, false, true, true, false, false]],
      [{ type: '!=', name: 'l', value: '' }, [true, true, false, false, true, true]],
      [{ type: '!=', name: 'l', value: 'api' }, [false, true, true, true, true, true]],
      [{ type: '=~', name: 'l', value: 'ap.' }, [true, false, false, false, false, false]],
      [{ type: '=~', name: 'l', value: '(?i)ap.' }, [true, true, false, false, false, false]],
      [{ type: '=~', name: 'l', value: 'a.b' }, [false, false, false, false, true, false]],
      [{ type: '=~', name: 'l', value: '.*' }, [true, true, true, true, true, true]],
      [{ type: '=~', name: 'l', value: 'web-[0-9]+|api' }, [true, false, false, false, false, true]],
      [{ type: '!~', name: 'l', value: '.+' }, [false, false, true, true, false, false]],
    ];
    it.each(cases)('%j', async (m, expected) => {
      const sql = `SELECT ${matcherSql(m, 'l', true)} AS ok FROM (VALUES ${values.map((v) => `(${v === null ? 'NULL' : `'${v}'`})`).join(', ')}) t(l)`;
      const rows = (await conn.runAndReadAll(sql)).getRowsJS().map((r) => r[0]);
      expect(rows).toEqual(expected);
    });

    it('a label no column holds is the empty value', () => {
      expect(matcherSql({ type: '=', name: 'x', value: '' }, undefined, true)).toBe(`'' = ''`);
      expect(matcherSql({ type: '=~', name: 'x', value: '.+' }, undefined, false)).toBeUndefined();
    });

    it('selects a series with its samples, staleness flagged, encoded for the engine', async () => {
      await conn.run(`CREATE TABLE m AS SELECT * FROM (VALUES
        ('up', 'a', TIMESTAMP_NS '2026-01-01 00:00:30', 2.0, false),
        ('up', 'a', TIMESTAMP_NS '2026-01-01 00:00:00', 0.1, false),
        ('up', 'a', TIMESTAMP_NS '2026-01-01 00:01:00', 'nan'::DOUBLE, true),
        ('up', 'a', TIMESTAMP_NS '2026-01-01 00:01:15', NULL, true),
        ('up', 'b', TIMESTAMP_NS '2026-01-01 00:00:00', 5.0, false),
        ('up', '', TIMESTAMP_NS '2026-01-01 00:00:00', 6.0, false),
        ('down', 'a', TIMESTAMP_NS '2026-01-01 00:00:00', 1.0, false)) t(metric_name, job, time_unix_nano, data_point_value, is_stale_marker)`);
      const labels = [
        { label: '__name__', column: 'metric_name' },
        { label: 'job', column: 'job' },
      ];
      const t0 = Date.parse('2026-01-01T00:00:00Z');
      const read = async (req: Parameters<typeof seriesSql>[4]) =>
        decode(encodeSeries(['__name__', 'job'], (await conn.run(seriesSql('m', 'time_unix_nano', true, labels, req))) as DuckDBMaterializedResult, req.labelsOnly));
      const up = await read({ matchers: [{ type: '=', name: '__name__', value: 'up' }, { type: '!=', name: 'job', value: 'b' }], start: t0, end: t0 + 75_000, labelsOnly: false });
      const byJob = Object.fromEntries(up.map((s) => [JSON.stringify(s.labels), s.samples.sort((x, y) => x[0] - y[0])]));
      // An empty label is absent; a staleness marker is kind 1 (its value NaN: the engine makes it StaleNaN).
      expect(byJob).toEqual({
        [JSON.stringify([['__name__', 'up'], ['job', 'a']])]: [
          [t0, 0.1, 0],
          [t0 + 30_000, 2, 0],
          [t0 + 60_000, NaN, 1],
          [t0 + 75_000, NaN, 1],
        ],
        [JSON.stringify([['__name__', 'up']])]: [[t0, 6, 0]],
      });
      // Label sets only: from the series relation (one row per label set, with its time span), no samples.
      await conn.run(`CREATE VIEW m_series AS SELECT metric_name, job, min(time_unix_nano) AS p_min_time, max(time_unix_nano) AS p_max_time, count(*) AS p_rows FROM m GROUP BY ALL`);
      const labelSets = async (req: Parameters<typeof seriesSql>[4]) =>
        decode(encodeSeries(['__name__', 'job'], (await conn.run(seriesSql('m_series', 'time_unix_nano', true, labels, req))) as DuckDBMaterializedResult, true));
      const before = await labelSets({ matchers: [], start: t0, end: t0 + 59_999, labelsOnly: true });
      expect(before.map((s) => JSON.stringify(s.labels)).sort()).toEqual(
        [[['__name__', 'down'], ['job', 'a']], [['__name__', 'up']], [['__name__', 'up'], ['job', 'a']], [['__name__', 'up'], ['job', 'b']]].map((l) => JSON.stringify(l)).sort(),
      );
      expect(before.every((s) => s.samples.length === 0)).toBe(true);
      // A label set counts when its span touches the range: `up,b` and `up` without a job ended at t0.
      const after = await labelSets({ matchers: [{ type: '=', name: '__name__', value: 'up' }], start: t0 + 1, end: t0 + 90_000, labelsOnly: true });
      expect(after.map((s) => s.labels)).toEqual([[['__name__', 'up'], ['job', 'a']]]);
    });

    it('encodes a native histogram sample as kind 2 with its columns as JSON, its sum as the value', async () => {
      await conn.run(`CREATE TABLE h AS SELECT * FROM (VALUES
        ('rpc', TIMESTAMP_NS '2026-01-01 00:00:00', NULL::DOUBLE, 3, 12.5::DOUBLE, '[{"offset":0,"length":1}]', [3]::BIGINT[], false),
        ('rpc', TIMESTAMP_NS '2026-01-01 00:00:15', 1.5::DOUBLE, NULL, NULL::DOUBLE, NULL, NULL::BIGINT[], false)) t(metric_name, time_unix_nano, data_point_value, data_point_scale, data_point_sum, data_point_positive_spans, data_point_positive_deltas, is_stale_marker)`);
      const labels = [{ label: '__name__', column: 'metric_name' }];
      const t0 = Date.parse('2026-01-01T00:00:00Z');
      const sql = seriesSql('h', 'time_unix_nano', true, labels, { matchers: [], start: t0, end: t0 + 15_000, labelsOnly: false }, true, ['data_point_scale', 'data_point_sum', 'data_point_positive_spans', 'data_point_positive_deltas']);
      const [s] = decode(encodeSeries(['__name__'], (await conn.run(sql)) as DuckDBMaterializedResult, false));
      expect(s.samples.sort((x, y) => x[0] - y[0])).toEqual([
        [t0, 12.5, 2],
        [t0 + 15_000, 1.5, 0],
      ]);
      expect(JSON.parse(s.histograms[0])).toMatchObject({ schema: 3, ps: [{ offset: 0, length: 1 }], pd: [3] });
    });
  });

});

/** promql/engine.go decodeSeries, in TypeScript: what the engine reads from encodeSeries' parts. */
function decode(parts: Uint8Array[]) {
  const buf = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
  let at = 0;
  for (const p of parts) {
    buf.set(p, at);
    at += p.length;
  }
  const dv = new DataView(buf.buffer);
  const text = new TextDecoder();
  let off = 0;
  const u32 = () => ((off += 4), dv.getUint32(off - 4, true));
  const str = () => {
    const n = u32();
    off += n;
    return text.decode(buf.subarray(off - n, off));
  };
  const out: { labels: [string, string][]; samples: [number, number, number][]; histograms: string[] }[] = [];
  for (let i = u32(); i > 0; i--) {
    const labels: [string, string][] = [];
    for (let j = u32(); j > 0; j--) labels.push([str(), str()]);
    const n = u32();
    const samples: [number, number, number][] = [];
    for (let k = 0; k < n; k++) samples.push([Number(dv.getBigInt64(off + 8 * k, true)), dv.getFloat64(off + 8 * n + 8 * k, true), buf[off + 16 * n + k]]);
    off += 17 * n;
    const histograms = samples.filter((x) => x[2] === 2).map(() => str());
    out.push({ labels, samples, histograms });
  }
  expect(off).toBe(buf.length);
  return out;
}
