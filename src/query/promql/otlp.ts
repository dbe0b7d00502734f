import { quotedIdentifier, quotedString } from '@duckdb/node-api';
import { HISTOGRAM_COLUMNS, METRIC_NAME_COLUMN, STALE_COLUMN, VALUE_COLUMN, labelColumns } from './storage.ts';
import { floatLabelSql, nameLayers, promLabelName, valueText } from './otlpNames.ts';

/*
 * OTLP metrics as Prometheus series (docs/promql.md, "OTLP metrics as Prometheus series"): a SQL view
 * over a metrics dataset's relation that gives the engine's storage side (seriesSql) what a remote-write
 * dataset has natively — a metric name, label columns, a time, a float value, a staleness flag and native
 * histogram columns — with OTLP rows normalised as the Collector's Prometheus exporter does
 * (prometheus/otlptranslator, with its default "underscore escaping with suffixes"):
 *
 * - name: split into tokens at every character that is not [a-zA-Z0-9:], the unit appended as a
 *   suffix (`s` → `seconds`, `By/s` → `bytes_per_second`; units in braces are dropped; not when the
 *   name already holds it), `total` moved to the end of monotonic sums, `ratio` to the end of gauges of
 *   unit `1`; joined by `_`, `_` before a leading digit.
 * - labels: every attribute (resource, scope and data point attributes are stored together, so all of
 *   them: the exporter's `resource_to_telemetry_conversion: enabled`), each character outside
 *   [a-zA-Z0-9_] → `_`, `key_` before a leading digit; attributes that
 *   land on one name are joined with `;` in key order; values as text. `job` = `service.namespace/
 *   service.name` (or `service.name`), `instance` = `service.instance.id`, `otel_scope_name`,
 *   `otel_scope_version` and `otel_scope_schema_url` from the scope.
 * - gauges and cumulative sums: one series; histograms: `_bucket{le}` (cumulative counts, `+Inf` the
 *   point's count), `_sum`, `_count`; summaries: `{quantile}`, `_sum`, `_count`; exponential histograms:
 *   native histograms (as the exporter and Prometheus' OTLP receiver make them; scales above 8 merged
 *   down to 8; none without a sum or below scale -4).
 * - delta and unspecified temporality: left out (the Collector's `deltatocumulative` processor converts
 *   them before export). A point flagged "no recorded value" is a staleness marker.
 *
 * Remote-write rows of the same dataset (no `data_point_flags`, which every OTLP point has) pass
 * through unchanged, their labels being their text columns as before.
 */

/** Every OTLP data point row has this column (its flags, 0 when unset); remote-write rows never have. */
export const OTLP_MARKER_COLUMN = 'data_point_flags';

/** The view's column of a label (a prefix keeps a label from ever clashing with the view's fixed columns). */
export const labelColumn = (label: string) => `l:${label}`;

export interface MappedView {
  /** SELECT over the relation: `l:<label>` columns, the time column, value, staleness flag, native histogram columns. */
  sql: string;
  /** Label name → view column, for seriesSql. */
  labels: { label: string; column: string }[];
  /** The native histogram columns the view has (for seriesSql; all of them or none). */
  histogramColumns: string[];
}

/** Prometheus' highest native histogram schema; finer OTLP scales are merged down to it. */
const MAX_SCALE = 8;
/** Prometheus' lowest schema: an exponential histogram coarser than this has no Prometheus form. */
const MIN_SCALE = -4;
/** The zero threshold Prometheus' OTLP translators give a converted histogram that sets none. */
const DEFAULT_ZERO_THRESHOLD = '1e-128';

const q = quotedIdentifier;
const s = quotedString;

/**
 * One side (positive or negative) of an exponential histogram as Prometheus native histogram spans
 * (JSON text) and float counts: OTLP bucket i is Prometheus bucket i + 1, and a scale above 8 merges
 * 2^(scale-8) neighbours into one (indices shifted right, arithmetic).
 */
function nativeSide(offsetCol: string, countsCol: string, has: (c: string) => boolean): { spans: string; counts: string } {
  if (!has(offsetCol) || !has(countsCol)) return { spans: `'[]'`, counts: 'NULL::DOUBLE[]' };
  const o = `coalesce(${q(offsetCol)}, 0)`;
  const c = `coalesce(${q(countsCol)}, []::BIGINT[])`;
  const d = `greatest(${q('data_point_scale')} - ${MAX_SCALE}, 0)`;
  const lo = `((${o}) >> ${d})`;
  const hi = `((${o} + len(${c}) - 1) >> ${d})`;
  const counts =
    `CASE WHEN len(${c}) = 0 THEN []::DOUBLE[] WHEN ${d} = 0 THEN ${c}::DOUBLE[] ELSE ` +
    `list_transform(range(${lo}, ${hi} + 1), k -> coalesce(list_sum(list_transform(list_filter(range(0, len(${c})), j -> ((${o} + j) >> ${d}) = k), j -> ${c}[j + 1])), 0)::DOUBLE) END`;
  const spans = `CASE WHEN len(${c}) = 0 THEN '[]' ELSE to_json([{'offset': ${lo} + 1, 'length': ${hi} - ${lo} + 1}])::VARCHAR END`;
  return { spans, counts };
}

