import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import type uPlot from 'uplot';
import { useSession, type Session } from '../lib/store.ts';
import { navigate } from '../lib/route.ts';
import { autoBucketSeconds, formatBucket, parseTimestamp, resolveRange, type TimeRange } from '../lib/time.ts';
import { computeLines, seriesColors, type Lines } from '../lib/metrics.ts';
import {
  aggregationOf, catalogSql, chartLanguage, isLabelColumn, KIND_LABEL, labelsOf, labelsSql, linesFromRange, metricKind, metricPromql, pointsSql, queryRangeParams, toMetricInfo, toPoints,
  withFamilyMetadata, type FamilyMetadata, type MetricInfo, type PromRangeData,
} from '../lib/metricsQuery.ts';
import { DatasetSelect } from '../components/DatasetSelect.tsx';
import { TimeRangePicker } from '../components/TimeRangePicker.tsx';
import { Chart, themeColors, timeAxisValues } from '../components/Chart.tsx';
import { Legend } from '../components/Legend.tsx';

const MAX_POINTS = 100_000;
/** Series drawn by default; the others are a click away in the legend. */
const TOP_SERIES = 10;

const fmt = (v: number) => (Math.abs(v) >= 1000 || v === 0 ? v.toLocaleString('en-US', { maximumFractionDigits: 0 }) : v.toPrecision(3));

interface MetricCatalog {
  dataset: string;
  columns: Set<string>;
  allLabels: string[];
  metrics: MetricInfo[];
}
const NONE: Omit<MetricCatalog, 'dataset'> = { columns: new Set(), allLabels: [], metrics: [] };

/**
 * What is known of the shown dataset (its columns, label columns, metrics), set in one step once all of
 * it is in, and given out only while that dataset is shown: after a switch nothing of the previous
 * dataset's (a metric name, its labels) is queried against the new one — that query could only fail.
 */
function useMetricCatalog(dataset: string, range: TimeRange, setError: (e: string) => void): Omit<MetricCatalog, 'dataset'> {
  const s = useSession();
  const [catalog, setCatalog] = useState<MetricCatalog | null>(null);
  useEffect(() => {
    if (!dataset) return;
    const b = resolveRange(range);
    const req = { startTime: new Date(b.startMs).toISOString(), endTime: new Date(b.endMs).toISOString() };
    s.schema(dataset).then(async (sc) => {
      const cols = new Set(sc.fields.map((f) => f.name));
      // What Prometheus sent as metadata on its own (a server without the endpoint: none).
      const [{ records }, families] = await Promise.all([
        s.api.query({ query: catalogSql(dataset, (c) => cols.has(c)), ...req }),
        s.api.json<FamilyMetadata>(`/api/v1/logstream/${encodeURIComponent(dataset)}/metric-metadata`).catch((): FamilyMetadata => ({})),
      ]);
      const metrics = records.map((r) => withFamilyMetadata(toMetricInfo(r), families));
      setCatalog({ dataset, columns: cols, allLabels: sc.fields.map((f) => f.name).filter(isLabelColumn), metrics });
    }).catch((e) => setError((e as Error).message));
  }, [dataset, range.from, range.to]);
  return catalog?.dataset === dataset ? catalog : NONE;
}

/** The chosen metric's own labels in this range; null until known for this dataset and metric. */
function useMetricLabels(dataset: string, metric: MetricInfo | undefined, allLabels: string[], range: TimeRange, setError: (e: string) => void) {
  const s = useSession();
  const [labelState, setLabels] = useState<{ dataset: string; metric: string; list: string[] } | null>(null);
  useEffect(() => {
    if (!metric) return;
    if (!allLabels.length) return setLabels({ dataset, metric: metric.name, list: [] });
    const ctl = new AbortController();
    s.api.query({ query: labelsSql(dataset, metric.name, allLabels), ...rangeReq(range) }, ctl.signal).then(
      ({ records }) => setLabels({ dataset, metric: metric.name, list: labelsOf(records[0], allLabels) }),
      (e) => !ctl.signal.aborted && setError((e as Error).message),
    );
    return () => ctl.abort();
  }, [dataset, metric?.name, allLabels, range.from, range.to]);
  return labelState && labelState.dataset === dataset && labelState.metric === metric?.name ? labelState : null;
}

