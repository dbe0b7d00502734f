/**
 * Turns metric data points into lines over time, with the aggregation each metric type calls for:
 * - `avg`: gauges, non-monotonic sums (the mean of the points in each bucket);
 * - `rate`: monotonic sums and Prometheus counters (increase per second; a drop is a counter reset);
 * - `quantile`: explicit-bucket histograms (bucket counts added up per time bucket, then the quantile
 *   interpolated inside the bucket that holds it, as Prometheus' histogram_quantile does);
 * - `mean`: summaries and exponential histograms (sum / count).
 */
export type Aggregation = 'avg' | 'rate' | 'quantile' | 'mean';

export interface MetricPoint {
  /** Epoch ms. */
  t: number;
  /** Identity of the series (all its labels). */
  series: string;
  /** The value of the group-by label ('' when not grouped). */
  group: string;
  value?: number | null;
  sum?: number | null;
  count?: number | null;
  bucketCounts?: number[] | null;
  bounds?: number[] | null;
  /** 1 = delta, 2 = cumulative (OTLP); Prometheus counters are cumulative. */
  temporality?: number | null;
}

export interface Lines {
  /** Bucket starts, epoch seconds. */
  times: number[];
  series: { label: string; values: (number | null)[] }[];
}

/** The q-quantile (0..1) of counts in buckets with upper bounds `bounds` (the last bucket is +Inf). */
export function histogramQuantile(q: number, bounds: number[], counts: number[]): number | null {
  const total = counts.reduce((a, b) => a + b, 0);
  if (total <= 0) return null;
  const rank = q * total;
  let cum = 0;
  for (let i = 0; i < counts.length; i++) {
    const prev = cum;
    cum += counts[i];
    if (cum >= rank && counts[i] > 0) {
      if (i >= bounds.length) return bounds.length ? bounds[bounds.length - 1] : null; // +Inf bucket
      const lower = i === 0 ? Math.min(0, bounds[0]) : bounds[i - 1];
      const upper = bounds[i];
      return lower + (upper - lower) * ((rank - prev) / counts[i]);
    }
  }
  return bounds.length ? bounds[bounds.length - 1] : null;
}

/** One group's per-bucket accumulators; `rates`: per series of the group, the per-second rates seen in each bucket (summed, counted). */
interface Acc {
  sum: number[];
  count: number[];
  buckets: (number[] | null)[];
  bounds?: number[];
  rates: Map<string, { sum: number[]; count: number[] }>;
}

const finite = (v: number | null | undefined): v is number => v !== null && v !== undefined && Number.isFinite(v);

/** A point of a `rate` line; `prev` is its series' previous point. */
function addRate(a: Acc, i: number, p: MetricPoint, prev: MetricPoint | undefined, bucketSeconds: number, n: number): void {
  if (p.temporality === 1) {
    // A delta point is the increase since the last one: summed per bucket, over the bucket's length.
    a.sum[i] += p.value! / bucketSeconds;
    a.count[i] = 1;
    return;
  }
  if (!prev || prev.value == null || p.t <= prev.t) return; // a cumulative series' first point has no increase yet
  const delta = p.value! >= prev.value ? p.value! - prev.value : p.value!; // a drop is a reset
  // Per second over the time since the series' previous point, not over the bucket: samples a
  // minute apart drawn in 30 s buckets are still their own rate. In a bucket, a series' rate is
  // the mean of its rates there, and the group's rate the sum over its series.
  let r = a.rates.get(p.series);
  if (!r) a.rates.set(p.series, (r = { sum: new Array(n).fill(0), count: new Array(n).fill(0) }));
  r.sum[i] += delta / ((p.t - prev.t) / 1000);
  r.count[i] += 1;
  a.count[i] = 1;
}

