/**
 * Request body → WAL lines, for every ingestion format, as one pure function run by the ingest worker
 * threads (or on the event loop with P_INGEST_WORKERS=0): decode within the per-request limits, then
 * place every value against the dataset's schema as the worker was given it (src/ingest/worker/placement.ts).
 */
import { parseJson } from '../../json.ts';
import type { Schema, TypeSummary } from '../../storage/dataset/schema.ts';
import { decodeBody } from '../compression.ts';
import { JSON_KNOWN_TYPES, jsonEventsToBatch, type EventStamp } from '../json/jsonEvents.ts';
import { eventsFromJson } from '../json/flatten.ts';
import { jsonEventsToLines } from '../json/jsonLines.ts';
import { checkLosslessNumbers } from '../json/numbers.ts';
import { checkEventCount, checkJsonShape, countOtlpJsonRecords, tooManyNames, withDecodeBudget, type RequestLimits } from '../limits.ts';
import { rowsToLines } from './lines.ts';
import { fixLoneSurrogates } from '../names.ts';
import { decodeOtlp, OTLP_KNOWN_TYPES, type OtlpFormat, type OtlpSignal } from '../otlp/index.ts';
import { logLines } from '../otlp/logLines.ts';
import { parseOtlpJson } from '../otlp/json.ts';
import { nanosToIso, type Msg } from '../otlp/values.ts';
import { placeRows, placeValues, timeGuess, type TimeGuess } from './placement.ts';
import { timeFieldRule } from '../json/eventTime.ts';
import { checkSampleRange, outsideWindow, rangeInWindow, timeWindow, type TimeWindow } from '../timeWindow.ts';
import { decodeRemoteWriteBytes, PROMETHEUS_KNOWN_TYPES, remoteWriteVersion, type FamilyMetadata } from '../prometheus/index.ts';
import { uncompress } from '../prometheus/decode.ts';
import { TIME_COLUMN, type ColumnType, type FlatRow, type TimeRange } from '../../model.ts';
import type { DatasetMeta, TimeField } from '../../storage/engine.ts';

/** What every ingest job carries, whatever its format (filled by the HTTP side's `withIngestBody`). */
export interface JobBase {
  body: Uint8Array;
  contentEncoding?: string;
  maxDecompressedBytes: number;
  /** The decoded size this request was admitted with (src/ingest/inflight.ts); gzip stops there. */
  decodeBudget?: number;
  limits: RequestLimits;
}

export type IngestJob = JobBase &
  (
    | { kind: 'json'; stamp: EventStamp; maxDepth: number }
    | { kind: 'otlp'; signal: OtlpSignal; format: OtlpFormat; received: string }
    | { kind: 'prometheus'; contentType?: string; received: string }
  );

/** The dataset's schema as the caller last saw it, against which the worker places values. */
export interface PlacementTarget {
  schema: Schema;
  maxColumns: number;
  /** A JSON dataset's time field (docs/time.md): every event must carry a time there. */
  time?: TimeField;
}

/** The time field a dataset's events carry, if it has one (a JSON dataset created with X-P-Time-Partition). */
export function datasetTime(meta: Pick<DatasetMeta, 'kind' | 'timeColumn' | 'timeLimitDays'> | undefined): TimeField | undefined {
  if (meta === undefined || meta.kind !== 'json' || meta.timeColumn === TIME_COLUMN.json) return undefined;
  return { field: meta.timeColumn, limitDays: meta.timeLimitDays };
}

/** What the response needs besides the row count (OTLP partial success, remote-write counts). */
export interface IngestInfo {
  rejected?: number;
  rejectionMessage?: string;
  samples?: number;
  histograms?: number;
  exemplars?: number;
  /** Remote write 1.0 metric family metadata of the request, remembered for the dataset. */
  metadata?: FamilyMetadata[];
}

export interface SerializedBatch {
  /** As text, or as UTF-8 in an ArrayBuffer of its own. */
  lines: string | Uint8Array;
  rows: number;
  types: TypeSummary;
  /** Columns the format defines (they never count against P_MAX_COLUMNS). */
  fixed: string[];
  info: IngestInfo;
  /** With a JSON dataset's time field: the range of the events' times in it. */
  timeRange?: TimeRange;
}

const asBuffer = (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength);

const JSON_FIXED: ReadonlySet<string> = new Set(Object.keys(JSON_KNOWN_TYPES));

/** Columns OTLP logs define, as the row path's `finish` gives them. */
const OTLP_LOGS_FIXED: ReadonlySet<string> = new Set([...Object.keys(OTLP_KNOWN_TYPES.logs), 'p_timestamp']);

const OTLP_NOUN: Record<OtlpSignal, string> = { logs: 'log records', traces: 'spans', metrics: 'data points' };

function finish(rows: FlatRow[], known: Record<string, ColumnType>, target: PlacementTarget, limits: RequestLimits, info: IngestInfo, guess?: TimeGuess, timeRange?: TimeRange): SerializedBatch {
  const types = placeRows(rows, known, target.schema, target.maxColumns, limits.maxNames, guess);
  return { lines: rowsToLines(rows), rows: rows.length, types, fixed: Object.keys(known), info, timeRange };
}

/**
 * The rows whose time is inside the window (timeWindow.ts); the others are rejected one by one, counted
 * in OTLP's partial_success with the first one's reason.
 */
function inWindow(rows: FlatRow[], timeColumn: string, window: TimeWindow, noun: string): { rows: FlatRow[]; rejected: number; message?: string } {
  let first: string | undefined;
  const kept = rows.filter((row) => {
    const why = outsideWindow(String(row[timeColumn]), window);
    first ??= why;
    return why === undefined;
  });
  const rejected = rows.length - kept.length;
  if (rejected === 0) return { rows, rejected };
  return { rows: kept, rejected, message: `${rejected} ${noun} timed outside the stored window were rejected; first: ${timeColumn} ${first}` };
}

