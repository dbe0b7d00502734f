import type { FlatRow, RowBatch } from '../../model.ts';
import { DomainError, invalidInput, unsupported } from '../../errors.ts';
import { METRIC_TYPES, PROMETHEUS_KNOWN_TYPES, PROMETHEUS_TIME_COLUMN, isoMs, seriesRow, MAX_LABELS_PER_SERIES, type Meta, type NativeHistogram, type Num } from './columns.ts';
import { decodeMessage, RequestV2, toNumber, uncompress, WriteRequestV1, type DecodedSample } from './decode.ts';
import { appendSeries, familyMeta, noTotals, type SeriesSink, type Totals } from './series.ts';

export { MAX_LABELS_PER_SERIES, PROMETHEUS_KNOWN_TYPES, PROMETHEUS_TIME_COLUMN };
export type { SeriesSink };

export interface RemoteWriteDecoded extends RowBatch {
  timeColumn: string;
  version: '1.0' | '2.0';
  samples: number;
  histograms: number;
  exemplars: number;
  /** The range of the sample times, epoch ms (Infinity / -Infinity without samples). */
  minMs: number;
  maxMs: number;
  /** With output 'lines': the rows as WAL lines (and `rows` is empty). */
  lines?: SeriesSink['lines'];
  /** Remote write 1.0 metadata, per metric family, to be remembered for the dataset (docs/console.md). */
  metadata: FamilyMetadata[];
}

/** One metric family's remote write 1.0 metadata; an unset type reads `unknown`, as Prometheus names it. */
export interface FamilyMetadata {
  family: string;
  type: string;
  help: string;
  unit: string;
}

function decodeV1(bytes: Buffer, extra: FlatRow, sink: SeriesSink): RemoteWriteDecoded {
  const req = decodeMessage(WriteRequestV1, bytes) as unknown as {
    timeseries?: { labels?: { name?: string; value?: string }[]; samples?: DecodedSample[]; exemplars?: unknown[]; histograms?: NativeHistogram[] }[];
    metadata?: { type?: number; metricFamilyName?: string; help?: string; unit?: string }[];
  };
  const metadata = new Map<string, Meta>();
  const families: FamilyMetadata[] = [];
  for (const m of req.metadata ?? []) {
    if (!m.metricFamilyName) continue;
    metadata.set(m.metricFamilyName, { type: METRIC_TYPES[m.type ?? 0], help: m.help || undefined, unit: m.unit || undefined });
    families.push({ family: m.metricFamilyName, type: METRIC_TYPES[m.type ?? 0] ?? 'unknown', help: m.help ?? '', unit: m.unit ?? '' });
  }
  const totals: Totals = noTotals();
  for (const ts of req.timeseries ?? []) {
    const labels = (ts.labels ?? []).map((l) => [l.name ?? '', l.value ?? ''] as [string, string]);
    const name = labels.find(([n]) => n === '__name__')?.[1];
    const base = seriesRow(labels, familyMeta(metadata, name), extra);
    appendSeries(sink, totals, base, ts.samples, ts.histograms, () =>
      (ts.exemplars as { labels?: { name?: string; value?: string }[]; value?: number; timestamp?: Num }[] | undefined)?.map((e) => ({
        labels: Object.fromEntries((e.labels ?? []).map((l) => [l.name ?? '', l.value ?? ''])),
        value: e.value ?? 0,
        timestamp: isoMs(toNumber(e.timestamp)),
      })),
    );
  }
  return { rows: sink.rows, lines: sink.lines, knownTypes: { ...PROMETHEUS_KNOWN_TYPES }, timeColumn: PROMETHEUS_TIME_COLUMN, version: '1.0', metadata: families, ...totals };
}