const rangeReq = (range: TimeRange) => {
  const b = resolveRange(range);
  return { startTime: new Date(b.startMs).toISOString(), endTime: new Date(b.endMs).toISOString() };
};

interface Ran {
  language: 'promql' | 'sql';
  text: string;
  step: number;
}

interface Chosen {
  dataset: string;
  metric?: MetricInfo;
  labels: { list: string[] } | null;
  kind: ReturnType<typeof metricKind>;
  group: string;
  quantile: number;
  expression: string;
  columns: Set<string>;
}

/**
 * The lines to draw: a remote-write dataset's chart is PromQL (the typed expression, or the metric's own
 * query); an OTLP one's is SQL points and the console's line maths.
 */
function useMetricLines(c: Chosen, range: TimeRange, setError: (e: string) => void) {
  const s = useSession();
  const [lines, setLines] = useState<Lines | null>(null);
  const [ran, setRan] = useState<Ran | null>(null);
  const { dataset, metric, labels, kind, group, quantile, expression, columns } = c;
  useEffect(() => {
    if (!expression && (!metric || !labels)) return;
    const ctl = new AbortController();
    setError('');
    setLines(null);
    const b = resolveRange(range);
    const step = autoBucketSeconds(b.startMs, b.endMs, 120);
    const failed = (e: unknown) => !ctl.signal.aborted && setError((e as Error).message);
    const promql = expression || (metric && chartLanguage((col) => columns.has(col)) === 'promql' ? metricPromql(metric.name, kind, group, step, quantile) : null);
    if (promql) {
      setRan({ language: 'promql', text: promql, step });
      const label = expression ? undefined : (m: Record<string, string>) => (group ? m[group] ?? '' : 'all');
      s.api.promqlRange<PromRangeData>(dataset, queryRangeParams(promql, b.startMs, b.endMs, step), ctl.signal).then((data) => setLines(linesFromRange(data, b.startMs, b.endMs, step, label)), failed);
      return () => ctl.abort();
    }
    if (!metric || !labels) return;
    const query = pointsSql(dataset, metric.name, kind, labels.list, group, (col) => columns.has(col), MAX_POINTS);
    setRan({ language: 'sql', text: query, step });
    s.api.query({ query, ...rangeReq(range) }, ctl.signal).then(
      ({ records }) => setLines(computeLines(toPoints(records, kind, parseTimestamp), aggregationOf(kind), step, b.startMs, b.endMs, quantile)),
      failed,
    );
    return () => ctl.abort();
  }, [dataset, metric?.name, labels, group, quantile, range.from, range.to, expression, columns]);
  return { lines, ran };
}

/** The group-by label: the URL's if the metric has it; a summary's quantiles by default. */
function groupOf(by: string | undefined, kind: ReturnType<typeof metricKind>, metricLabels: string[]): string {
  if (by && metricLabels.includes(by)) return by;
  return kind === 'prom-summary' && metricLabels.includes('quantile') && !by ? 'quantile' : '';
}

/** The URL's dataset if it holds metrics, else the first that does ('' for none). */
function metricsDataset(s: Session, named: string | undefined): string {
  if (named && s.kindOf(named) === 'otel-metrics') return named;
  return s.datasets.find((d) => d.kind === 'otel-metrics')?.name ?? '';
}

