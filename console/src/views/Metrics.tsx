import { useEffect, useMemo, useState } from 'preact/hooks';
import type uPlot from 'uplot';
import { useSession } from '../lib/store.ts';
import { navigate } from '../lib/route.ts';
import { ident, literal } from '../lib/sql.ts';
import { autoBucketSeconds, parseTimestamp, resolveRange, type TimeRange } from '../lib/time.ts';
import { aggregationFor, computeLines, isLabelColumn, type Aggregation, type Lines, type MetricPoint } from '../lib/metrics.ts';
import { DatasetSelect } from '../components/DatasetSelect.tsx';
import { TimeRangePicker } from '../components/TimeRangePicker.tsx';
import { Chart, themeColors, timeAxisValues } from '../components/Chart.tsx';

interface MetricInfo {
  name: string;
  type: string | null;
  monotonic: boolean | null;
  unit: string | null;
  points: number;
}

const AGG_LABEL: Record<Aggregation, string> = { avg: 'average', rate: 'rate per second', quantile: 'quantile', mean: 'mean (sum / count)' };
const MAX_POINTS = 100_000;

export function Metrics({ params, theme }: { params: Record<string, string>; theme: string }) {
  const s = useSession();
  const sets = s.datasets.filter((d) => d.kind === 'otel-metrics');
  const dataset = params.dataset && s.kindOf(params.dataset) === 'otel-metrics' ? params.dataset : sets[0]?.name ?? '';
  const range: TimeRange = { from: params.from ?? '1h', to: params.to ?? 'now' };
  const [metrics, setMetrics] = useState<MetricInfo[]>([]);
  const [labels, setLabels] = useState<string[]>([]);
  const [columns, setColumns] = useState<Set<string>>(new Set());
  const [lines, setLines] = useState<Lines | null>(null);
  const [error, setError] = useState('');
  const metric = metrics.find((m) => m.name === params.metric) ?? metrics[0];
  const group = params.by && labels.includes(params.by) ? params.by : '';
  const quantile = Number(params.q ?? '0.9');
  const agg = metric ? aggregationFor(metric.type, metric.monotonic, metric.name) : 'avg';

  const go = (p: Record<string, string | undefined>) => navigate('metrics', { dataset, from: range.from, to: range.to, metric: metric?.name, by: group || undefined, q: params.q, ...p }, true);
  const bounds = () => resolveRange(range);
  const req = () => {
    const b = bounds();
    return { startTime: new Date(b.startMs).toISOString(), endTime: new Date(b.endMs).toISOString() };
  };

  useEffect(() => {
    if (!dataset) return;
    s.schema(dataset).then(async (sc) => {
      const cols = new Set(sc.fields.map((f) => f.name));
      setColumns(cols);
      setLabels(sc.fields.map((f) => f.name).filter(isLabelColumn));
      const col = (c: string, fallback = 'NULL') => (cols.has(c) ? c : fallback);
      const { records } = await s.api.query({
        query: `SELECT metric_name AS name, any_value(${col('metric_type')}) AS type, bool_or(${col('is_monotonic', 'false')}) AS monotonic,
  any_value(${col('metric_unit')}) AS unit, count(*) AS points FROM ${ident(dataset)} GROUP BY 1 ORDER BY 1`,
        ...req(),
      });
      setMetrics(records.map((r) => ({ name: String(r.name), type: (r.type as string) ?? null, monotonic: (r.monotonic as boolean) ?? null, unit: (r.unit as string) ?? null, points: Number(r.points) })));
    }).catch((e) => setError((e as Error).message));
  }, [dataset, range.from, range.to]);

  useEffect(() => {
    if (!metric) return;
    const ctl = new AbortController();
    const has = (c: string) => columns.has(c);
    const labelCols = labels.map(ident);
    const pick = (c: string, as: string) => `${has(c) ? c : 'NULL'} AS ${as}`;
    const query = `SELECT time_unix_nano AS t, ${labelCols.length ? `concat_ws('|', ${labelCols.map((c) => `${c}::VARCHAR`).join(', ')})` : "''"} AS series,
  ${group ? `${ident(group)}::VARCHAR` : "''"} AS grp, ${pick('data_point_value', 'v')}, ${pick('data_point_sum', 'sum')}, ${pick('data_point_count', 'cnt')},
  ${pick('data_point_bucket_counts', 'buckets')}, ${pick('data_point_explicit_bounds', 'bounds')}, ${pick('aggregation_temporality', 'temporality')}
FROM ${ident(dataset)} WHERE metric_name = ${literal(metric.name)} ORDER BY t LIMIT ${MAX_POINTS}`;
    setError('');
    setLines(null);
    s.api.query({ query, ...req() }, ctl.signal).then(
      ({ records }) => {
        const points: MetricPoint[] = records.map((r) => ({
          t: parseTimestamp(r.t) ?? 0,
          series: String(r.series ?? ''),
          group: r.grp === null || r.grp === undefined ? '' : String(r.grp),
          value: typeof r.v === 'number' ? r.v : null,
          sum: typeof r.sum === 'number' ? r.sum : null,
          count: typeof r.cnt === 'number' ? r.cnt : null,
          bucketCounts: Array.isArray(r.buckets) ? (r.buckets as unknown[]).map(Number) : null,
          bounds: Array.isArray(r.bounds) ? (r.bounds as unknown[]).map(Number) : null,
          temporality: typeof r.temporality === 'number' ? r.temporality : null,
        }));
        const b = bounds();
        setLines(computeLines(points, agg, autoBucketSeconds(b.startMs, b.endMs, 120), b.startMs, b.endMs, quantile));
      },
      (e) => !ctl.signal.aborted && setError((e as Error).message),
    );
    return () => ctl.abort();
  }, [metric?.name, group, quantile, range.from, range.to, labels]);

  const data = useMemo<uPlot.AlignedData>(() => (lines ? [lines.times, ...lines.series.map((x) => x.values)] : [[]]), [lines]);
  const shape = `${theme}:${lines?.series.map((x) => x.label).join(',')}`;
  const options = () => {
    const c = themeColors();
    return {
      height: 320,
      scales: { x: { time: true } },
      axes: [
        { stroke: c.text, grid: { stroke: c.grid, width: 1 }, ticks: { stroke: c.grid }, values: timeAxisValues },
        { stroke: c.text, grid: { stroke: c.grid, width: 1 }, ticks: { stroke: c.grid }, size: 60 },
      ],
      series: [{}, ...(lines?.series ?? []).map((x, i) => ({ label: x.label, stroke: c.palette[i % c.palette.length], width: 2, spanGaps: true, points: { size: 4 } }))],
    };
  };

  if (!dataset) return <section class="page"><h1>Metrics</h1><p>No <code>otel-metrics</code> dataset yet. Send OTLP metrics to <code>{location.origin}/v1/metrics</code> or point Prometheus remote write at <code>{location.origin}/v1/prometheus/write</code>.</p></section>;

  return (
    <section class="page metrics">
      <div class="toolbar">
        <DatasetSelect value={dataset} kinds={['otel-metrics']} onChange={(d) => navigate('metrics', { dataset: d, from: range.from, to: range.to })} />
        <TimeRangePicker value={range} onChange={(r) => go({ from: r.from, to: r.to })} />
      </div>
      <div class="toolbar">
        <span class="field grow">
          <label for="metric-name">Metric</label>
          <select id="metric-name" value={metric?.name ?? ''} onChange={(e) => go({ metric: (e.target as HTMLSelectElement).value })} data-testid="metric-select">
            {metrics.map((m) => (
              <option key={m.name} value={m.name}>
                {m.name} ({m.type ?? 'untyped'}, {m.points} points)
              </option>
            ))}
          </select>
        </span>
        <span class="field">
          <label for="metric-group">Group by</label>
          <select id="metric-group" value={group} onChange={(e) => go({ by: (e.target as HTMLSelectElement).value || undefined })}>
            <option value="">(none)</option>
            {labels.map((l) => <option key={l}>{l}</option>)}
          </select>
        </span>
        {agg === 'quantile' && (
          <span class="field">
            <label for="metric-q">Quantile</label>
            <select id="metric-q" value={String(quantile)} onChange={(e) => go({ q: (e.target as HTMLSelectElement).value })}>
              {['0.5', '0.9', '0.95', '0.99'].map((q) => <option key={q} value={q}>p{Number(q) * 100}</option>)}
            </select>
          </span>
        )}
      </div>
      {error && <pre class="error" role="alert">{error}</pre>}
      {metric && (
        <p class="muted" data-testid="metric-desc">
          <strong>{metric.name}</strong> {metric.unit ? `(${metric.unit}) ` : ''}— {metric.type ?? 'untyped'}{metric.monotonic ? ', monotonic' : ''}: showing the{' '}
          {agg === 'quantile' ? `p${quantile * 100}` : AGG_LABEL[agg]}
          {group ? ` by ${group}` : ''}.
        </p>
      )}
      {metrics.length === 0 && !error && <p class="muted">No metric points in this time range.</p>}
      {lines && lines.series.length > 0 && <Chart options={options} data={data} shapeKey={shape} label={`Chart of ${metric?.name}`} testId="metric-chart" />}
      {lines && lines.series.length === 0 && <p class="muted">No points to draw for this metric.</p>}
    </section>
  );
}