export function serializeJob(job: IngestJob, target: PlacementTarget): SerializedBatch {
  switch (job.kind) {
    case 'json': {
      const body = decodeBody(asBuffer(job.body), job.contentEncoding, job.maxDecompressedBytes, job.decodeBudget);
      checkJsonShape(body, job.limits);
      const parsed = parseJson(body);
      checkEventCount(Array.isArray(parsed) ? parsed.length : 1, job.limits, 'events');
      // The common case (every value stays where it is) goes from the parsed events straight to lines.
      const events = eventsFromJson(parsed);
      // Strings that hold times become TIMESTAMP values (docs/time.md); a time field is checked on every event.
      const guess = timeGuess(target.schema);
      const rule = target.time && timeFieldRule(target.time.field, target.time.limitDays, Date.parse(job.stamp.received), job.limits.eventTimeFutureMs);
      const fixed = rule ? new Set([...JSON_FIXED, rule.field]) : JSON_FIXED;
      const fast = jsonEventsToLines(events, job.stamp, job.maxDepth, job.limits.maxNames, { guess, rule });
      // Numbers that would not be stored as sent are refused (numbers.ts); the text is read only when
      // the fast path saw a suspect number, or by the rarer row path.
      if (!fast || fast.suspectNumbers) checkLosslessNumbers(body);
      if (fast && !placeValues(target.schema, fast.types, target.maxColumns, fixed)) {
        return { lines: fixLoneSurrogates(fast.text), rows: events.length, types: fast.types, fixed: [...fixed], info: {}, timeRange: fast.timeRange };
      }
      const { rows, knownTypes, timeRange } = jsonEventsToBatch(parsed, job.stamp, job.maxDepth, rule);
      return finish(rows, knownTypes, target, job.limits, {}, guess, timeRange);
    }
    case 'otlp': {
      const body = decodeBody(asBuffer(job.body), job.contentEncoding, job.maxDecompressedBytes, job.decodeBudget);
      const received = new Date(job.received);
      const noun = OTLP_NOUN[job.signal];
      const window = timeWindow(received.getTime(), job.limits);
      let request: Msg | undefined;
      if (job.format === 'json') {
        checkJsonShape(body, job.limits, noun);
        request = parseOtlpJson(body);
        checkEventCount(countOtlpJsonRecords(job.signal, request), job.limits, noun);
        if (job.signal === 'logs') {
          // The common case goes from the parsed request straight to lines; anything else (an invalid
          // or rejected record, a value that must move) takes the row path below, as before.
          const parsed = request;
          const fast = withDecodeBudget(job.limits, noun, () => logLines(parsed, nanosToIso(BigInt(received.getTime()) * 1_000_000n), job.received, job.limits.maxNames, body.byteLength));
          if (fast && (!fast.timeRange || rangeInWindow(fast.timeRange.minMs, fast.timeRange.maxMs, window)) && !placeValues(target.schema, fast.types, target.maxColumns, OTLP_LOGS_FIXED)) {
            return { lines: fast.lines, rows: fast.rows, types: fast.types, fixed: [...OTLP_LOGS_FIXED], info: { rejected: 0, rejectionMessage: undefined }, timeRange: fast.timeRange };
          }
        }
      }
      // The budget counts protobuf messages as they are decoded, and attribute lists of both encodings.
      const d = withDecodeBudget(job.limits, noun, () => decodeOtlp(job.signal, job.format, body, received, request));
      const kept = inWindow(d.rows, d.timeColumn, window, OTLP_NOUN[job.signal]);
      // Every OTLP row also gets `p_timestamp`, the receive time, as JSON events do.
      for (const row of kept.rows) row.p_timestamp = job.received;
      const rejected = d.rejected + kept.rejected;
      return finish(kept.rows, { ...d.knownTypes, p_timestamp: 'TIMESTAMP' }, target, job.limits, { rejected, rejectionMessage: [d.rejectionMessage, kept.message].filter(Boolean).join('; ') || undefined });
    }
    case 'prometheus': {
      const version = remoteWriteVersion(job.contentType);
      const bytes = uncompress(asBuffer(job.body), job.contentEncoding, job.maxDecompressedBytes);
      const known = { ...PROMETHEUS_KNOWN_TYPES, p_timestamp: 'TIMESTAMP' } satisfies Record<string, ColumnType>;
      const stamp = { p_timestamp: job.received };
      // Plain samples go straight to WAL lines (labels serialised once per series); only when some
      // value must move (a label conflicting with a column) are the rows built and placed.
      const d = withDecodeBudget(job.limits, 'samples', () => decodeRemoteWriteBytes(version, bytes, stamp, 'lines'));
      if (d.samples + d.histograms > 0) checkSampleRange(d.minMs, d.maxMs, timeWindow(Date.parse(job.received), job.limits));
      const info: IngestInfo = { samples: d.samples, histograms: d.histograms, exemplars: d.exemplars, metadata: d.metadata };
      const lines = d.lines!;
      if (lines.count) lines.types.set('p_timestamp', ['TIMESTAMP']);
      if (lines.types.size > job.limits.maxNames) throw tooManyNames(job.limits);
      if (!placeValues(target.schema, lines.types, target.maxColumns, new Set(Object.keys(known)))) {
        return { lines: fixLoneSurrogates(lines.text), rows: lines.count, types: lines.types, fixed: Object.keys(known), info };
      }
      const r = decodeRemoteWriteBytes(version, bytes, stamp, 'rows');
      return finish(r.rows, known, target, job.limits, info);
    }
  }
}
