/**
 * Request body → rows, for every ingestion format, as one pure function: it runs in the ingest
 * worker threads, and on the event loop when a batch has to be rebuilt there.
 */
import { parseJson } from '../http/body.ts';
import { rowToJsonLine, summarizeTypes, type TypeSummary } from '../storage/schema.ts';
import { decodeBody } from './compression.ts';
import { JSON_KNOWN_TYPES, jsonEventsToBatch, type EventStamp } from './jsonEvents.ts';
import { decodeOtlp, type OtlpFormat, type OtlpSignal } from './otlp/index.ts';
import { decodeRemoteWrite } from './prometheus/index.ts';
import type { RowBatch } from '../model.ts';

export type IngestJob =
  | { kind: 'json'; body: Uint8Array; contentEncoding?: string; maxDecompressedBytes: number; stamp: EventStamp; maxDepth: number }
  | { kind: 'otlp'; body: Uint8Array; contentEncoding?: string; maxDecompressedBytes: number; signal: OtlpSignal; format: OtlpFormat; received: string }
  | { kind: 'prometheus'; body: Uint8Array; contentEncoding?: string; maxDecompressedBytes: number; contentType?: string; received: string };

/** What the response needs besides the row count (OTLP partial success, remote-write counts). */
export interface IngestInfo {
  rejected?: number;
  rejectionMessage?: string;
  samples?: number;
  histograms?: number;
  exemplars?: number;
}

const asBuffer = (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength);

/** Every OTLP and Prometheus row also gets `p_timestamp`, the receive time, as JSON events do. */
function stampReceiveTime(batch: RowBatch, received: string): RowBatch {
  for (const row of batch.rows) row.p_timestamp = received;
  return { rows: batch.rows, knownTypes: { ...batch.knownTypes, p_timestamp: 'TIMESTAMP' } };
}

/** Remote write with the receive time as `p_timestamp` on every row. */
function decodePrometheus(job: Extract<IngestJob, { kind: 'prometheus' }>, output: 'rows' | 'lines') {
  return decodeRemoteWrite(asBuffer(job.body), job.contentType, job.contentEncoding, job.maxDecompressedBytes, { p_timestamp: job.received }, output);
}

const remoteWriteInfo = (d: { samples: number; histograms: number; exemplars: number }): IngestInfo => ({ samples: d.samples, histograms: d.histograms, exemplars: d.exemplars });

export function decodeJob(job: IngestJob): { batch: RowBatch; info: IngestInfo } {
  switch (job.kind) {
    case 'json': {
      const body = decodeBody(asBuffer(job.body), job.contentEncoding, job.maxDecompressedBytes);
      return { batch: jsonEventsToBatch(parseJson(body), job.stamp, job.maxDepth), info: {} };
    }
    case 'otlp': {
      const body = decodeBody(asBuffer(job.body), job.contentEncoding, job.maxDecompressedBytes);
      const d = decodeOtlp(job.signal, job.format, body, new Date(job.received));
      return { batch: stampReceiveTime(d, job.received), info: { rejected: d.rejected, rejectionMessage: d.rejectionMessage } };
    }
    case 'prometheus': {
      const d = decodePrometheus(job, 'rows');
      return { batch: { rows: d.rows, knownTypes: { ...d.knownTypes, p_timestamp: 'TIMESTAMP' } }, info: remoteWriteInfo(d) };
    }
  }
}

export interface SerializedBatch {
  lines: string;
  rows: number;
  types: TypeSummary;
  info: IngestInfo;
}

/** Decodes and serialises to WAL lines, with the types the rows carry (schema checks happen later). */
export function serializeJob(job: IngestJob): SerializedBatch {
  if (job.kind === 'prometheus') {
    const d = decodePrometheus(job, 'lines');
    const lines = d.lines!;
    if (lines.count) lines.types.set('p_timestamp', ['TIMESTAMP']);
    return { lines: lines.text, rows: lines.count, types: lines.types, info: remoteWriteInfo(d) };
  }
  const { batch, info } = decodeJob(job);
  const types = summarizeTypes(batch.rows, job.kind === 'json' ? JSON_KNOWN_TYPES : batch.knownTypes);
  let lines = '';
  for (const row of batch.rows) lines += `${rowToJsonLine(row)}\n`;
  return { lines, rows: batch.rows.length, types, info };
}