/**
 * Which rows become series: every remote-write row; OTLP gauges and summaries, and sums, histograms
 * and exponential histograms of cumulative temporality (2) (an exponential histogram only at a scale
 * Prometheus can hold or merge down, and with a sum, as the exporter requires).
 */
function keepSql(has: (c: string) => boolean, otlp: string): string {
  const type = has('metric_type') ? q('metric_type') : 'NULL::VARCHAR';
  const temporality = has('aggregation_temporality') ? `${q('aggregation_temporality')}::BIGINT` : 'NULL::BIGINT';
  // A relation without the scale or sum (a series index) cannot tell, and keeps the point.
  const scaleOk = has('data_point_scale') ? ` AND ${q('data_point_scale')}::BIGINT >= ${MIN_SCALE}` : '';
  const sumOk = has('data_point_sum') ? ` AND ${q('data_point_sum')} IS NOT NULL` : '';
  return (
    `NOT (${otlp}) OR ${type} IN ('gauge', 'summary') OR (${type} IN ('sum', 'histogram') AND ${temporality} = 2) ` +
    `OR (${type} = 'exponential_histogram' AND ${temporality} = 2${scaleOk}${sumOk})`
  );
}

/**
 * Metric metadata with OTLP metrics under their Prometheus names and types (a monotonic sum is a
 * counter, a non-monotonic one a gauge, an exponential histogram a histogram) and units as the name's
 * unit suffix (`bytes_per_second`); remote-write rows as stored. Columns metric_name, metric_type,
 * metric_description, metric_unit; undefined when the relation has no OTLP rows.
 */
export function otlpMetadataSql(relation: string, schema: Record<string, string>): string | undefined {
  if (schema[OTLP_MARKER_COLUMN] === undefined) return undefined;
  const has = (c: string) => schema[c] !== undefined;
  const otlp = `${q(OTLP_MARKER_COLUMN)} IS NOT NULL`;
  const type = has('metric_type') ? q('metric_type') : 'NULL::VARCHAR';
  const monotonic = has('is_monotonic') ? `coalesce(${q('is_monotonic')}, false)` : 'false';
  const promType = `CASE ${type} WHEN 'sum' THEN CASE WHEN ${monotonic} THEN 'counter' ELSE 'gauge' END WHEN 'exponential_histogram' THEN 'histogram' ELSE ${type} END`;
  const unit = `nullif(trim(concat_ws('_', nullif(__promql_main, ''), nullif(__promql_per, '')), '_'), '')`;
  const text = (c: string) => (has(c) ? q(c) : 'NULL::VARCHAR');
  // The names are computed once per distinct metric, not per point.
  const distinct =
    `(SELECT DISTINCT ${otlp} AS __promql_otlp, ${q(METRIC_NAME_COLUMN)}, ${text('metric_unit')} AS metric_unit, ${type} AS metric_type, ` +
    `${has('is_monotonic') ? q('is_monotonic') : 'NULL::BOOLEAN'} AS is_monotonic, ${text('metric_description')} AS metric_description ` +
    `FROM ${relation} WHERE ${keepSql(has, otlp)})`;
  const all = () => true;
  return (
    `SELECT CASE WHEN __promql_otlp THEN __promql_base ELSE ${q(METRIC_NAME_COLUMN)} END AS metric_name, ` +
    `CASE WHEN __promql_otlp THEN ${promType} ELSE ${type} END AS metric_type, metric_description, ` +
    `CASE WHEN __promql_otlp THEN ${unit} ELSE metric_unit END AS metric_unit FROM (${nameLayers(distinct, all, 'true')})`
  );
}

