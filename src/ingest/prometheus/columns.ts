import { invalidInput } from '../../errors.ts';
import type { ColumnType, FlatRow } from '../../model.ts';
import { setField } from '../names.ts';
import { knownTypesOf } from '../worker/placement.ts';
import type { Int64 } from './decode.ts';

/*
 * The column vocabulary of a Prometheus row (OTel's metric data point names) and the series part of a
 * row: labels, metric name and metadata. series.ts turns a series' samples into rows or WAL lines.
 */

/**
 * A series with more labels than this can never be stored: 400, so that the sender drops the batch
 * instead of retrying it forever. Every label is a column, and no real series comes near this (the
 * storage layer's column limit would refuse such a dataset anyway), so a bigger set is a broken or
 * hostile sender, and checking here keeps it from costing a row object with thousands of keys.
 */
export const MAX_LABELS_PER_SERIES = 1000;

/**
 * Columns of a sample row, named as OTel metric data points so that Prometheus samples and OTLP
 * metrics can share one `otel-metrics` dataset (the route takes X-P-Log-Source: otel-metrics):
 * `time_unix_nano` is the sample time and `data_point_value` the sample value. Labels become columns
 * named by the label and are left out of this map: they are strings, inferred by the storage layer.
 */
export const PROMETHEUS_KNOWN_TYPES: Record<string, ColumnType> = {
  metric_name: 'VARCHAR',
  time_unix_nano: 'TIMESTAMP_NS',
  start_time_unix_nano: 'TIMESTAMP_NS',
  data_point_value: 'DOUBLE',
  is_stale_marker: 'BOOLEAN',
  metric_type: 'VARCHAR',
  metric_description: 'VARCHAR',
  metric_unit: 'VARCHAR',
  data_point_exemplars: 'VARCHAR',
  data_point_count: 'DOUBLE',
  data_point_sum: 'DOUBLE',
  data_point_scale: 'BIGINT',
  data_point_zero_threshold: 'DOUBLE',
  data_point_zero_count: 'DOUBLE',
  data_point_positive_spans: 'VARCHAR',
  data_point_negative_spans: 'VARCHAR',
  data_point_positive_deltas: 'BIGINT[]',
  data_point_negative_deltas: 'BIGINT[]',
  data_point_positive_counts: 'DOUBLE[]',
  data_point_negative_counts: 'DOUBLE[]',
  data_point_custom_values: 'DOUBLE[]',
  data_point_reset_hint: 'BIGINT',
};

/** The time column of every Prometheus row (the sample's own timestamp). */
export const PROMETHEUS_TIME_COLUMN = 'time_unix_nano';

/** MetricType enum values (the same numbers in 1.0 and 2.0); UNKNOWN/UNSPECIFIED leaves metric_type null. */
export const METRIC_TYPES = [undefined, 'counter', 'gauge', 'histogram', 'gaugehistogram', 'summary', 'info', 'stateset'];

export type Num = Int64;
export interface Span {
  offset: number;
  length: number;
}
export interface NativeHistogram {
  /** Which member of the `count` oneof was sent: the other one reads as its default, not undefined. */
  count?: 'countInt' | 'countFloat';
  zeroCount?: 'zeroCountInt' | 'zeroCountFloat';
  countInt?: Num;
  countFloat?: number;
  sum?: number;
  schema?: number;
  zeroThreshold?: number;
  zeroCountInt?: Num;
  zeroCountFloat?: number;
  negativeSpans?: Span[];
  negativeDeltas?: Num[];
  negativeCounts?: number[];
  positiveSpans?: Span[];
  positiveDeltas?: Num[];
  positiveCounts?: number[];
  resetHint?: number;
  timestamp?: Num;
  customValues?: number[];
}
export interface Meta {
  type?: string;
  help?: string;
  unit?: string;
}

// Samples of one request mostly share a few timestamps (one per scrape): remember the last ones.
const isoCache = new Map<number, string>();

export function isoMs(ms: number): string {
  const hit = isoCache.get(ms);
  if (hit !== undefined) return hit;
  const d = new Date(ms);
  if (Number.isNaN(d.getTime())) throw invalidInput(`sample timestamp ${ms} is out of range`);
  const iso = d.toISOString();
  if (isoCache.size >= 4096) isoCache.clear();
  isoCache.set(ms, iso);
  return iso;
}

/**
 * Label name → column. A label named like a fixed column (`data_point_value`, `metric_name`…) or like a
 * `p_` column the server adds (`p_timestamp`) would overwrite it, so it is stored as `label_<name>`.
 */
export const KNOWN = knownTypesOf(PROMETHEUS_KNOWN_TYPES);
const labelColumn = (name: string) => (KNOWN[name] !== undefined || /^p_/i.test(name) ? `label_${name}` : name);

export function seriesRow(labels: [string, string][], meta: Meta | undefined, extra: FlatRow): FlatRow {
  if (labels.length > MAX_LABELS_PER_SERIES) throw invalidInput(`a series has ${labels.length} labels; at most ${MAX_LABELS_PER_SERIES} are accepted`);
  const row: FlatRow = Object.assign({}, extra);
  for (const [name, value] of labels) {
    if (name === '__name__') row.metric_name = value;
    else setField(row, labelColumn(name), value);
  }
  if (meta?.type) row.metric_type = meta.type;
  if (meta?.help) row.metric_description = meta.help;
  if (meta?.unit) row.metric_unit = meta.unit;
  return row;
}
