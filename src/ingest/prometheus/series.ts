import { inferType, type ColumnType, type FlatRow, type TypeSummary } from '../../model.ts';
import { rowToJsonLine } from '../worker/lines.ts';
import { copyRow } from '../names.ts';
import { summarizeTypes } from '../worker/placement.ts';
import { isoMs, KNOWN, PROMETHEUS_KNOWN_TYPES, type Meta, type NativeHistogram } from './columns.ts';
import { toNumber, type DecodedSample } from './decode.ts';

/*
 * A series' samples and native histogram samples → rows, or straight to WAL lines (the ingest
 * workers' path, where the labels' JSON is built once per series).
 */

const f64 = new Float64Array(1);
const u32 = new Uint32Array(f64.buffer);
/**
 * A stale native histogram carries the staleness NaN as its sum. protobufjs has already made the sum a
 * JS number here; V8 keeps NaN payloads through plain loads and stores, which is all it went through,
 * so its bits are read back from the number (unlike float samples, which get their raw bytes checked).
 */
function isStaleNumber(x: number | undefined): boolean {
  if (x === undefined || !Number.isNaN(x)) return false;
  f64[0] = x;
  return u32[0] === 0x00000002 && u32[1] === 0x7ff00000;
}

function histogramRow(base: FlatRow, h: NativeHistogram): FlatRow {
  const row: FlatRow = { ...base, time_unix_nano: isoMs(toNumber(h.timestamp)), is_stale_marker: isStaleNumber(h.sum) };
  row.metric_type = h.resetHint === 3 ? 'native_gauge_histogram' : 'native_histogram';
  row.data_point_count = h.count === 'countFloat' ? (h.countFloat ?? 0) : toNumber(h.countInt);
  row.data_point_sum = h.sum ?? 0;
  row.data_point_scale = h.schema ?? 0;
  row.data_point_zero_threshold = h.zeroThreshold ?? 0;
  row.data_point_zero_count = h.zeroCount === 'zeroCountFloat' ? (h.zeroCountFloat ?? 0) : toNumber(h.zeroCountInt);
  row.data_point_positive_spans = JSON.stringify((h.positiveSpans ?? []).map((s) => ({ offset: s.offset ?? 0, length: s.length ?? 0 })));
  row.data_point_negative_spans = JSON.stringify((h.negativeSpans ?? []).map((s) => ({ offset: s.offset ?? 0, length: s.length ?? 0 })));
  if (h.positiveDeltas?.length) row.data_point_positive_deltas = h.positiveDeltas.map(toNumber);
  if (h.negativeDeltas?.length) row.data_point_negative_deltas = h.negativeDeltas.map(toNumber);
  if (h.positiveCounts?.length) row.data_point_positive_counts = h.positiveCounts;
  if (h.negativeCounts?.length) row.data_point_negative_counts = h.negativeCounts;
  if (h.customValues?.length) row.data_point_custom_values = h.customValues;
  row.data_point_reset_hint = h.resetHint ?? 0;
  return row;
}

function sampleRow(base: FlatRow, s: DecodedSample): FlatRow {
  // Object.assign (in copyRow), not spread: measured several times faster in Node 20 for these wide rows.
  const row = copyRow(base);
  row.time_unix_nano = isoMs(toNumber(s.timestamp));
  row.data_point_value = s.value;
  row.is_stale_marker = s.stale;
  return row;
}

/**
 * Remote write 1.0 metadata is per metric family: it also describes `family_bucket`, `_sum`, `_count`…
 * Prometheus sends it in its own requests (every metadata_config.send_interval, 1m by default), not
 * with the samples, so it only reaches rows of senders that put both in one request; the dataset
 * remembers it for the rest (src/storage/metricMetadata.ts).
 */
export function familyMeta(metadata: Map<string, Meta>, name: string | undefined): Meta | undefined {
  if (!name) return undefined;
  const exact = metadata.get(name);
  if (exact) return exact;
  const m = /^(.*)_(bucket|sum|count|total|created|info)$/.exec(name);
  return m ? metadata.get(m[1]) : undefined;
}

export interface Totals {
  samples: number;
  histograms: number;
  exemplars: number;
  /** The range of the sample and histogram times, epoch ms (the ingest side checks it against its window). */
  minMs: number;
  maxMs: number;
}

/** Totals before the first series. */
export const noTotals = (): Totals => ({ samples: 0, histograms: 0, exemplars: 0, minMs: Infinity, maxMs: -Infinity });