export function Metrics({ params, theme }: { params: Record<string, string>; theme: string }) {
  const s = useSession();
  const dataset = metricsDataset(s, params.dataset);
  const range: TimeRange = { from: params.from ?? '1h', to: params.to ?? 'now' };
  const [error, setError] = useState('');
  const { metrics, allLabels, columns } = useMetricCatalog(dataset, range, setError);
  // The PromQL box runs the URL's `pq`, so a drawn expression is a link.
  const expression = params.pq ?? '';
  const metric = metrics.find((m) => m.name === params.metric) ?? metrics[0];
  const labels = useMetricLabels(dataset, metric, allLabels, range, setError);
  const kind = metric ? metricKind(metric) : 'gauge';
  const agg = aggregationOf(kind);
  // Group-by offers the chosen metric's own labels (a histogram's `le` is its buckets, not a label).
  const metricLabels = labels ? labels.list.filter((l) => !(kind === 'prom-histogram' && l === 'le')) : [];
  const group = groupOf(params.by, kind, metricLabels);
  const quantile = Number(params.q ?? '0.9');
  const { lines, ran } = useMetricLines({ dataset, metric, labels, kind, group, quantile, expression, columns }, range, setError);

  const go = (p: Record<string, string | undefined>) => navigate('metrics', { dataset, from: range.from, to: range.to, metric: metric?.name ?? params.metric, by: params.by, q: params.q, pq: params.pq, ...p }, true);

  if (!dataset) return <section class="page"><h1>Metrics</h1><p>No <code>otel-metrics</code> dataset yet. Send OTLP metrics to <code>{location.origin}/v1/metrics</code> or point Prometheus remote write at <code>{location.origin}/v1/prometheus/write</code>.</p></section>;

  return (
    <section class="page metrics">
      <div class="toolbar">
        <DatasetSelect value={dataset} kinds={['otel-metrics']} onChange={(d) => navigate('metrics', { dataset: d, from: range.from, to: range.to })} />
        <TimeRangePicker value={range} onChange={(r) => go({ from: r.from, to: r.to })} />
      </div>
      <MetricPickers metrics={metrics} metric={metric} group={group} metricLabels={metricLabels} quantile={agg === 'quantile' ? quantile : undefined} go={go} />
      <PromqlBox expression={expression} go={go} />
      {error && <pre class="error" role="alert" data-testid="metric-error">{error}</pre>}
      <Description expression={expression} ran={ran} metric={metric} kind={kind} quantile={quantile} group={group} />
      {metrics.length === 0 && !expression && !error && <p class="muted">No metric points in this time range.</p>}
      {lines && lines.series.length > 0 && <MetricChart lines={lines} theme={theme} label={`Chart of ${expression || metric?.name}`} />}
      {lines && lines.series.length === 0 && <p class="muted">{NO_SERIES[expression ? 'expression' : 'metric']}</p>}
      {ran && <RanQuery ran={ran} dataset={dataset} />}
    </section>
  );
}

interface PickerProps {
  metrics: MetricInfo[];
  metric?: MetricInfo;
  group: string;
  metricLabels: string[];
  /** The quantile shown, for a histogram; undefined: no quantile picker. */
  quantile?: number;
  go: (p: Record<string, string | undefined>) => void;
}

function MetricPickers({ metrics, metric, group, metricLabels, quantile, go }: PickerProps) {
  return (
    <div class="toolbar">
      <span class="field grow">
        <label for="metric-name">Metric</label>
        <select id="metric-name" value={metric?.name ?? ''} onChange={(e) => go({ metric: (e.target as HTMLSelectElement).value, by: undefined, pq: undefined })} data-testid="metric-select">
          {metrics.map((m) => (
            <option key={m.name} value={m.name}>
              {m.name} ({metricKind(m)}, {m.points} points)
            </option>
          ))}
        </select>
      </span>
      <span class="field">
        <label for="metric-group">Group by</label>
        <select id="metric-group" value={group} onChange={(e) => go({ by: (e.target as HTMLSelectElement).value || undefined })} data-testid="metric-group">
          <option value="">(none)</option>
          {metricLabels.map((l) => <option key={l}>{l}</option>)}
        </select>
      </span>
      {quantile !== undefined && (
        <span class="field">
          <label for="metric-q">Quantile</label>
          <select id="metric-q" value={String(quantile)} onChange={(e) => go({ q: (e.target as HTMLSelectElement).value })}>
            {['0.5', '0.9', '0.95', '0.99'].map((q) => <option key={q} value={q}>p{Number(q) * 100}</option>)}
          </select>
        </span>
      )}
    </div>
  );
}

