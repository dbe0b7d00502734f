import { quotedIdentifier, quotedString } from '@duckdb/node-api';
import { SERIES_MAX_TIME, SERIES_MIN_TIME, timestampLiteral } from '../storage/scan.ts';

/*
 * The storage side of the PromQL engine (promql/main.go): the SQL that selects a selector's series from
 * a metrics dataset's view, and the binary answer the Go side decodes. Pure functions, run in the query
 * worker process.
 */

/** A label matcher as the engine sends it (Prometheus' labels.MatchType strings). */
export interface Matcher {
  type: '=' | '!=' | '=~' | '!~';
  name: string;
  value: string;
}

export interface SeriesRequest {
  matchers: Matcher[];
  /** Inclusive bounds, epoch milliseconds (the engine's select hints). */
  start: number;
  end: number;
  /**
   * Only the label sets (series, labels and label values calls), read from the dataset's series
   * relation (storage's seriesRelationSql: one row per label set and file, with its first and last time).
   */
  labelsOnly: boolean;
}

/** The metric name is stored in its own column; every other label in a column of its own name (see the grant's map). */
export const METRIC_NAME_COLUMN = 'metric_name';
export const VALUE_COLUMN = 'data_point_value';
export const STALE_COLUMN = 'is_stale_marker';

/**
 * Columns of a native histogram sample (src/ingest/prometheus/series.ts), by the key the Go side reads
 * them under. The sum travels as the sample's float value (JSON could not carry a NaN).
 */
export const HISTOGRAM_COLUMNS: Record<string, string> = {
  data_point_count: 'count',
  data_point_scale: 'schema',
  data_point_zero_threshold: 'zt',
  data_point_zero_count: 'zc',
  data_point_positive_spans: 'ps',
  data_point_negative_spans: 'ns',
  data_point_positive_deltas: 'pd',
  data_point_negative_deltas: 'nd',
  data_point_positive_counts: 'pc',
  data_point_negative_counts: 'nc',
  data_point_custom_values: 'cv',
  data_point_reset_hint: 'rh',
};
const HISTOGRAM_SUM = 'data_point_sum';
const SPAN_COLUMNS = new Set(['data_point_positive_spans', 'data_point_negative_spans']);

/**
 * One matcher as a SQL condition on its column, or undefined when it cannot be expressed exactly
 * enough (the Go side checks every matcher again, so a condition here only has to keep every row that
 * matches: it may keep more). A label stored as NULL or '' is the empty value, as in Prometheus.
 * Regular expressions are fully anchored like Prometheus' and `.` matches a newline (Prometheus 3);
 * DuckDB's regexp functions are RE2, the same syntax Go's regexp implements.
 */
export function matcherSql(m: Matcher, column: string | undefined, withRegex: boolean): string | undefined {
  const value = column === undefined ? `''` : `coalesce(${quotedIdentifier(column)}, '')`;
  switch (m.type) {
    case '=':
      return `${value} = ${quotedString(m.value)}`;
    case '!=':
      return `${value} <> ${quotedString(m.value)}`;
    case '=~':
      return withRegex ? `regexp_full_match(${value}, ${quotedString(`(?s:${m.value})`)})` : undefined;
    case '!~':
      return withRegex ? `NOT regexp_full_match(${value}, ${quotedString(`(?s:${m.value})`)})` : undefined;
  }
}

/**
 * The SELECT of a selector's series in [start, end]: one row per series with its label columns and, unless
 * only labels are asked for, its samples (floats, staleness markers and native histograms) as one text
 * (see `SeriesRow`).
 */
export function seriesSql(
  view: string,
  timeColumn: string,
  stale: boolean,
  labels: { label: string; column: string }[],
  req: SeriesRequest,
  withRegex = true,
  histogramColumns: string[] = [],
  /** The dataset has the float value column (a dataset that only ever got native histograms has not). */
  hasValue = true,
): string {
  const byLabel = new Map(labels.map((l) => [l.label, l.column]));
  if (req.labelsOnly) return labelSetsSql(view, labels, req, byLabel, withRegex);
  const t = quotedIdentifier(timeColumn);
  const staleSql = stale ? `coalesce(${quotedIdentifier(STALE_COLUMN)}, false)` : 'false';
  const valueSql = hasValue ? quotedIdentifier(VALUE_COLUMN) : 'NULL::DOUBLE';
  // Native histogram samples need their schema at least; their other columns may be missing (NULL).
  const present = new Set(histogramColumns);
  const histograms = present.has('data_point_scale');
  const hjson = histograms
    ? `CASE WHEN ${valueSql} IS NULL AND NOT ${staleSql} THEN json_object(${Object.entries(HISTOGRAM_COLUMNS)
        .map(([col, key]) => `'${key}', ${present.has(col) ? (SPAN_COLUMNS.has(col) ? `json(${quotedIdentifier(col)})` : quotedIdentifier(col)) : 'NULL'}`)
        .join(', ')})::VARCHAR END`
    : 'NULL::VARCHAR';
  const value = histograms && present.has(HISTOGRAM_SUM) ? `coalesce(${valueSql}, ${quotedIdentifier(HISTOGRAM_SUM)})` : valueSql;
  const where = [
    `${t} >= ${timestampLiteral(clampMs(req.start))}`,
    `${t} < ${timestampLiteral(clampMs(req.end) + 1)}`,
    `(${valueSql} IS NOT NULL OR ${staleSql}${histograms ? ` OR ${quotedIdentifier('data_point_scale')} IS NOT NULL` : ''})`,
  ];
  for (const m of req.matchers) {
    const cond = matcherSql(m, byLabel.get(m.name), withRegex);
    if (cond) where.push(cond);
  }
  const cols = labels.map((l) => quotedIdentifier(l.column));
  const colList = cols.length ? cols.join(', ') : `NULL AS "__none"`;
  const inner = `SELECT ${cols.length ? `${cols.join(', ')}, ` : ''}epoch_ms(${t}::TIMESTAMP) AS __t, ${value} AS __v, ${staleSql} AS __s, ${hjson} AS __h FROM ${view} WHERE ${where.join(' AND ')}`;
  // Samples travel as text, one string per series: a JS value per sample (DuckDB lists converted to
  // arrays) cost ten times more than the query. One line per sample: ms time, value (DuckDB prints
  // doubles in their shortest round-trip form, so the Go side parses back the same bits), staleness
  // flag and, for a native histogram, its columns as JSON. Unordered: an ordered aggregate sorts each
  // series (measured 5–9× the cost of the rest of the query); the Go side sorts each series instead.
  return (
    `SELECT ${colList}, string_agg(concat_ws(' ', __t, coalesce(__v::VARCHAR, 'nan'), CASE WHEN __s THEN '1' ELSE '0' END, __h), chr(10)) AS __samples ` +
    `FROM (${inner}) GROUP BY ALL`
  );
}

