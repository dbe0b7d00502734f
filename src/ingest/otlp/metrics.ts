import type { ColumnType, FlatRow } from '../../model.ts';
import { attributesObject } from './attributes.ts';
import { COMMON_KNOWN_TYPES, forEachRecord, startRow, type Shared } from './common.ts';
import {
  bool,
  count,
  dbl,
  enumNumber,
  i64Number,
  id,
  int,
  invalid,
  list,
  msg,
  RecordRejection,
  str,
  time,
  timeColumn,
  type ConvertContext,
  type Msg,
} from './values.ts';

export const METRICS_TIME_COLUMN = 'time_unix_nano';

export const METRICS_KNOWN_TYPES: Record<string, ColumnType> = {
  ...COMMON_KNOWN_TYPES,
  metric_name: 'VARCHAR',
  metric_description: 'VARCHAR',
  metric_unit: 'VARCHAR',
  metric_type: 'VARCHAR',
  metric_metadata: 'VARCHAR',
  time_unix_nano: 'TIMESTAMP_NS',
  start_time_unix_nano: 'TIMESTAMP_NS',
  data_point_value: 'DOUBLE',
  data_point_count: 'BIGINT',
  data_point_sum: 'DOUBLE',
  data_point_min: 'DOUBLE',
  data_point_max: 'DOUBLE',
  data_point_bucket_counts: 'BIGINT[]',
  data_point_explicit_bounds: 'DOUBLE[]',
  data_point_flags: 'BIGINT',
  data_point_exemplars: 'VARCHAR',
  is_monotonic: 'BOOLEAN',
  aggregation_temporality: 'BIGINT',
  aggregation_temporality_description: 'VARCHAR',
  data_point_scale: 'BIGINT',
  data_point_zero_count: 'BIGINT',
  data_point_zero_threshold: 'DOUBLE',
  data_point_positive_offset: 'BIGINT',
  data_point_negative_offset: 'BIGINT',
  data_point_positive_bucket_counts: 'BIGINT[]',
  data_point_negative_bucket_counts: 'BIGINT[]',
  data_point_quantile_values: 'VARCHAR',
};

const TEMPORALITIES = ['AGGREGATION_TEMPORALITY_UNSPECIFIED', 'AGGREGATION_TEMPORALITY_DELTA', 'AGGREGATION_TEMPORALITY_CUMULATIVE'];

/** The Metric `data` oneof members, in field order, with the metric_type they map to. */
const KINDS = [
  ['gauge', 'gauge'],
  ['sum', 'sum'],
  ['histogram', 'histogram'],
  ['exponentialHistogram', 'exponential_histogram'],
  ['summary', 'summary'],
] as const;

type MetricType = (typeof KINDS)[number][1];

/** One row per data point, of whichever of the five metric types. */
export function metricRows(request: Msg, ctx: ConvertContext): FlatRow[] {
  const rows: FlatRow[] = [];
  forEachRecord(request, { resources: 'resourceMetrics', scopes: 'scopeMetrics', records: 'metrics' }, ctx.rejections, (metric, shared, at) => {
    const kind = KINDS.find(([field]) => metric[field] !== null && metric[field] !== undefined);
    if (kind === undefined) return; // a metric without data has no points to store
    const [field, type] = kind;
    const data = msg(metric[field], at, field)!;
    const dataAt = `${at}.${field}`;
    const metadata = list(metric.metadata, at, 'metadata');
    const metricColumns: FlatRow = {
      metric_name: str(metric.name, at, 'name'),
      metric_description: str(metric.description, at, 'description'),
      metric_unit: str(metric.unit, at, 'unit'),
      metric_type: type,
      metric_metadata: metadata.length ? JSON.stringify(attributesObject(metadata, at, 'metadata')) : null,
    };
    if (type === 'sum') {
      metricColumns.is_monotonic = bool(data.isMonotonic, dataAt, 'isMonotonic') ?? false;
    }
    if (type !== 'gauge' && type !== 'summary') {
      const temporality = enumNumber(data.aggregationTemporality, TEMPORALITIES, dataAt, 'aggregationTemporality');
      metricColumns.aggregation_temporality = temporality;
      metricColumns.aggregation_temporality_description = TEMPORALITIES[temporality] ?? null;
    }
    const points = list(data.dataPoints, dataAt, 'dataPoints');
    const pointsAt = `${dataAt}.dataPoints`;
    for (let i = 0; i < points.length; i++) {
      const point = msg(points[i], pointsAt, i);
      if (point === null) continue;
      const pAt = `${pointsAt}[${i}]`;
      try {
        rows.push(pointRow(type, point, shared, metricColumns, pAt, ctx));
      } catch (err) {
        if (!(err instanceof RecordRejection)) throw err;
        ctx.rejections.add(err.at, err.problem);
      }
    }
  });
  return rows;
}

