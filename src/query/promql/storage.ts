import duckdb from '@duckdb/node-bindings';
import { DuckDBVector, quotedIdentifier, quotedString, type DuckDBMaterializedResult } from '@duckdb/node-api';
import { tooLarge } from '../../errors.ts';
import { SERIES_MAX_TIME, SERIES_MIN_TIME, timestampLiteral } from '../../storage/scan.ts';

/*
 * The storage side of the PromQL engine (promql/engine.go): the SQL that selects a selector's series
 * from a metrics dataset's view, and the binary answer the Go side decodes. Run in the query worker
 * process.
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
 * them under (as JSON). The sum travels as the sample's float value (JSON could not carry a NaN).
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

/** A sample's kind, as the Go side reads it: a float, a staleness marker, or a native histogram. */
const SAMPLE_FLOAT = 0;
const SAMPLE_STALE = 1;
const SAMPLE_HISTOGRAM = 2;

/**
 * The SELECT of a selector's series in [start, end]: one row per series with its label columns and, unless
 * only labels are asked for, its samples as one list of structs (time in ms, value, kind and, where the
 * dataset has native histograms, a histogram's columns as JSON), which `encodeSeries` reads straight
 * from DuckDB's vectors. The lists are in no particular order: the Go side sorts a series whose samples
 * are not (an ordered aggregate sorts every series, measured 5–9× the cost of the rest of the query).
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
  /** Integer columns of `view` carried into each sample's struct after its kind (the sample cache's file index). */
  carry: string[] = [],
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
    : undefined;
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
  // A missing value (a histogram without its sum) is NaN, as Prometheus reads it.
  const kind = `CASE WHEN __s THEN ${SAMPLE_STALE}${hjson ? ` WHEN __h IS NOT NULL THEN ${SAMPLE_HISTOGRAM}` : ''} ELSE ${SAMPLE_FLOAT} END::UTINYINT`;
  const carried = carry.map((c) => `, ${quotedIdentifier(c)}`).join('');
  const inner =
    `SELECT ${cols.length ? `${cols.join(', ')}, ` : ''}epoch_ms(${t}::TIMESTAMP) AS __t, coalesce(${value}, 'NaN'::DOUBLE) AS __v, ${staleSql} AS __s` +
    `${hjson ? `, ${hjson} AS __h` : ''}${carried} FROM ${view} WHERE ${where.join(' AND ')}`;
  const fields = carry.map((c) => `, ${quotedString(c)}: ${quotedIdentifier(c)}`).join('');
  return `SELECT ${colList}, list({'t': __t, 'v': __v, 'k': ${kind}${fields}${hjson ? `, 'h': __h` : ''}}) AS __samples FROM (${inner}) GROUP BY ALL`;
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

const encoder = new TextEncoder();

/**
 * The binary answer promql/engine.go `decodeSeries` reads (little-endian), from the rows of `seriesSql`
 * (label columns by `labelNames`' order, then, unless labels only, the samples' list): u32 series; per
 * series u32 labels, each a u32 length + UTF-8 name and value (empty values left out: an absent label);
 * u32 samples n, then n i64 times, n f64 values, n u8 kinds, and per native histogram sample a u32
 * length + its JSON. The samples are copied from DuckDB's vectors as they are (no value per sample is
 * made in JavaScript: that cost ten times more than the query). Returned as parts, to be written in order.
 */
