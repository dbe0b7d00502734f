import { quotedIdentifier, quotedString } from '@duckdb/node-api';
import { METRIC_NAME_COLUMN } from './storage.ts';

/*
 * Prometheus names for OTLP metrics (otlp.ts maps the rest): the metric name from the OTLP name, unit
 * and type as Prometheus' OTLP translator builds it, label names from attribute keys, and values as text.
 */

const q = quotedIdentifier;
const s = quotedString;

/** UCUM units to Prometheus' unit words (otlptranslator v1.0.0's map, which the exporter uses). */
const UNITS: Record<string, string> = {
  d: 'days',
  h: 'hours',
  min: 'minutes',
  s: 'seconds',
  ms: 'milliseconds',
  us: 'microseconds',
  ns: 'nanoseconds',
  By: 'bytes',
  KiBy: 'kibibytes',
  MiBy: 'mebibytes',
  GiBy: 'gibibytes',
  TiBy: 'tibibytes',
  KBy: 'kilobytes',
  MBy: 'megabytes',
  GBy: 'gigabytes',
  TBy: 'terabytes',
  m: 'meters',
  V: 'volts',
  A: 'amperes',
  J: 'joules',
  W: 'watts',
  g: 'grams',
  Cel: 'celsius',
  Hz: 'hertz',
  '1': '',
  '%': 'percent',
};
const PER_UNITS: Record<string, string> = { s: 'second', m: 'minute', h: 'hour', d: 'day', w: 'week', mo: 'month', y: 'year' };

/** A SQL CASE mapping a text expression through a table (unmapped values stay as they are). */
function mapSql(expr: string, table: Record<string, string>): string {
  return `CASE ${expr} ${Object.entries(table)
    .map(([k, v]) => `WHEN ${s(k)} THEN ${s(v)}`)
    .join(' ')} ELSE ${expr} END`;
}

/** otlptranslator's cleanUpUnit: invalid characters → `_`, runs of `_` → one, no leading `_`. */
const cleanUnitSql = (expr: string) => `ltrim(regexp_replace(regexp_replace(${expr}, '[^a-zA-Z0-9:]', '_', 'g'), '__+', '_', 'g'), '_')`;

/** A float as Prometheus' `le`/`quantile` label text: integral values without a fraction, `+Inf`/`-Inf`. */
export function floatLabelSql(expr: string): string {
  return (
    `CASE WHEN isinf(${expr}) THEN CASE WHEN ${expr} > 0 THEN '+Inf' ELSE '-Inf' END ` +
    `WHEN isnan(${expr}) THEN 'NaN' ` +
    `WHEN ${expr} = trunc(${expr}) AND abs(${expr}) < 1e15 THEN (${expr})::BIGINT::VARCHAR ELSE (${expr})::VARCHAR END`
  );
}

/** An attribute value as label text: as OTel's AnyValue.AsString writes it for scalars. */
export function valueText(column: string, type: string): string {
  const c = q(column);
  if (type === 'VARCHAR') return c;
  if (type === 'DOUBLE' || type === 'FLOAT') return `CASE WHEN ${c} IS NULL THEN NULL ELSE ${floatLabelSql(c)} END`;
  return `${c}::VARCHAR`;
}

/**
 * otlptranslator's label rule (LabelNamer with legacy names), as the exporter configures it: every
 * character outside [a-zA-Z0-9_] becomes `_` (runs of `_` kept), and a leading digit gets `key_`.
 */
export function promLabelName(key: string): string {
  if (key === '') return key;
  const label = key.replace(/[^a-zA-Z0-9_]/gu, '_');
  return /^[0-9]/.test(label) ? `key_${label}` : label;
}

/**
 * The Prometheus name of an OTLP metric's rows as SQL over the columns `metric_name`, `metric_unit`,
 * `metric_type` and `is_monotonic` (otlptranslator's normalizeName). Built in steps over nested
 * SELECTs (`__promql_*` helper columns) so each step is written once.
 */
export function nameLayers(relation: string, has: (c: string) => boolean, where: string): string {
  const name = `coalesce(${q(METRIC_NAME_COLUMN)}, '')`;
  const unit = has('metric_unit') ? `coalesce(${q('metric_unit')}, '')` : `''`;
  const main = `trim(split_part(${unit}, '/', 1))`;
  const per = `CASE WHEN strpos(${unit}, '/') > 0 THEN trim(substr(${unit}, strpos(${unit}, '/') + 1)) ELSE '' END`;
  const l1 =
    `SELECT *, list_filter(regexp_split_to_array(${name}, '[^a-zA-Z0-9:]+'), t -> t <> '') AS __promql_tokens, ` +
    `CASE WHEN ${main} = '' OR regexp_matches(${main}, '[{}]') THEN '' ELSE ${cleanUnitSql(mapSql(main, UNITS))} END AS __promql_main, ` +
    `CASE WHEN ${per} = '' OR regexp_matches(${per}, '[{}]') THEN '' ELSE ${cleanUnitSql(`'per_' || ${mapSql(per, PER_UNITS)}`)} END AS __promql_per ` +
    `FROM ${relation} WHERE ${where}`;
  const perTrim = `regexp_replace(__promql_per, '_$', '')`;
  const l2 =
    `SELECT *, CASE WHEN list_contains(__promql_tokens, __promql_main) THEN '' ELSE __promql_main END AS __promql_main2, ` +
    `CASE WHEN __promql_per = 'per_' OR list_contains(__promql_tokens, ${perTrim}) THEN '' ELSE ${perTrim} END AS __promql_per2 FROM (${l1})`;
  const mainFinal = `CASE WHEN __promql_per2 <> '' THEN regexp_replace(__promql_main2, '_$', '') ELSE __promql_main2 END`;
  const withUnits =
    `list_concat(__promql_tokens, CASE WHEN ${mainFinal} <> '' THEN [${mainFinal}] ELSE []::VARCHAR[] END, ` +
    `CASE WHEN __promql_per2 <> '' THEN [__promql_per2] ELSE []::VARCHAR[] END)`;
  const type = has('metric_type') ? q('metric_type') : 'NULL::VARCHAR';
  const monotonic = has('is_monotonic') ? `coalesce(${q('is_monotonic')}, false)` : 'false';
  const unitRaw = has('metric_unit') ? q('metric_unit') : 'NULL::VARCHAR';
  const typed =
    `CASE WHEN ${type} = 'sum' AND ${monotonic} THEN list_append(list_filter(${withUnits}, t -> t <> 'total'), 'total') ` +
    `WHEN ${type} = 'gauge' AND ${unitRaw} = '1' THEN list_append(list_filter(${withUnits}, t -> t <> 'ratio'), 'ratio') ELSE ${withUnits} END`;
  const joined = `array_to_string(${typed}, '_')`;
  return `SELECT *, CASE WHEN regexp_matches(${joined}, '^[0-9]') THEN '_' || ${joined} ELSE ${joined} END AS __promql_base FROM (${l2})`;
}

/** The SQL text of the Prometheus name rules alone, over a relation with metric_name/unit/type/is_monotonic (for tests). */
export function metricNameSql(relation: string, columns: string[]): string {
  const present = new Set(columns);
  return `SELECT __promql_base FROM (${nameLayers(relation, (c) => present.has(c), 'true')})`;
}