/**
 * The distinct label sets of the series relation `view` whose time span in a file overlaps [start, end]
 * (a label set's first and last time per file: within a file, a series that pauses over the whole
 * range still counts, as a Prometheus block's index would count it).
 */
function labelSetsSql(view: string, labels: { label: string; column: string }[], req: SeriesRequest, byLabel: Map<string, string>, withRegex: boolean): string {
  const where = [`${SERIES_MAX_TIME} >= ${timestampLiteral(clampMs(req.start))}`, `${SERIES_MIN_TIME} < ${timestampLiteral(clampMs(req.end) + 1)}`];
  for (const m of req.matchers) {
    const cond = matcherSql(m, byLabel.get(m.name), withRegex);
    if (cond) where.push(cond);
  }
  const cols = labels.map((l) => quotedIdentifier(l.column));
  return `SELECT DISTINCT ${cols.length ? cols.join(', ') : `NULL AS "__none"`} FROM ${view} WHERE ${where.join(' AND ')}`;
}

/**
 * What a nanosecond timestamp holds (years 1677–2262), the type of a metrics dataset's time column: the
 * engine asks for ±2^63 ms when a call is unbounded.
 */
export const MIN_MS = -9_223_372_036_854;
export const MAX_MS = 9_223_372_036_853;
export const clampMs = (ms: number) => Math.min(MAX_MS, Math.max(MIN_MS, ms));

/**
 * A selected series: label values by the grant's label order (null: absent), and its samples as the
 * query's text, one line per sample in any order: `<ms> <value> <0|1 stale>[ <histogram JSON>]`.
 */
export interface SeriesRow {
  values: (string | null)[];
  samples?: string | null;
}

const encoder = new TextEncoder();

/**
 * The binary answer promql/main.go `decodeSeries` reads (little-endian): u32 series; per series u32
 * labels, each u32 length + UTF-8 name and u32 length + UTF-8 value; then u32 length + UTF-8 text of
 * the series' samples as `SeriesRow` describes them.
 */
export function encodeSeries(labelNames: string[], rows: SeriesRow[]): Uint8Array {
  const names = labelNames.map((n) => encoder.encode(n));
  let size = 4;
  const encoded = rows.map((r) => {
    const labels: [Uint8Array, Uint8Array][] = [];
    r.values.forEach((v, i) => {
      if (v !== null && v !== '') labels.push([names[i], encoder.encode(v)]);
    });
    const texts = [encoder.encode(r.samples ?? '')];
    size += 4 + labels.reduce((a, [k, v]) => a + 8 + k.length + v.length, 0) + texts.reduce((a, t) => a + 4 + t.length, 0);
    return { labels, texts };
  });
  const buf = new Uint8Array(size);
  const dv = new DataView(buf.buffer);
  let off = 0;
  const bytes = (b: Uint8Array) => {
    dv.setUint32(off, b.length, true);
    off += 4;
    buf.set(b, off);
    off += b.length;
  };
  dv.setUint32(off, rows.length, true);
  off += 4;
  for (const { labels, texts } of encoded) {
    dv.setUint32(off, labels.length, true);
    off += 4;
    for (const [k, v] of labels) {
      bytes(k);
      bytes(v);
    }
    for (const t of texts) bytes(t);
  }
  return buf;
}

/**
 * The label columns of a metrics dataset's schema: every text column but the fixed ones of a sample row
 * and the server's `p_` columns. A label whose name collides with a fixed column was stored as
 * `label_<name>` (src/ingest/prometheus/columns.ts) and is read back under its own name.
 */
export function labelColumns(schema: Record<string, string>, fixed: ReadonlySet<string>): { label: string; column: string }[] {
  const out: { label: string; column: string }[] = [];
  for (const [column, type] of Object.entries(schema)) {
    if (type !== 'VARCHAR' || /^p_/i.test(column)) continue;
    if (column === METRIC_NAME_COLUMN) {
      out.push({ label: '__name__', column });
      continue;
    }
    if (fixed.has(column)) continue;
    const m = /^label_(.*)$/.exec(column);
    if (m && (fixed.has(m[1]) || /^p_/i.test(m[1]))) out.push({ label: m[1], column });
    else out.push({ label: column, column });
  }
  return out;
}
