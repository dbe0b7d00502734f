/**
 * Everything the metrics view asks the server, in one place: SQL over the `otel-metrics` dataset
 * (what a metric is, which labels it has), and its lines: PromQL through the Prometheus query API for
 * a remote-write dataset (`chartLanguage`), SQL points drawn by the console's own line maths for an
 * OTLP metrics dataset, which the PromQL API does not map yet.
 */
import { ident, literal } from './sql.ts';
import type { Aggregation, Lines, MetricPoint } from './metrics.ts';

/** How a metric is drawn, decided from what the data says (see `metricKind`). */
export type MetricKind = 'counter' | 'gauge' | 'histogram' | 'prom-histogram' | 'prom-summary' | 'mean';

export interface MetricInfo {
  name: string;
  /** As stored: OTLP's kind (`sum`, `gauge`, `histogram`…) or Prometheus' metadata type (`counter`…), or null. */
  type: string | null;
  monotonic: boolean | null;
  unit: string | null;
  points: number;
  /** Points carrying OTLP explicit bucket counts. */
  otlpBuckets: number;
  /** Points with an `le` label (Prometheus classic histogram buckets) / a `quantile` label (summary). */
  le: number;
  quantile: number;
  /** The type came from the remote-write metadata the dataset remembers, not from the rows. */
  typedByMetadata?: boolean;
}

/**
 * Remote-write metadata the dataset remembers, by metric family (`GET /api/v1/logstream/{name}/metric-metadata`,
 * the `data` shape of Prometheus' `/api/v1/metadata`). Prometheus sends it apart from the samples, so
 * its rows mostly carry no type.
 */
export type FamilyMetadata = Record<string, { type: string; help: string; unit: string }[]>;

/**
 * A series name's family metadata: the name itself (Prometheus' text format names a counter's family
 * with its `_total`), else the name without a histogram's, summary's or OpenMetrics counter's suffix.
 */
export function familyOf(name: string, families: FamilyMetadata): { type: string; help: string; unit: string } | undefined {
  const exact = families[name]?.[0];
  if (exact) return exact;
  const m = /^(.*)_(bucket|sum|count|total|created|info)$/.exec(name);
  return m ? families[m[1]]?.[0] : undefined;
}

/** A metric whose rows carry no type gets its family's remembered type (and unit); `unknown` says nothing. */
export function withFamilyMetadata(m: MetricInfo, families: FamilyMetadata): MetricInfo {
  if (m.type) return m;
  const f = familyOf(m.name, families);
  if (!f || !f.type || f.type === 'unknown') return m;
  return { ...m, type: f.type, unit: m.unit ?? (f.unit || null), typedByMetadata: true };
}

/** Columns of a metric row that are not labels (everything else a data point carries is a label). */
export function isLabelColumn(name: string): boolean {
  if (/^(p_|metric_|data_point_|scope_|resource_)/.test(name)) return false;
  return !['time_unix_nano', 'start_time_unix_nano', 'is_monotonic', 'aggregation_temporality', 'aggregation_temporality_description', 'is_stale_marker', 'flags'].includes(name);
}

/**
 * The metric's kind, from (in this order) OTLP's data (bucket counts), Prometheus' conventions for a
 * classic histogram's `_bucket` series (an `le` label), the stored type (OTLP's kind with its
 * monotonic flag, or remote-write metadata on the rows or remembered by the dataset: see
 * `withFamilyMetadata`), then the name's suffix (`_total`, `_count`, `_sum` are
 * counters; Prometheus metadata names a histogram's or summary's family, so these come first).
 */