export interface MapOptions {
  /** The relation's time column (passed through). */
  timeColumn: string;
  /**
   * Fixed columns of a remote-write row with their DuckDB types (src/ingest/prometheus/columns.ts): not
   * labels; the native histogram columns the view makes take their types from here.
   */
  prometheusColumns: ReadonlyMap<string, string>;
  /** Fixed columns of an OTLP metrics row (src/ingest/otlp/metrics.ts): not attributes. */
  otlpColumns: ReadonlySet<string>;
  /**
   * Columns passed through in place of the time column, for a relation without one: a series
   * relation's time span per tuple (p_min_time, p_max_time).
   */
  spanColumns?: string[];
  /**
   * Whether the relation may hold remote-write rows; by default when it has their staleness column,
   * which a series relation has not.
   */
  remoteWriteRows?: boolean;
}

/**
 * The view of a metrics relation (the dataset's rows, or any relation with the same columns, e.g. a
 * series index holding only some of them) with OTLP rows as Prometheus series; undefined when the
 * relation has no OTLP rows (no `data_point_flags` column) and needs no mapping. Columns the relation
 * lacks read as NULL.
 */
export function otlpSeriesView(relation: string, schema: Record<string, string>, opts: MapOptions): MappedView | undefined {
  if (schema[OTLP_MARKER_COLUMN] === undefined) return undefined;
  const sql = new ViewSql(schema);
  const otlp = `${q(OTLP_MARKER_COLUMN)} IS NOT NULL`;
  const labels = viewLabels(schema, opts, sql);
  const sorted = [...labels.names].sort();
  const expanded = expandedOtlpRows(relation, sql, otlp);

  const otlpStale = `((${q(OTLP_MARKER_COLUMN)} & 1) = 1)`;
  const times = (opts.spanColumns ?? [opts.timeColumn]).map((c) => q(c));
  const otlpOut = [
    `__promql_name AS ${q(labelColumn('__name__'))}`,
    ...sorted.map((label) => `${labels.otlpLabel(label)} AS ${q(labelColumn(label))}`),
    ...times,
    `CASE WHEN ${otlpStale} THEN NULL ELSE __promql_p.v END AS ${q(VALUE_COLUMN)}`,
    `${otlpStale} AS ${q(STALE_COLUMN)}`,
  ];
  const rwOut = [
    `${q(METRIC_NAME_COLUMN)} AS ${q(labelColumn('__name__'))}`,
    ...sorted.map((label) => `${labels.rw.has(label) ? q(labels.rw.get(label)!) : 'NULL::VARCHAR'} AS ${q(labelColumn(label))}`),
    ...times,
    `${sql.value} AS ${q(VALUE_COLUMN)}`,
    `${sql.has(STALE_COLUMN) ? `coalesce(${q(STALE_COLUMN)}, false)` : 'false'} AS ${q(STALE_COLUMN)}`,
  ];
  const histogramColumns = addNativeHistograms(sql, opts, otlpOut, rwOut);
  // Every remote-write row has the staleness column: a dataset without it has only OTLP points.
  const parts = [`SELECT ${otlpOut.join(', ')} FROM (${expanded})`];
  if (opts.remoteWriteRows ?? sql.has(STALE_COLUMN)) parts.push(`SELECT ${rwOut.join(', ')} FROM ${relation} WHERE NOT (${otlp})`);
  const labelList = [{ label: '__name__', column: labelColumn('__name__') }, ...sorted.map((label) => ({ label, column: labelColumn(label) }))];
  return { sql: parts.join(' UNION ALL '), labels: labelList, histogramColumns };
}

/** Column references of one relation's schema; a column the relation lacks reads as NULL. */
class ViewSql {
  readonly type: string;
  readonly value: string;
  readonly count: string;
  readonly sum: string;
  constructor(private readonly schema: Record<string, string>) {
    this.type = this.col('metric_type');
    this.value = this.col(VALUE_COLUMN, '::DOUBLE');
    this.count = this.col('data_point_count', '::DOUBLE');
    this.sum = this.col('data_point_sum', '::DOUBLE');
  }
  readonly has = (c: string) => this.schema[c] !== undefined;
  col(c: string, cast = ''): string {
    return this.has(c) ? `${q(c)}${cast}` : `NULL${cast || '::VARCHAR'}`;
  }
}

interface ViewLabels {
  /** Remote-write rows' label → column. */
  rw: Map<string, string>;
  names: Set<string>;
  /** An OTLP row's value of a label, as SQL. */
  otlpLabel: (label: string) => string;
}