function decodeV2(bytes: Buffer, extra: FlatRow, sink: SeriesSink): RemoteWriteDecoded {
  const req = decodeMessage(RequestV2, bytes) as unknown as {
    symbols?: string[];
    timeseries?: {
      labelsRefs?: number[];
      samples?: DecodedSample[];
      histograms?: NativeHistogram[];
      exemplars?: { labelsRefs?: number[]; value?: number; timestamp?: Num }[];
      metadata?: { type?: number; helpRef?: number; unitRef?: number };
      createdTimestamp?: Num;
    }[];
  };
  const symbols = req.symbols ?? [];
  const sym = (i: number | undefined) => {
    if (i === undefined) return '';
    if (i >= symbols.length) throw invalidInput(`symbol reference ${i} is outside the symbols table (${symbols.length} entries)`);
    return symbols[i];
  };
  const pairs = (refs: number[] | undefined) => {
    const out: [string, string][] = [];
    const r = refs ?? [];
    if (r.length % 2) throw invalidInput('labels_refs must hold name/value pairs (even length)');
    if (r.length / 2 > MAX_LABELS_PER_SERIES) throw invalidInput(`a series has ${r.length / 2} labels; at most ${MAX_LABELS_PER_SERIES} are accepted`);
    for (let i = 0; i < r.length; i += 2) out.push([sym(r[i]), sym(r[i + 1])]);
    return out;
  };
  const totals: Totals = noTotals();
  for (const ts of req.timeseries ?? []) {
    const md = ts.metadata;
    const meta: Meta | undefined = md ? { type: METRIC_TYPES[md.type ?? 0], help: sym(md.helpRef) || undefined, unit: sym(md.unitRef) || undefined } : undefined;
    const base = seriesRow(pairs(ts.labelsRefs), meta, extra);
    // 0 means "not set" in 2.0 (the spec asks for ±1 ms to send the epoch itself).
    const created = toNumber(ts.createdTimestamp);
    if (created !== 0) base.start_time_unix_nano = isoMs(created);
    appendSeries(sink, totals, base, ts.samples, ts.histograms, () =>
      ts.exemplars?.map((e) => ({ labels: Object.fromEntries(pairs(e.labelsRefs)), value: e.value ?? 0, timestamp: isoMs(toNumber(e.timestamp)) })),
    );
  }
  return { rows: sink.rows, lines: sink.lines, knownTypes: { ...PROMETHEUS_KNOWN_TYPES }, timeColumn: PROMETHEUS_TIME_COLUMN, version: '2.0', metadata: [], ...totals };
}

/**
 * Content-Type → protocol version. Absent, bare `application/x-protobuf` or
 * `proto=prometheus.WriteRequest` is 1.0 (what 1.x senders send); `proto=io.prometheus.write.v2.Request`
 * is 2.0. Anything else is 415, which 2.0 senders read as "fall back to another message".
 */
export function remoteWriteVersion(contentType: string | undefined): '1.0' | '2.0' {
  if (contentType === undefined || contentType.trim() === '') return '1.0';
  const [mediaType, ...params] = contentType.split(';').map((p) => p.trim());
  if (mediaType.toLowerCase() !== 'application/x-protobuf') {
    throw unsupported(`unsupported Content-Type "${contentType}" for remote write: use application/x-protobuf`);
  }
  const proto = params.map((p) => p.split('=')).find(([k]) => k.trim().toLowerCase() === 'proto')?.[1]?.trim().replace(/^"|"$/g, '');
  if (proto === undefined || proto === 'prometheus.WriteRequest') return '1.0';
  if (proto === 'io.prometheus.write.v2.Request') return '2.0';
  throw unsupported(`unsupported remote write message "${proto}": use prometheus.WriteRequest or io.prometheus.write.v2.Request`);
}

/**
 * A remote-write body → one row per sample (and per native histogram sample). Errors are DomainErrors:
 * 415 for a Content-Type or Content-Encoding this endpoint does not speak, 413 when the snappy header
 * declares more than `maxDecompressedBytes`, and 400 for anything that can never succeed (corrupt
 * snappy, invalid protobuf, broken symbol references, too many labels), so that Prometheus drops the
 * batch instead of retrying it forever. `extra`: columns every row gets (the service's `p_timestamp`),
 * set once per series rather than per row. `output: 'lines'` fills `lines` (WAL lines) instead of `rows`.
 */
export function decodeRemoteWrite(
  body: Buffer,
  contentType: string | undefined,
  contentEncoding: string | undefined,
  maxDecompressedBytes: number,
  extra: FlatRow = {},
  output: 'rows' | 'lines' = 'rows',
): RemoteWriteDecoded {
  const version = remoteWriteVersion(contentType);
  return decodeRemoteWriteBytes(version, uncompress(body, contentEncoding, maxDecompressedBytes), extra, output);
}

/** `decodeRemoteWrite` of a body already uncompressed, of a version already known. */
export function decodeRemoteWriteBytes(version: '1.0' | '2.0', bytes: Buffer, extra: FlatRow = {}, output: 'rows' | 'lines' = 'rows'): RemoteWriteDecoded {
  const sink: SeriesSink = { rows: [], lines: output === 'lines' ? { text: '', count: 0, types: new Map() } : undefined };
  try {
    return version === '2.0' ? decodeV2(bytes, extra, sink) : decodeV1(bytes, extra, sink);
  } catch (err) {
    if (err instanceof DomainError) throw err;
    throw invalidInput(`body is not a valid remote write ${version === '2.0' ? '2.0 Request' : '1.0 WriteRequest'} protobuf: ${(err as Error).message}`);
  }
}

/** What remote write 2.0 senders read back to confirm what was stored. */
export function remoteWriteResponseHeaders(d: { samples?: number; histograms?: number; exemplars?: number }): Record<string, string> {
  return {
    'X-Prometheus-Remote-Write-Samples-Written': String(d.samples ?? 0),
    'X-Prometheus-Remote-Write-Histograms-Written': String(d.histograms ?? 0),
    'X-Prometheus-Remote-Write-Exemplars-Written': String(d.exemplars ?? 0),
  };
}