export function metricKind(m: Pick<MetricInfo, 'name' | 'type' | 'monotonic' | 'otlpBuckets' | 'le' | 'quantile'>): MetricKind {
  const t = (m.type ?? '').toLowerCase();
  if (m.otlpBuckets > 0) return 'histogram';
  if (/_bucket$/.test(m.name) && m.le > 0) return 'prom-histogram';
  if (/_(count|sum)$/.test(m.name) && (t === 'histogram' || t === 'summary' || t === '')) return 'counter';
  if (t === 'summary' && m.quantile > 0) return 'prom-summary';
  if (t === 'summary' || t === 'exponential_histogram' || t.includes('native')) return 'mean';
  if (t === 'counter' || (t === 'sum' && m.monotonic)) return 'counter';
  if (t) return 'gauge';
  if (/_total$/.test(m.name)) return 'counter';
  if (m.quantile > 0) return 'prom-summary';
  return 'gauge';
}

export const KIND_LABEL: Record<MetricKind, string> = {
  counter: 'counter: rate per second',
  gauge: 'gauge: value',
  histogram: 'histogram: quantile',
  'prom-histogram': 'histogram (le buckets): quantile',
  'prom-summary': 'summary: value by quantile',
  mean: 'mean (sum / count)',
};

/** The line maths each kind calls for. */
export function aggregationOf(kind: MetricKind): Aggregation {
  return kind === 'counter' ? 'rate' : kind === 'histogram' || kind === 'prom-histogram' ? 'quantile' : kind === 'mean' ? 'mean' : 'avg';
}

type Has = (c: string) => boolean;

export function catalogSql(dataset: string, has: Has): string {
  const col = (c: string, fallback = 'NULL') => (has(c) ? ident(c) : fallback);
  return `SELECT metric_name AS name, any_value(${col('metric_type')}) AS type, bool_or(${col('is_monotonic', 'false')}) AS monotonic,
  any_value(${col('metric_unit')}) AS unit, count(*) AS points, count(${col('data_point_bucket_counts')}) AS otlp_buckets,
  count(${col('le')}) AS le, count(${col('quantile')}) AS quantile
FROM ${ident(dataset)} GROUP BY 1 ORDER BY 1`;
}

export function toMetricInfo(r: Record<string, unknown>): MetricInfo {
  return {
    name: String(r.name),
    type: (r.type as string) ?? null,
    monotonic: (r.monotonic as boolean) ?? null,
    unit: (r.unit as string) ?? null,
    points: Number(r.points),
    otlpBuckets: Number(r.otlp_buckets ?? 0),
    le: Number(r.le ?? 0),
    quantile: Number(r.quantile ?? 0),
  };
}

/** Which of `labels` the metric has: one count per label column over the metric's points. */
export function labelsSql(dataset: string, metric: string, labels: string[]): string {
  return `SELECT ${labels.map((l, i) => `count(${ident(l)}) AS c${i}`).join(', ')} FROM ${ident(dataset)} WHERE metric_name = ${literal(metric)}`;
}

export function labelsOf(row: Record<string, unknown> | undefined, labels: string[]): string[] {
  return labels.filter((_, i) => Number(row?.[`c${i}`] ?? 0) > 0);
}

/** The metric's points: its series identity (labels but `le`), the group-by value and what its kind needs. */
export function pointsSql(dataset: string, metric: string, kind: MetricKind, labels: string[], group: string, has: Has, limit: number): string {
  const identity = labels.filter((l) => l !== 'le');
  const pick = (c: string, as: string) => `${has(c) ? ident(c) : 'NULL'} AS ${as}`;
  const series = identity.length ? `concat_ws('|', ${identity.map((c) => `${ident(c)}::VARCHAR`).join(', ')})` : "''";
  const le = kind === 'prom-histogram' ? `, ${ident('le')} AS le` : '';
  return `SELECT time_unix_nano AS t, ${series} AS series, ${group ? `${ident(group)}::VARCHAR` : "''"} AS grp, ${pick('data_point_value', 'v')}, ${pick('data_point_sum', 'sum')},
  ${pick('data_point_count', 'cnt')}, ${pick('data_point_bucket_counts', 'buckets')}, ${pick('data_point_explicit_bounds', 'bounds')}, ${pick('aggregation_temporality', 'temporality')}${le}
FROM ${ident(dataset)} WHERE metric_name = ${literal(metric)} ORDER BY t LIMIT ${limit}`;
}

