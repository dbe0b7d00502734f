/**
 * Everything the metrics view asks the server, in one place: today SQL over the `otel-metrics`
 * dataset (what a metric is, which labels it has, its points); when the Prometheus query API exists,
 * these become PromQL calls and the view does not change.
 */
import { ident, literal } from './sql.ts';
import type { Aggregation, MetricPoint } from './metrics.ts';

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
