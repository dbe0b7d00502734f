import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkRange, parseDurationParam, parsePromDuration, parseTime, PromqlParamError } from '../../src/http/promqlParams.ts';
import { encodeSeries, labelColumns, matcherSql, seriesSql, type Matcher } from '../../src/query/promqlStorage.ts';

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

    it('selects a series with its samples in time order, staleness flagged', async () => {
      await conn.run(`CREATE TABLE m AS SELECT * FROM (VALUES
        ('up', 'a', TIMESTAMP_NS '2026-01-01 00:00:30', 2.0, false),
        ('up', 'a', TIMESTAMP_NS '2026-01-01 00:00:00', 0.1, false),
        ('up', 'a', TIMESTAMP_NS '2026-01-01 00:01:00', 'nan'::DOUBLE, true),
        ('up', 'b', TIMESTAMP_NS '2026-01-01 00:00:00', 5.0, false),
        ('down', 'a', TIMESTAMP_NS '2026-01-01 00:00:00', 1.0, false)) t(metric_name, job, time_unix_nano, data_point_value, is_stale_marker)`);
      const labels = [
        { label: '__name__', column: 'metric_name' },
        { label: 'job', column: 'job' },
      ];
      const t0 = Date.parse('2026-01-01T00:00:00Z');
      const sql = seriesSql('m', 'time_unix_nano', true, labels, { matchers: [{ type: '=', name: '__name__', value: 'up' }, { type: '=', name: 'job', value: 'a' }], start: t0, end: t0 + 60_000, labelsOnly: false });
      const rows = (await conn.runAndReadAll(sql)).getRowsJS() as string[][];
      expect(rows.map((r) => r.slice(0, 2))).toEqual([['up', 'a']]);
      // One line per sample (the engine's side sorts them): time, value, staleness flag.
      expect(rows[0][2].split('\n').sort()).toEqual([`${t0 + 30_000} 2.0 0`, `${t0 + 60_000} nan 1`, `${t0} 0.1 0`].sort());
      // Label sets only: from the series relation (one row per label set, with its time span).
      await conn.run(`CREATE VIEW m_series AS SELECT metric_name, job, min(time_unix_nano) AS p_min_time, max(time_unix_nano) AS p_max_time, count(*) AS p_rows FROM m GROUP BY ALL`);
      const before = seriesSql('m_series', 'time_unix_nano', true, labels, { matchers: [], start: t0, end: t0 + 59_999, labelsOnly: true });
      expect((await conn.runAndReadAll(`${before} ORDER BY ALL`)).getRowsJS()).toEqual([
        ['down', 'a'],
        ['up', 'a'],
        ['up', 'b'],
      ]);
      // A label set counts when its span touches the range: `down` ended at t0, `up,b` too.
      const after = seriesSql('m_series', 'time_unix_nano', true, labels, { matchers: [{ type: '=', name: '__name__', value: 'up' }], start: t0 + 1, end: t0 + 90_000, labelsOnly: true });
      expect((await conn.runAndReadAll(`${after} ORDER BY ALL`)).getRowsJS()).toEqual([['up', 'a']]);
    });
  });

  it('encodes series for the engine: labels without empty values, then the samples text', () => {
    const buf = encodeSeries(['__name__', 'job'], [{ values: ['up', null], samples: '2 nan 1\n1 0.5 0' }]);
    const dv = new DataView(buf.buffer);
    const text = new TextDecoder();
    let off = 0;
    const u32 = () => ((off += 4), dv.getUint32(off - 4, true));
    const str = () => {
      const n = u32();
      off += n;
      return text.decode(buf.subarray(off - n, off));
    };
    expect(u32()).toBe(1);
    expect(u32()).toBe(1);
    expect([str(), str()]).toEqual(['__name__', 'up']);
    expect(str()).toEqual('2 nan 1\n1 0.5 0');
    expect(off).toBe(buf.length);
  });
});