const num = (v: unknown) => (typeof v === 'number' ? v : typeof v === 'string' && v !== '' && Number.isFinite(Number(v)) ? Number(v) : null);

/**
 * Points as the line maths takes them. A Prometheus classic histogram's `_bucket` samples (one per
 * `le`, cumulative) become one point per series and time with per-bucket counts and finite bounds,
 * so they are drawn like an OTLP histogram: a quantile of the buckets' increase.
 */
export function toPoints(records: Record<string, unknown>[], kind: MetricKind, parseTime: (v: unknown) => number | undefined): MetricPoint[] {
  if (kind !== 'prom-histogram') {
    return records.map((r) => ({
      t: parseTime(r.t) ?? 0,
      series: String(r.series ?? ''),
      group: r.grp === null || r.grp === undefined ? '' : String(r.grp),
      value: num(r.v),
      sum: num(r.sum),
      count: num(r.cnt),
      bucketCounts: Array.isArray(r.buckets) ? (r.buckets as unknown[]).map(Number) : null,
      bounds: Array.isArray(r.bounds) ? (r.bounds as unknown[]).map(Number) : null,
      temporality: num(r.temporality),
    }));
  }
  const at = new Map<string, { t: number; series: string; group: string; buckets: [number, number][] }>();
  for (const r of records) {
    const t = parseTime(r.t) ?? 0;
    const series = String(r.series ?? '');
    const le = String(r.le ?? '').toLowerCase();
    const bound = le === '+inf' || le === 'inf' ? Infinity : Number(le);
    const v = num(r.v);
    if (Number.isNaN(bound) || v === null) continue;
    const key = `${series}\u0000${t}`;
    let p = at.get(key);
    if (!p) at.set(key, (p = { t, series, group: r.grp === null || r.grp === undefined ? '' : String(r.grp), buckets: [] }));
    p.buckets.push([bound, v]);
  }
  return [...at.values()].map((p) => {
    p.buckets.sort((a, b) => a[0] - b[0]);
    const counts = p.buckets.map(([, c], i) => Math.max(0, c - (i ? p.buckets[i - 1][1] : 0)));
    if (p.buckets.length && p.buckets[p.buckets.length - 1][0] !== Infinity) counts.push(0);
    return { t: p.t, series: p.series, group: p.group, bucketCounts: counts, bounds: p.buckets.map(([b]) => b).filter(Number.isFinite), temporality: 2 };
  });
}

/**
 * How the chart of a dataset's metric is queried. A remote-write dataset (its rows carry Prometheus'
 * staleness flag, `is_stale_marker`) is what the Prometheus query API serves: PromQL, evaluated by
 * Prometheus' own engine. An OTLP metrics dataset keeps SQL: its points keep OTel's names and shapes
 * (docs/promql.md, "The data model").
 */
export function chartLanguage(has: Has): 'promql' | 'sql' {
  return has('is_stale_marker') ? 'promql' : 'sql';
}

/**
 * The range of `rate` at a step: four steps (as Grafana's `$__rate_interval` takes four scrape
 * intervals), at least five minutes (Prometheus' lookback), so a series scraped once a minute,
 * Prometheus' default, has several samples in every window.
 */
export function rateWindowSeconds(stepSeconds: number): number {
  return Math.max(4 * stepSeconds, 300);
}

/** A duration as PromQL writes it: `5m`, `2h`, `90s`. */
export function promDuration(seconds: number): string {
  if (seconds % 3600 === 0) return `${seconds / 3600}h`;
  if (seconds % 60 === 0) return `${seconds / 60}m`;
  return `${seconds}s`;
}

/** A label name PromQL accepts bare in `by (…)`; others (dots, from OTLP) are quoted, as Prometheus 3 allows. */
const labelName = (l: string) => (/^[a-zA-Z_][a-zA-Z0-9_]*$/.test(l) ? l : JSON.stringify(l));
/** A metric name PromQL accepts bare; others as `{"name"}` (Prometheus 3's quoted names). */
const metricSelector = (m: string) => (/^[a-zA-Z_:][a-zA-Z0-9_:]*$/.test(m) ? m : `{${JSON.stringify(m)}}`);

