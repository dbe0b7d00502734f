import { HttpError, badRequest } from '../../http/errors.ts';
import type { ColumnType, FlatRow, RowBatch } from '../types.ts';
import { RequestV2, toNumber, uncompress, WriteRequestV1, type DecodedSample } from './decode.ts';

export interface RemoteWriteDecoded extends RowBatch {
  timeColumn: string;
  version: '1.0' | '2.0';
  samples: number;
  histograms: number;
  exemplars: number;
}

/** A series with more labels than this can never be stored: 400 so the sender drops it. */
export const MAX_LABELS_PER_SERIES = 1000;

/**
 * Columns of a sample row, named as OTel metric data points so that Prometheus samples and OTLP
 * metrics can share one `otel-metrics` dataset (the interface sends remote write with
 * X-P-Log-Source: otel-metrics). Labels become columns named by the label.
 */
export const PROMETHEUS_KNOWN_TYPES: Record<string, ColumnType> = {
  metric_name: 'VARCHAR',
  time_unix_nano: 'TIMESTAMP_NS',
  data_point_value: 'DOUBLE',
  is_stale_marker: 'BOOLEAN',
  metric_type: 'VARCHAR',
  metric_help: 'VARCHAR',
  metric_unit: 'VARCHAR',
  exemplars: 'VARCHAR',
  histogram_count: 'DOUBLE',
  histogram_sum: 'DOUBLE',
  histogram_schema: 'BIGINT',
  histogram_zero_threshold: 'DOUBLE',
  histogram_zero_count: 'DOUBLE',
  histogram_positive_spans: 'VARCHAR',
  histogram_negative_spans: 'VARCHAR',
  histogram_positive_deltas: 'BIGINT[]',
  histogram_negative_deltas: 'BIGINT[]',
  histogram_positive_counts: 'DOUBLE[]',
  histogram_negative_counts: 'DOUBLE[]',
  histogram_custom_values: 'DOUBLE[]',
  histogram_reset_hint: 'BIGINT',
};

const V1_TYPES = ['unknown', 'counter', 'gauge', 'histogram', 'gaugehistogram', 'summary', 'info', 'stateset'];