/** Labels: remote-write rows by their text columns, OTLP rows by their attributes (any scalar type). */
function viewLabels(schema: Record<string, string>, opts: MapOptions, sql: ViewSql): ViewLabels {
  const { has } = sql;
  const rw = new Map(labelColumns(schema, opts.prometheusColumns).map((l) => [l.label, l.column]));
  rw.delete('__name__');
  const attrs = new Map<string, string[]>();
  for (const column of Object.keys(schema).sort()) {
    if (/^p_/i.test(column) || opts.otlpColumns.has(column) || opts.prometheusColumns.has(column) || column === opts.timeColumn) continue;
    const label = promLabelName(column);
    if (label === '' || label === '__name__') continue;
    attrs.set(label, [...(attrs.get(label) ?? []), column]);
  }
  const text = (c: string) => (has(c) ? valueText(c, schema[c]) : undefined);
  const name = text('service.name');
  const namespace = text('service.namespace');
  const job = name && (namespace ? `CASE WHEN ${namespace} IS NULL THEN ${name} ELSE ${namespace} || '/' || ${name} END` : name);
  const special: Record<string, string | undefined> = {
    job,
    instance: text('service.instance.id'),
    otel_scope_name: has('scope_name') ? q('scope_name') : undefined,
    otel_scope_version: has('scope_version') ? q('scope_version') : undefined,
    otel_scope_schema_url: has('scope_schema_url') ? q('scope_schema_url') : undefined,
  };
  const names = new Set<string>([...rw.keys(), ...attrs.keys(), ...Object.keys(special).filter((k) => special[k] !== undefined), 'le', 'quantile']);
  const otlpLabel = (label: string): string => {
    const fromAttrs = attrs.get(label);
    const joined = fromAttrs
      ? fromAttrs.length === 1
        ? valueText(fromAttrs[0], schema[fromAttrs[0]])
        : `nullif(concat_ws(';', ${fromAttrs.map((c) => valueText(c, schema[c])).join(', ')}), '')`
      : 'NULL::VARCHAR';
    const sp = special[label];
    if (sp !== undefined) return `coalesce(${sp}, ${joined})`;
    if (label === 'le' || label === 'quantile') return `CASE WHEN __promql_p.k = ${s(label)} THEN __promql_p.lv ELSE ${joined} END`;
    return joined;
  };
  return { rw, names, otlpLabel };
}

/** Each OTLP row's samples, one struct per Prometheus series it feeds: name suffix, the le/quantile label and value. */
function otlpSamples(sql: ViewSql): string {
  const { has, type, count, sum } = sql;
  const point = (suffix: string, k: string, lv: string, v: string) => `{'s': ${s(suffix)}, 'k': ${k}, 'lv': ${lv}, 'v': ${v}}`;
  const none = 'NULL::VARCHAR';
  const plain = `[${point('', none, none, sql.value)}]`;
  // A histogram without a sum has no _sum series; a relation without the column (a series index) cannot tell.
  const sumCount = has('data_point_sum')
    ? `list_concat([${point('_count', none, none, count)}], CASE WHEN ${sum} IS NULL THEN [] ELSE [${point('_sum', none, none, sum)}] END)`
    : `[${point('_count', none, none, count)}, ${point('_sum', none, none, sum)}]`;
  const bounds = has('data_point_explicit_bounds') ? `coalesce(${q('data_point_explicit_bounds')}, []::DOUBLE[])` : '[]::DOUBLE[]';
  const bucketCounts = has('data_point_bucket_counts') ? `coalesce(${q('data_point_bucket_counts')}, []::BIGINT[])` : '[]::BIGINT[]';
  const buckets =
    `list_transform(range(1, len(${bounds}) + 2), i -> ${point(
      '_bucket',
      `'le'`,
      `CASE WHEN i <= len(${bounds}) THEN ${floatLabelSql(`(${bounds})[i]`)} ELSE '+Inf' END`,
      `CASE WHEN i <= len(${bounds}) THEN coalesce(list_sum((${bucketCounts})[1:i]), 0)::DOUBLE ELSE ${count} END`,
    )})`;
  const quantiles = has('data_point_quantile_values')
    ? `list_transform(coalesce(from_json(${q('data_point_quantile_values')}, '[{"quantile":"DOUBLE","value":"DOUBLE"}]'), []), x -> ${point('', `'quantile'`, floatLabelSql('x.quantile'), 'x.value')})`
    : '[]';
  return (
    `CASE WHEN ${type} = 'histogram' THEN list_concat(${buckets}, ${sumCount}) ` +
    `WHEN ${type} = 'summary' THEN list_concat(${quantiles}, ${sumCount}) ` +
    `WHEN ${type} = 'exponential_histogram' THEN [${point('', none, none, 'NULL::DOUBLE')}] ` +
    `ELSE ${plain} END`
  );
}