/** A point of a `quantile` line: its bucket counts' increase since the series' previous point. */
function addHistogram(a: Acc, i: number, p: MetricPoint, prev: MetricPoint | undefined): void {
  let delta = p.bucketCounts!;
  if (p.temporality !== 1 && prev?.bucketCounts && prev.bucketCounts.length === delta.length) {
    const d = delta.map((c, k) => c - prev.bucketCounts![k]);
    // Any bucket going down means the histogram was reset: its counts are the increase.
    if (d.every((x) => x >= 0)) delta = d;
  }
  a.bounds ??= p.bounds!;
  if (a.bounds.length !== p.bounds!.length) return; // bounds changed: not addable
  const b = a.buckets[i] ?? new Array(delta.length).fill(0);
  for (let k = 0; k < delta.length; k++) b[k] += delta[k];
  a.buckets[i] = b;
}

/** Adds one point to its group's bucket `i`; `last` holds each series' previous point (rate, quantile). */
function addPoint(agg: Aggregation, a: Acc, i: number, p: MetricPoint, last: Map<string, MetricPoint>, bucketSeconds: number, n: number): void {
  if (agg === 'avg' || agg === 'mean') {
    const [sum, count] = agg === 'avg' ? [p.value, finite(p.value) ? 1 : 0] : [p.sum, p.sum == null ? 0 : p.count];
    if (!count) return;
    a.sum[i] += sum!;
    a.count[i] += count;
    return;
  }
  if (agg === 'rate' ? !finite(p.value) : !p.bucketCounts?.length || !p.bounds) return;
  const prev = last.get(p.series);
  last.set(p.series, p);
  if (agg === 'rate') addRate(a, i, p, prev, bucketSeconds, n);
  else addHistogram(a, i, p, prev);
}

/** A group's value in bucket `i`. */
function bucketValue(agg: Aggregation, a: Acc, i: number, quantile: number): number | null {
  if (agg === 'rate') {
    if (!a.count[i]) return null;
    let total = a.sum[i];
    for (const r of a.rates.values()) if (r.count[i]) total += r.sum[i] / r.count[i];
    return total;
  }
  if (agg === 'quantile') return a.buckets[i] ? histogramQuantile(quantile, a.bounds ?? [], a.buckets[i]!) : null;
  return a.count[i] ? a.sum[i] / a.count[i] : null;
}

export function computeLines(points: MetricPoint[], agg: Aggregation, bucketSeconds: number, startMs: number, endMs: number, quantile = 0.5): Lines {
  const bucketMs = bucketSeconds * 1000;
  const first = Math.floor(startMs / bucketMs) * bucketMs;
  const n = Math.max(1, Math.ceil((endMs - first) / bucketMs));
  const times = Array.from({ length: n }, (_, i) => (first + i * bucketMs) / 1000);
  const idx = (t: number) => Math.min(n - 1, Math.max(0, Math.floor((t - first) / bucketMs)));

  const groups = new Map<string, Acc>();
  const acc = (g: string) => {
    let a = groups.get(g);
    if (!a) {
      a = { sum: new Array(n).fill(0), count: new Array(n).fill(0), buckets: new Array(n).fill(null), rates: new Map() };
      groups.set(g, a);
    }
    return a;
  };
  const last = new Map<string, MetricPoint>();
  for (const p of [...points].sort((a, b) => a.t - b.t)) addPoint(agg, acc(p.group), idx(p.t), p, last, bucketSeconds, n);

  const series = [...groups.entries()]
    .sort(([x], [y]) => x.localeCompare(y))
    .map(([label, a]) => ({ label: label || 'all', values: times.map((_, i) => bucketValue(agg, a, i, quantile)) }));
  return { times, series };
}

/** Colours for `n` series: the theme's palette, then hues spread by the golden angle, so none repeat. */
export function seriesColors(palette: string[], n: number, dark: boolean): string[] {
  return Array.from({ length: n }, (_, i) => {
    if (i < palette.length) return palette[i];
    const k = i - palette.length;
    const hue = Math.round((k * 137.508 + 20) % 360);
    const light = (dark ? 62 : 42) + (k % 3) * 8 * (dark ? 1 : -0.5);
    return `hsl(${hue} 70% ${light}%)`;
  });
}