/** The PromQL box: what is typed; Run puts it in the URL. */
function PromqlBox({ expression, go }: { expression: string; go: (p: Record<string, string | undefined>) => void }) {
  const [draft, setDraft] = useState(expression);
  useEffect(() => setDraft(expression), [expression]);
  return (
    <form
      class="toolbar promql-box"
      onSubmit={(e) => {
        e.preventDefault();
        go({ pq: draft.trim() || undefined });
      }}
    >
      <span class="field grow">
        <label for="metric-promql">PromQL</label>
        <input
          id="metric-promql"
          data-testid="promql-input"
          value={draft}
          spellcheck={false}
          placeholder="any PromQL expression, e.g. sum by (job) (rate(http_requests_total[5m]))"
          onInput={(e) => setDraft((e.target as HTMLInputElement).value)}
        />
      </span>
      <button type="submit" data-testid="promql-run">Run</button>
      {expression && (
        <button type="button" data-testid="promql-clear" onClick={() => go({ pq: undefined })}>
          Back to the metric
        </button>
      )}
    </form>
  );
}

const NO_SERIES = { expression: 'The expression returned no series in this range.', metric: 'No points to draw for this metric.' };

const AGG_TEXT: Record<string, string> = { rate: 'rate per second', mean: 'mean (sum / count)' };

function Description({ expression, ran, metric, ...rest }: { expression: string; ran: Ran | null; metric?: MetricInfo; kind: ReturnType<typeof metricKind>; quantile: number; group: string }) {
  if (expression) {
    return ran?.language === 'promql' ? (
      <p class="muted" data-testid="metric-desc">
        Your PromQL expression, evaluated by the Prometheus query API over this range, one point every {formatBucket(ran.step)}.
      </p>
    ) : null;
  }
  return metric ? <MetricDescription metric={metric} {...rest} /> : null;
}

function MetricDescription({ metric, kind, quantile, group }: { metric: MetricInfo; kind: ReturnType<typeof metricKind>; quantile: number; group: string }) {
  const agg = aggregationOf(kind);
  const typed = metric.typedByMetadata
    ? ` (type ${metric.type} from the remote-write metadata)`
    : metric.type
      ? ` (stored type ${metric.type}${metric.monotonic ? ', monotonic' : ''})`
      : ' (untyped in the data: typed by its name and labels)';
  return (
    <p class="muted" data-testid="metric-desc">
      <strong>{metric.name}</strong> {metric.unit ? `(${metric.unit}) ` : ''}— {KIND_LABEL[kind]}
      {typed}
      : showing the{' '}
      {agg === 'quantile' ? `p${quantile * 100}` : AGG_TEXT[agg] ?? 'average'}
      {group ? ` by ${group}` : ''}.
    </p>
  );
}

function RanQuery({ ran, dataset }: { ran: Ran; dataset: string }) {
  return (
    <details class="ran-query" data-testid="metric-query">
      <summary>Query ({ran.language === 'promql' ? 'PromQL' : 'SQL'})</summary>
      <p class="muted" data-testid="metric-query-how">
        {ran.language === 'promql'
          ? `PromQL, run as query_range on /prometheus/${dataset}/api/v1 over this range, step ${ran.step}s (Prometheus' own engine).`
          : 'SQL: an OTLP metrics dataset is not mapped to PromQL yet, so its points are read with SQL and the lines computed in the console (a remote-write dataset is drawn with PromQL).'}
      </p>
      <pre>{ran.text}</pre>
    </details>
  );
}