/**
 * The OTLP rows joined with their names and expanded into one row per sample. The names are computed once
 * per distinct (name, unit, type, monotonic) rather than per point, with every suffix the type feeds: a
 * selector's name then narrows this small side of a join, and only the points of matching metrics are
 * expanded and labelled.
 */
function expandedOtlpRows(relation: string, sql: ViewSql, otlp: string): string {
  const keep = keepSql(sql.has, otlp);
  const key: [string, string][] = [
    [METRIC_NAME_COLUMN, `coalesce(${sql.col(METRIC_NAME_COLUMN)}, '')`],
    ['metric_unit', `coalesce(${sql.col('metric_unit')}, '')`],
    ['metric_type', `coalesce(${sql.type}, '')`],
    ['is_monotonic', `coalesce(${sql.col('is_monotonic', '::BOOLEAN')}, false)`],
  ];
  const distinct = `(SELECT DISTINCT ${key.map(([c, e]) => `${e} AS ${q(c)}`).join(', ')} FROM ${relation} WHERE ${otlp} AND (${keep}))`;
  const suffixes =
    `CASE ${q('metric_type')} WHEN 'histogram' THEN ['_bucket', '_count', '_sum'] WHEN 'summary' THEN ['', '_count', '_sum'] ELSE [''] END`;
  const names =
    `SELECT ${key.map(([c], i) => `${q(c)} AS __promql_k${i}`).join(', ')}, __promql_base || __promql_suffix AS __promql_name, __promql_suffix ` +
    `FROM (SELECT *, unnest(${suffixes}) AS __promql_suffix FROM (${nameLayers(distinct, () => true, 'true')}))`;
  const joined =
    `SELECT __promql_r.*, __promql_n.__promql_name, __promql_n.__promql_suffix FROM (SELECT * FROM ${relation} WHERE ${otlp} AND (${keep})) __promql_r ` +
    `JOIN (${names}) __promql_n ON ${key.map(([, e], i) => `${e.replaceAll(/"([^"]+)"/g, (_m, c: string) => `__promql_r.${q(c)}`)} = __promql_n.__promql_k${i}`).join(' AND ')}`;
  return `SELECT * FROM (SELECT *, unnest(${otlpSamples(sql)}) AS __promql_p FROM (${joined})) WHERE __promql_p.s = __promql_suffix`;
}

/**
 * Native histograms: remote-write rows' own columns, OTLP exponential histograms converted; appended to
 * both sides' outputs. Returns the columns added.
 */
function addNativeHistograms(sql: ViewSql, opts: MapOptions, otlpOut: string[], rwOut: string[]): string[] {
  if (!sql.has('data_point_scale')) return [];
  const { has, type, count, sum } = sql;
  const histogramColumns = [...Object.keys(HISTOGRAM_COLUMNS), 'data_point_sum'];
  const scale = sql.col('data_point_scale', '::BIGINT');
  const pos = nativeSide('data_point_positive_offset', 'data_point_positive_bucket_counts', has);
  const neg = nativeSide('data_point_negative_offset', 'data_point_negative_bucket_counts', has);
  const exp: Record<string, string> = {
    data_point_count: count,
    data_point_scale: `least(${scale}, ${MAX_SCALE})`,
    // An unset (0) zero threshold is Prometheus' default for converted histograms, as the exporter sets it.
    data_point_zero_threshold: `coalesce(nullif(${sql.col('data_point_zero_threshold', '::DOUBLE')}, 0), ${DEFAULT_ZERO_THRESHOLD})`,
    data_point_zero_count: sql.col('data_point_zero_count', '::DOUBLE'),
    data_point_positive_spans: pos.spans,
    data_point_negative_spans: neg.spans,
    data_point_positive_deltas: 'NULL::BIGINT[]',
    data_point_negative_deltas: 'NULL::BIGINT[]',
    data_point_positive_counts: pos.counts,
    data_point_negative_counts: neg.counts,
    data_point_custom_values: 'NULL::DOUBLE[]',
    data_point_reset_hint: 'NULL::BIGINT',
    data_point_sum: sum,
  };
  for (const c of histogramColumns) {
    // An OTLP point that is not an exponential histogram has none of them (a classic histogram's
    // count and sum are series of their own); a remote-write row keeps its own.
    const t = opts.prometheusColumns.get(c);
    if (t === undefined) throw new Error(`the remote-write columns have no type for ${c}`);
    otlpOut.push(`CASE WHEN ${type} = 'exponential_histogram' THEN (${exp[c]})::${t} END AS ${q(c)}`);
    rwOut.push(`${has(c) ? `${q(c)}::${t}` : `NULL::${t}`} AS ${q(c)}`);
  }
  return histogramColumns;
}