type Num = Parameters<typeof toNumber>[0];
interface Span {
  offset: number;
  length: number;
}
interface NativeHistogram {
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
interface Meta {
  type?: string;
  help?: string;
  unit?: string;
}

function isoMs(ms: number): string {
  const d = new Date(ms);
  if (Number.isNaN(d.getTime())) throw badRequest(`sample timestamp ${ms} is out of range`);
  return d.toISOString();
}

/** Label name → column; labels named like a fixed column get a `label_` prefix. */
const labelColumn = (name: string) => (name in PROMETHEUS_KNOWN_TYPES || name.startsWith('p_') ? `label_${name}` : name);

function seriesRow(labels: [string, string][], meta: Meta | undefined): FlatRow {
  if (labels.length > MAX_LABELS_PER_SERIES) throw badRequest(`a series has ${labels.length} labels; at most ${MAX_LABELS_PER_SERIES} are accepted`);
  const row: FlatRow = {};
  for (const [name, value] of labels) {
    if (name === '__name__') row.metric_name = value;
    else row[labelColumn(name)] = value;
  }
  if (meta?.type) row.metric_type = meta.type;
  if (meta?.help) row.metric_help = meta.help;
  if (meta?.unit) row.metric_unit = meta.unit;
  return row;
}

function histogramRow(base: FlatRow, h: NativeHistogram): FlatRow {
  const row: FlatRow = { ...base, time_unix_nano: isoMs(toNumber(h.timestamp)) };
  row.metric_type = h.resetHint === 3 ? 'native_gauge_histogram' : 'native_histogram';
  row.histogram_count = h.countFloat !== undefined && h.countInt === undefined ? h.countFloat : toNumber(h.countInt);
  row.histogram_sum = h.sum ?? 0;
  row.histogram_schema = h.schema ?? 0;
  row.histogram_zero_threshold = h.zeroThreshold ?? 0;
  row.histogram_zero_count = h.zeroCountFloat !== undefined && h.zeroCountInt === undefined ? h.zeroCountFloat : toNumber(h.zeroCountInt);
  row.histogram_positive_spans = JSON.stringify((h.positiveSpans ?? []).map((s) => ({ offset: s.offset ?? 0, length: s.length ?? 0 })));
  row.histogram_negative_spans = JSON.stringify((h.negativeSpans ?? []).map((s) => ({ offset: s.offset ?? 0, length: s.length ?? 0 })));
  if (h.positiveDeltas?.length) row.histogram_positive_deltas = h.positiveDeltas.map(toNumber);
  if (h.negativeDeltas?.length) row.histogram_negative_deltas = h.negativeDeltas.map(toNumber);
  if (h.positiveCounts?.length) row.histogram_positive_counts = h.positiveCounts;
  if (h.negativeCounts?.length) row.histogram_negative_counts = h.negativeCounts;
  if (h.customValues?.length) row.histogram_custom_values = h.customValues;
  row.histogram_reset_hint = h.resetHint ?? 0;
  return row;
}

function sampleRow(base: FlatRow, s: DecodedSample): FlatRow {
  return { ...base, time_unix_nano: isoMs(toNumber(s.timestamp)), data_point_value: s.value, is_stale_marker: s.stale };
}

/** Remote write 1.0 metadata is per metric family: it also describes `family_bucket`, `_sum`, `_count`… */
function familyMeta(metadata: Map<string, Meta>, name: string | undefined): Meta | undefined {
  if (!name) return undefined;
  const exact = metadata.get(name);
  if (exact) return exact;
  const m = /^(.*)_(bucket|sum|count|total|created|info)$/.exec(name);
  return m ? metadata.get(m[1]) : undefined;
}

function decodeV1(bytes: Buffer): RemoteWriteDecoded {
  const req = WriteRequestV1.decode(bytes) as unknown as {
    timeseries?: { labels?: { name?: string; value?: string }[]; samples?: DecodedSample[]; exemplars?: unknown[]; histograms?: NativeHistogram[] }[];
    metadata?: { type?: number; metricFamilyName?: string; help?: string; unit?: string }[];
  };
  const metadata = new Map<string, Meta>();
  for (const m of req.metadata ?? []) {
    if (m.metricFamilyName) metadata.set(m.metricFamilyName, { type: V1_TYPES[m.type ?? 0] ?? 'unknown', help: m.help || undefined, unit: m.unit || undefined });
  }
  const rows: FlatRow[] = [];
  let samples = 0;
  let histograms = 0;
  let exemplars = 0;
  for (const ts of req.timeseries ?? []) {
    const labels = (ts.labels ?? []).map((l) => [l.name ?? '', l.value ?? ''] as [string, string]);
    const name = labels.find(([n]) => n === '__name__')?.[1];
    const base = seriesRow(labels, familyMeta(metadata, name));
    const first = rows.length;
    for (const s of ts.samples ?? []) rows.push(sampleRow(base, s));
    for (const h of ts.histograms ?? []) rows.push(histogramRow(base, h));
    samples += ts.samples?.length ?? 0;
    histograms += ts.histograms?.length ?? 0;
    if (ts.exemplars?.length && rows.length > first) {
      exemplars += ts.exemplars.length;
      rows[first].exemplars = JSON.stringify(
        (ts.exemplars as { labels?: { name?: string; value?: string }[]; value?: number; timestamp?: Num }[]).map((e) => ({
          labels: Object.fromEntries((e.labels ?? []).map((l) => [l.name ?? '', l.value ?? ''])),
          value: e.value ?? 0,
          timestamp: isoMs(toNumber(e.timestamp)),
        })),
      );
    }
  }
  return { rows, knownTypes: { ...PROMETHEUS_KNOWN_TYPES }, timeColumn: 'time_unix_nano', version: '1.0', samples, histograms, exemplars };
}

function decodeV2(bytes: Buffer): RemoteWriteDecoded {
  const req = RequestV2.decode(bytes) as unknown as {
    symbols?: string[];
    timeseries?: {
      labelsRefs?: number[];
      samples?: DecodedSample[];
      histograms?: NativeHistogram[];
      exemplars?: { labelsRefs?: number[]; value?: number; timestamp?: Num }[];
      metadata?: { type?: number; helpRef?: number; unitRef?: number };
    }[];
  };
  const symbols = req.symbols ?? [];
  const sym = (i: number | undefined) => {
    if (i === undefined) return '';
    if (i >= symbols.length) throw badRequest(`symbol reference ${i} is outside the symbols table (${symbols.length} entries)`);
    return symbols[i];
  };
  const pairs = (refs: number[] | undefined) => {
    const out: [string, string][] = [];
    const r = refs ?? [];
    if (r.length % 2) throw badRequest('labels_refs must hold name/value pairs (even length)');
    for (let i = 0; i < r.length; i += 2) out.push([sym(r[i]), sym(r[i + 1])]);
    return out;
  };
  const rows: FlatRow[] = [];
  let samples = 0;
  let histograms = 0;
  let exemplars = 0;
  for (const ts of req.timeseries ?? []) {
    const md = ts.metadata;
    const meta: Meta | undefined = md ? { type: V1_TYPES[md.type ?? 0] ?? 'unknown', help: sym(md.helpRef) || undefined, unit: sym(md.unitRef) || undefined } : undefined;
    if (meta?.type === 'unknown') meta.type = undefined;
    const base = seriesRow(pairs(ts.labelsRefs), meta);
    const first = rows.length;
    for (const s of ts.samples ?? []) rows.push(sampleRow(base, s));
    for (const h of ts.histograms ?? []) rows.push(histogramRow(base, h));
    samples += ts.samples?.length ?? 0;
    histograms += ts.histograms?.length ?? 0;
    if (ts.exemplars?.length && rows.length > first) {
      exemplars += ts.exemplars.length;
      rows[first].exemplars = JSON.stringify(
        ts.exemplars.map((e) => ({ labels: Object.fromEntries(pairs(e.labelsRefs)), value: e.value ?? 0, timestamp: isoMs(toNumber(e.timestamp)) })),
      );
    }
  }
  return { rows, knownTypes: { ...PROMETHEUS_KNOWN_TYPES }, timeColumn: 'time_unix_nano', version: '2.0', samples, histograms, exemplars };
}

/**
 * A remote-write body → one row per sample (and per native histogram sample). The protobuf message
 * is chosen by Content-Type: `proto=io.prometheus.write.v2.Request` is 2.0; absent,
 * `application/x-protobuf` or `proto=prometheus.WriteRequest` is 1.0; anything else is 415.
 */
export function decodeRemoteWrite(body: Buffer, contentType: string | undefined, contentEncoding: string | undefined, maxDecompressedBytes: number): RemoteWriteDecoded {
  const ct = (contentType ?? '').toLowerCase().replace(/\s+/g, '');
  const v2 = ct.includes('proto=io.prometheus.write.v2.request');
  if (ct && !ct.startsWith('application/x-protobuf')) throw new HttpError(415, `unsupported Content-Type "${contentType}" for remote write: use application/x-protobuf`);
  if (ct.includes('proto=') && !v2 && !ct.includes('proto=prometheus.writerequest')) throw new HttpError(415, `unsupported remote write message "${contentType}"`);
  const bytes = uncompress(body, contentEncoding, maxDecompressedBytes);
  try {
    return v2 ? decodeV2(bytes) : decodeV1(bytes);
  } catch (err) {
    if (err instanceof HttpError) throw err;
    throw badRequest(`body is not a valid remote write ${v2 ? '2.0 Request' : '1.0 WriteRequest'} protobuf: ${(err as Error).message}`);
  }
}

/** What remote write 2.0 senders read back to confirm what was stored. */
export function remoteWriteResponseHeaders(d: RemoteWriteDecoded): Record<string, string> {
  return {
    'X-Prometheus-Remote-Write-Samples-Written': String(d.samples),
    'X-Prometheus-Remote-Write-Histograms-Written': String(d.histograms),
    'X-Prometheus-Remote-Write-Exemplars-Written': String(d.exemplars),
  };
}