/**
 * Where a series' rows go: row objects (the general path), or straight to WAL lines (the ingest
 * workers' path: a series' labels are serialised once, not once per sample).
 */
export interface SeriesSink {
  rows: FlatRow[];
  /** Set in line mode: the WAL lines and the per-column types of what they hold. */
  lines?: { text: string; count: number; types: TypeSummary };
}

const SAMPLE_TYPES: [string, ColumnType][] = [
  ['time_unix_nano', 'TIMESTAMP_NS'],
  ['data_point_value', 'DOUBLE'],
  ['is_stale_marker', 'BOOLEAN'],
];

function jsonNumber(v: number): string {
  // String(-0) is "0": the sign of a negative zero (which PromQL's count_values tells apart) is kept.
  if (Number.isFinite(v)) return v === 0 && 1 / v < 0 ? '-0.0' : String(v);
  return Number.isNaN(v) ? '"NaN"' : v > 0 ? '"Infinity"' : '"-Infinity"';
}

function addType(types: TypeSummary, name: string, type: ColumnType): void {
  const seen = types.get(name);
  if (!seen) types.set(name, [type]);
  else if (!seen.includes(type)) seen.push(type);
}

/** Widens the totals' time range to a series' sample and histogram times. */
function widenTo(totals: Totals, samples: DecodedSample[] | undefined, histograms: NativeHistogram[] | undefined): void {
  const widen = (ms: number) => {
    if (ms < totals.minMs) totals.minMs = ms;
    if (ms > totals.maxMs) totals.maxMs = ms;
  };
  for (const s of samples ?? []) widen(toNumber(s.timestamp));
  for (const h of histograms ?? []) widen(toNumber(h.timestamp));
}

/** The common case, plain samples: the labels' JSON is built once for the whole series. */
function appendPlainSamples(lines: NonNullable<SeriesSink['lines']>, base: FlatRow, samples: DecodedSample[]): void {
  const prefix = `${JSON.stringify(base).slice(0, -1)},"time_unix_nano":"`;
  let text = '';
  for (const s of samples) {
    text += `${prefix}${isoMs(toNumber(s.timestamp))}","data_point_value":${jsonNumber(s.value)},"is_stale_marker":${s.stale}}\n`;
  }
  lines.text += text;
  lines.count += samples.length;
  for (const name in base) {
    const type = KNOWN[name] ?? inferType(base[name]);
    if (type) addType(lines.types, name, type);
  }
  for (const [name, type] of SAMPLE_TYPES) addType(lines.types, name, type);
}

function seriesRows(base: FlatRow, samples: DecodedSample[], histograms: NativeHistogram[], ex: unknown[] | undefined): FlatRow[] {
  const rows: FlatRow[] = [];
  for (const s of samples) rows.push(sampleRow(base, s));
  for (const h of histograms) rows.push(histogramRow(base, h));
  if (ex?.length) rows[0].data_point_exemplars = JSON.stringify(ex);
  return rows;
}

/**
 * One row per sample and per native histogram sample of a series. Exemplars ride on the series' first
 * row; a series with exemplars but no samples (how Prometheus' 1.0 sender ships them) has no row to
 * carry them: they are dropped and not counted as written.
 */
export function appendSeries(
  sink: SeriesSink,
  totals: Totals,
  base: FlatRow,
  samples: DecodedSample[] | undefined,
  histograms: NativeHistogram[] | undefined,
  exemplars: () => { labels: Record<string, string>; value: number; timestamp: string }[] | undefined,
): void {
  totals.samples += samples?.length ?? 0;
  totals.histograms += histograms?.length ?? 0;
  if (!samples?.length && !histograms?.length) return;
  widenTo(totals, samples, histograms);
  const ex = exemplars();
  if (ex?.length) totals.exemplars += ex.length;
  const lines = sink.lines;
  if (lines && !histograms?.length && !ex?.length) return appendPlainSamples(lines, base, samples!);
  const rows = seriesRows(base, samples ?? [], histograms ?? [], ex);
  if (!lines) {
    for (const r of rows) sink.rows.push(r);
    return;
  }
  for (const [name, types] of summarizeTypes(rows, PROMETHEUS_KNOWN_TYPES)) for (const t of types) addType(lines.types, name, t);
  for (const r of rows) lines.text += `${rowToJsonLine(r)}\n`;
  lines.count += rows.length;
}