function pointRow(type: MetricType, p: Msg, shared: Shared, metricColumns: FlatRow, at: string, ctx: ConvertContext): FlatRow {
  const exemplars = type === 'summary' ? null : exemplarsJson(p.exemplars, at);
  const pointTime = timeColumn(p.timeUnixNano, at, 'timeUnixNano');
  const startTime = timeColumn(p.startTimeUnixNano, at, 'startTimeUnixNano');
  const row = startRow(shared, p, at);
  Object.assign(row, metricColumns);
  // A point without a time is filed under the receive time so the time column is never null.
  row.time_unix_nano = pointTime ?? ctx.receivedAt;
  row.start_time_unix_nano = startTime;
  row.data_point_flags = int(p.flags, at, 'flags');
  switch (type) {
    case 'gauge':
    case 'sum':
      row.data_point_value = numberValue(p, at);
      break;
    case 'histogram': {
      putCountSumMinMax(row, p, at);
      const bucketCounts = counts(p.bucketCounts, at, 'bucketCounts');
      const bounds = doubles(p.explicitBounds, at, 'explicitBounds');
      if (bucketCounts.length !== 0 && bucketCounts.length !== bounds.length + 1) {
        throw new RecordRejection(at, `histogram has ${bucketCounts.length} bucket counts for ${bounds.length} explicit bounds (expected ${bounds.length + 1})`);
      }
      row.data_point_bucket_counts = bucketCounts;
      row.data_point_explicit_bounds = bounds;
      break;
    }
    case 'exponential_histogram': {
      putCountSumMinMax(row, p, at);
      row.data_point_scale = int(p.scale, at, 'scale');
      row.data_point_zero_count = count(p.zeroCount, at, 'zeroCount') ?? 0;
      row.data_point_zero_threshold = dbl(p.zeroThreshold, at, 'zeroThreshold') ?? 0;
      // Unset bucket ranges are empty ones (offset 0, no counts), as in proto3.
      const positive = msg(p.positive, at, 'positive');
      const negative = msg(p.negative, at, 'negative');
      row.data_point_positive_offset = positive === null ? 0 : int(positive.offset, `${at}.positive`, 'offset');
      row.data_point_negative_offset = negative === null ? 0 : int(negative.offset, `${at}.negative`, 'offset');
      row.data_point_positive_bucket_counts = positive === null ? [] : counts(positive.bucketCounts, `${at}.positive`, 'bucketCounts');
      row.data_point_negative_bucket_counts = negative === null ? [] : counts(negative.bucketCounts, `${at}.negative`, 'bucketCounts');
      break;
    }
    case 'summary': {
      row.data_point_count = count(p.count, at, 'count') ?? 0;
      row.data_point_sum = dbl(p.sum, at, 'sum') ?? 0;
      const quantiles = list(p.quantileValues, at, 'quantileValues').map((item, i) => {
        const q = msg(item, `${at}.quantileValues`, i) ?? {};
        const qAt = `${at}.quantileValues[${i}]`;
        return { quantile: dbl(q.quantile, qAt, 'quantile') ?? 0, value: dbl(q.value, qAt, 'value') ?? 0 };
      });
      row.data_point_quantile_values = JSON.stringify(quantiles);
      break;
    }
  }
  row.data_point_exemplars = exemplars;
  return row;
}

/** asDouble or asInt; a point with neither has no value. */
function numberValue(p: Msg, at: string): number | null {
  if (p.asDouble !== null && p.asDouble !== undefined) return dbl(p.asDouble, at, 'asDouble');
  return i64Number(p.asInt, at, 'asInt');
}

/** count is a plain field (0 when unset); sum, min and max are proto3 `optional` and stay null when unset. */
function putCountSumMinMax(row: FlatRow, p: Msg, at: string): void {
  row.data_point_count = count(p.count, at, 'count') ?? 0;
  row.data_point_sum = dbl(p.sum, at, 'sum');
  row.data_point_min = dbl(p.min, at, 'min');
  row.data_point_max = dbl(p.max, at, 'max');
}

function counts(v: unknown, at: string, field: string): number[] {
  const items = list(v, at, field);
  const out = new Array<number>(items.length);
  for (let i = 0; i < items.length; i++) {
    const c = count(items[i], `${at}.${field}`, i);
    if (c === null) throw invalid(`${at}.${field}`, i, 'expected an integer, got null');
    out[i] = c;
  }
  return out;
}

function doubles(v: unknown, at: string, field: string): number[] {
  const items = list(v, at, field);
  const out = new Array<number>(items.length);
  for (let i = 0; i < items.length; i++) {
    const d = dbl(items[i], `${at}.${field}`, i);
    if (d === null) throw invalid(`${at}.${field}`, i, 'expected a number, got null');
    out[i] = d;
  }
  return out;
}

/** Exemplars as JSON text (null when there are none); a bad id rejects the data point. */
function exemplarsJson(v: unknown, pointAt: string): string | null {
  const exemplars = list(v, pointAt, 'exemplars');
  if (exemplars.length === 0) return null;
  const out = exemplars.map((item, i) => {
    const eAt = `${pointAt}.exemplars[${i}]`;
    const e = msg(item, eAt) ?? {};
    const traceId = id(e.traceId, 16, 'exemplar trace_id');
    const spanId = id(e.spanId, 8, 'exemplar span_id');
    const error = traceId.error ?? spanId.error;
    if (error !== undefined) throw new RecordRejection(eAt, error);
    return {
      time_unix_nano: time(e.timeUnixNano, eAt, 'timeUnixNano'),
      value: numberValue(e, eAt),
      trace_id: traceId.hex,
      span_id: spanId.hex,
      filtered_attributes: attributesObject(e.filteredAttributes, eAt, 'filteredAttributes'),
    };
  });
  return JSON.stringify(out);
}