/**
 * The PromQL that draws a metric as its kind calls for, grouped by `group` ('' for one line):
 * counters as the summed per-second rate, gauges (and a summary's quantiles) as their average,
 * classic histograms as `histogram_quantile` of the buckets' summed rates, native histograms as
 * their mean. Null for a kind PromQL has no series for (OTLP's bucket arrays).
 */
export function metricPromql(metric: string, kind: MetricKind, group: string, stepSeconds: number, quantile: number): string | null {
  const sel = metricSelector(metric);
  const w = promDuration(rateWindowSeconds(stepSeconds));
  const by = (extra: string[] = []) => {
    const labels = [...extra, ...(group ? [labelName(group)] : [])];
    return labels.length ? ` by (${labels.join(', ')})` : '';
  };
  switch (kind) {
    case 'counter':
      return `sum${by()} (rate(${sel}[${w}]))`;
    case 'gauge':
    case 'prom-summary':
      return `avg${by()} (${sel})`;
    case 'prom-histogram':
      return `histogram_quantile(${quantile}, sum${by(['le'])} (rate(${sel}[${w}])))`;
    case 'mean':
      return `histogram_avg(sum${by()} (rate(${sel}[${w}])))`;
    case 'histogram':
      return null;
  }
}

/** A `query_range` over the view's range: start aligned to the step, so the points fall on round times. */
export function queryRangeParams(query: string, startMs: number, endMs: number, stepSeconds: number): URLSearchParams {
  const stepMs = stepSeconds * 1000;
  const start = Math.floor(startMs / stepMs) * stepMs;
  return new URLSearchParams({ query, start: String(start / 1000), end: String(Math.max(start, endMs) / 1000), step: String(stepSeconds) });
}

/** The `data` of a successful `query_range`: always a matrix (a scalar expression is one series without labels). */
export interface PromRangeData {
  resultType: string;
  result: { metric?: Record<string, string>; values?: [number, string][] }[];
}

/** A series' name as Prometheus and Grafana print it: `name{a="x", b="y"}`, `{}` for none. */
export function seriesLabel(metric: Record<string, string>): string {
  const { __name__: name = '', ...rest } = metric;
  const pairs = Object.keys(rest).sort().map((k) => `${k}=${JSON.stringify(rest[k])}`);
  return pairs.length || !name ? `${name}{${pairs.join(', ')}}` : name;
}

/**
 * A `query_range` answer as the chart's lines, one point per step from the aligned start (a step
 * without a sample is a gap). `label` names a series: the group's value for the view's own query,
 * the full label set for a typed expression. Values that are not finite (`NaN`, `±Inf`) are gaps.
 */
export function linesFromRange(data: PromRangeData, startMs: number, endMs: number, stepSeconds: number, label: (metric: Record<string, string>) => string = seriesLabel): Lines {
  const stepMs = stepSeconds * 1000;
  const start = Math.floor(startMs / stepMs) * stepMs;
  const n = Math.floor((Math.max(start, endMs) - start) / stepMs) + 1;
  const times = Array.from({ length: n }, (_, i) => (start + i * stepMs) / 1000);
  const value = (v: string) => {
    const x = Number(v);
    return Number.isFinite(x) ? x : null;
  };
  const at = (t: number) => Math.round((t * 1000 - start) / stepMs);
  const series = data.result.map((r) => {
    const values: (number | null)[] = new Array(n).fill(null);
    for (const [t, v] of r.values ?? []) {
      const i = at(t);
      if (i >= 0 && i < n) values[i] = value(v);
    }
    return { label: label(r.metric ?? {}), values };
  });
  series.sort((a, b) => a.label.localeCompare(b.label));
  return { times, series };
}