export function encodeSeries(labelNames: string[], result: DuckDBMaterializedResult, labelsOnly: boolean): Uint8Array[] {
  const names = labelNames.map((n) => encoder.encode(n));
  const parts: Uint8Array[] = [];
  let bytes = 0;
  const push = (b: Uint8Array) => {
    parts.push(b);
    bytes += b.length;
  };
  const count = new Uint8Array(4);
  push(count);
  let series = 0;
  for (let c = 0; c < result.chunkCount; c++) {
    const chunk = result.getChunk(c);
    const rows = chunk.rowCount;
    if (rows === 0) continue;
    const labelVectors = names.map((_, i) => chunk.getColumnVector(i));
    let samples: ReturnType<typeof sampleVectors> | undefined;
    if (!labelsOnly) samples = sampleVectors(chunk.chunk, Math.max(names.length, 1), rows);
    for (let r = 0; r < rows; r++) {
      const labels: [Uint8Array, Uint8Array][] = [];
      labelVectors.forEach((v, i) => {
        const value = v.getItem(r);
        if (typeof value === 'string' && value !== '') labels.push([names[i], encoder.encode(value)]);
      });
      const n = samples ? Number(samples.entries.getBigUint64(16 * r + 8, true)) : 0;
      const head = new Uint8Array(8 + labels.reduce((a, [k, v]) => a + 8 + k.length + v.length, 0));
      const dv = new DataView(head.buffer);
      let off = 0;
      const u32 = (x: number) => {
        dv.setUint32(off, x, true);
        off += 4;
      };
      u32(labels.length);
      for (const [k, v] of labels) {
        u32(k.length);
        head.set(k, off);
        off += k.length;
        u32(v.length);
        head.set(v, off);
        off += v.length;
      }
      u32(n);
      push(head);
      if (samples && n > 0) {
        const first = Number(samples.entries.getBigUint64(16 * r, true));
        // Copies: the vectors' memory is DuckDB's, valid only while the result is (the bindings give
        // Buffers, whose slice is a view: hence new Uint8Array of a subarray).
        push(new Uint8Array(samples.t.subarray(8 * first, 8 * (first + n))));
        push(new Uint8Array(samples.v.subarray(8 * first, 8 * (first + n))));
        const kinds = new Uint8Array(samples.k.subarray(first, first + n));
        push(kinds);
        if (samples.h) pushHistograms(samples.h, kinds, first, push);
      }
      series++;
      if (bytes > MAX_ANSWER_BYTES) throw tooLarge(`a selector selected more than ${MAX_ANSWER_BYTES / 2 ** 30} GiB of samples: narrow it (labels, time range)`);
    }
  }
  new DataView(count.buffer).setUint32(0, series, true);
  return parts;
}

/** Each native histogram sample's JSON, with its u32 length, in the order of the samples. */
function pushHistograms(h: { getItem(i: number): unknown }, kinds: Uint8Array, first: number, push: (b: Uint8Array) => void): void {
  for (let i = 0; i < kinds.length; i++) {
    if (kinds[i] !== SAMPLE_HISTOGRAM) continue;
    const json = encoder.encode(String(h.getItem(first + i) ?? ''));
    const len = new Uint8Array(4);
    new DataView(len.buffer).setUint32(0, json.length, true);
    push(len);
    push(json);
  }
}

/** A frame to the engine has a u32 length. */
const MAX_ANSWER_BYTES = 2 ** 32 - 64;

/**
 * The samples' list column of a chunk, as DuckDB holds it: per row the (offset, length) of its elements,
 * and the struct's fields as contiguous vectors of all the chunk's elements (the times BIGINT, values
 * DOUBLE and kinds UTINYINT read as raw bytes, the histograms' JSON read as strings where needed).
 * None of these fields holds a NULL (seriesSql coalesces them), so the raw bytes are the values.
 */
export function sampleVectors(chunk: duckdb.DataChunk, column: number, rows: number, carried = 0) {
  const list = duckdb.data_chunk_get_vector(chunk, column);
  const raw = duckdb.vector_get_data(list, rows * 16);
  const entries = new DataView(raw.buffer, raw.byteOffset, rows * 16);
  const child = duckdb.list_vector_get_child(list);
  const size = duckdb.list_vector_get_size(list);
  const field = (i: number, width: number) => duckdb.vector_get_data(duckdb.struct_vector_get_child(child, i), size * width);
  const fields = duckdb.struct_type_child_count(duckdb.vector_get_column_type(child));
  return {
    entries,
    t: field(0, 8),
    v: field(1, 8),
    k: field(2, 1),
    /** The carried INTEGER fields (seriesSql's `carry`), as raw bytes. */
    carried: Array.from({ length: carried }, (_, i) => field(3 + i, 4)),
    h: fields > 3 + carried ? DuckDBVector.create(duckdb.struct_vector_get_child(child, 3 + carried), size) : undefined,
  };
}

/**
 * The label columns of a metrics dataset's schema: every text column but the fixed ones of a sample row
 * and the server's `p_` columns. A label whose name collides with a fixed column was stored as
 * `label_<name>` (src/ingest/prometheus/columns.ts) and is read back under its own name.
 */
export function labelColumns(schema: Record<string, string>, fixed: { has(column: string): boolean }): { label: string; column: string }[] {
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