/** Series ranked by their mean: the top ones are drawn unless the legend says otherwise. */
function rankSeries(lines: Lines) {
  const means = lines.series.map((x) => {
    const v = x.values.filter((n): n is number => n !== null && Number.isFinite(n));
    return v.length ? v.reduce((a, b) => a + b, 0) / v.length : null;
  });
  const order = means.map((m, i) => ({ m, i })).sort((a, b) => (b.m ?? -Infinity) - (a.m ?? -Infinity));
  const top = new Set(order.slice(0, TOP_SERIES).map((x) => x.i));
  return { means, top };
}

function chartOptions(lines: Lines, colors: string[], isShown: (i: number) => boolean) {
  const c = themeColors();
  return {
    height: 320,
    legend: { show: false },
    focus: { alpha: 0.25 },
    cursor: { focus: { prox: 24 } },
    scales: { x: { time: true } },
    axes: [
      { stroke: c.text, grid: { stroke: c.grid, width: 1 }, ticks: { stroke: c.grid }, values: timeAxisValues },
      { stroke: c.text, grid: { stroke: c.grid, width: 1 }, ticks: { stroke: c.grid }, size: 60 },
    ],
    series: [{}, ...lines.series.map((x, i) => ({ label: x.label, stroke: colors[i], width: 2, spanGaps: true, points: { size: 4 }, show: isShown(i) }))],
  };
}

/** The chart and its legend: the top series drawn, a legend click showing or hiding one until the lines change. */
function MetricChart({ lines, theme, label }: { lines: Lines; theme: string; label: string }) {
  const [showAll, setShowAll] = useState(false);
  const [overrides, setOverrides] = useState<Map<string, boolean>>(new Map());
  useEffect(() => setOverrides(new Map()), [lines]);
  const plot = useRef<uPlot | null>(null);
  const [focused, setFocused] = useState('');
  const data = useMemo<uPlot.AlignedData>(() => [lines.times, ...lines.series.map((x) => x.values)], [lines]);
  const ranked = useMemo(() => rankSeries(lines), [lines]);
  const colors = useMemo(() => seriesColors(themeColors().palette, lines.series.length, theme === 'dark'), [lines, theme]);
  const isShown = (i: number) => overrides.get(lines.series[i].label) ?? (showAll || ranked.top.has(i));
  const shape = `${theme}:${lines.series.map((x) => x.label).join(',')}`;
  // Visibility follows the legend without re-making the chart.
  useEffect(() => {
    const u = plot.current;
    if (!u) return;
    lines.series.forEach((_, i) => u.series[i + 1] && u.series[i + 1].show !== isShown(i) && u.setSeries(i + 1, { show: isShown(i) }));
  }, [showAll, overrides, lines]);
  return (
    <>
      <div data-testid="metric-chart-wrap" data-focused={focused}>
        <Chart options={() => chartOptions(lines, colors, isShown)} data={data} shapeKey={`${shape}:${showAll}`} label={label} testId="metric-chart" onReady={(u) => (plot.current = u)} />
      </div>
      <Legend
        items={lines.series.map((x, i) => ({ label: x.label, color: colors[i], value: ranked.means[i], shown: isShown(i) }))}
        top={TOP_SERIES}
        showAll={showAll}
        onShowAll={(all) => {
          setOverrides(new Map());
          setShowAll(all);
        }}
        onToggle={(i) => setOverrides((o) => new Map(o).set(lines.series[i].label, !isShown(i)))}
        onHover={(i) => {
          plot.current?.setSeries(i === null ? null : i + 1, { focus: true });
          setFocused(i === null ? '' : lines.series[i].label);
        }}
        format={fmt}
      />
    </>
  );
}
