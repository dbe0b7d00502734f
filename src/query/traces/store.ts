import { z } from 'zod';
import { sqlIdent } from '../../duckdb.ts';
import { invalidInput } from '../../errors.ts';
import { collectRows } from '../sql/collect.ts';
import type { QueryExecutor } from '../sql/executor.ts';
import type { QueryRequest } from '../sql/queries.ts';
import { bloomMayHold } from '../../storage/scan.ts';
import { spanFromRow, SPAN_KIND_NAMES, type Span, type SpanEvent, type SpanKind, type SpanLink } from './model.ts';
import { dependenciesSql, normalTraceId, operationsSql, searchSql, servicesSql, spansOfTracesSql, type Columns, type TraceSearch } from './sql.ts';

/**
 * The trace query service: what the Jaeger and Tempo doors ask of a traces dataset. Every query runs
 * through the SQL executor (sandboxed worker, limits, admission, the caller's permissions), never on a
 * DuckDB of its own; rows read back are validated with zod.
 */

export interface TraceReader {
  queries: QueryExecutor;
  dataset: string;
  principalId: string;
  canRead: (dataset: string) => boolean;
  signal?: AbortSignal;
  /** false: read every file of the window, not only those the trace-id index names (for measuring it). */
  useIndex?: boolean;
}

/** A time range in milliseconds since the epoch (start inclusive, end exclusive), bounding the files read. */
export interface TimeWindow {
  startMs: number;
  endMs: number;
}

type FileFilter = QueryRequest['files'];

async function rows(r: TraceReader, sql: string, w: TimeWindow, files?: FileFilter): Promise<Record<string, unknown>[]> {
  return collectRows(r.queries, { sql, startMs: w.startMs, endMs: w.endMs, principalId: r.principalId, canRead: r.canRead, signal: r.signal, files });
}

/** Files whose trace-id index says they hold none of the ids are not read (a file without an index is). */
export const filesMayHold = (ids: string[]): FileFilter => (f) => f.traceBloom === undefined || bloomMayHold(f.traceBloom, ids);

/** The dataset's columns (a statement that reads no rows: the executor answers its fields). */
export async function datasetColumns(r: TraceReader): Promise<Columns> {
  const answer = await r.queries.execute({
    sql: `SELECT * FROM ${sqlIdent(r.dataset)} WHERE false`,
    startMs: 0,
    endMs: 1,
    sendNull: true,
    timeFormat: 'iso',
    streaming: false,
    principalId: r.principalId,
    canRead: r.canRead,
    signal: r.signal,
  });
  for await (const chunk of answer.chunks) void chunk;
  return new Set(answer.fields);
}

/** Spans of these traces within the window, by trace id (each trace's spans in start order). */
export async function tracesById(r: TraceReader, traceIds: string[], w: TimeWindow): Promise<Map<string, Span[]>> {
  const ids = [...new Set(traceIds.map((id) => normalTraceId(id) ?? ''))].filter((id) => id !== '');
  const out = new Map<string, Span[]>();
  if (!ids.length) return out;
  const cols = await datasetColumns(r);
  if (!cols.has('span_trace_id')) return out;
  for (const row of await rows(r, spansOfTracesSql(r.dataset, cols, ids), w, r.useIndex === false ? undefined : filesMayHold(ids))) {
    const span = spanFromRow(row);
    let spans = out.get(span.traceId);
    if (!spans) out.set(span.traceId, (spans = []));
    spans.push(span);
  }
  return out;
}

/** One trace's spans (empty when none is stored in the window). */
export async function traceById(r: TraceReader, traceId: string, w: TimeWindow): Promise<Span[]> {
  const id = normalTraceId(traceId);
  if (id === undefined) throw invalidInput(`not a trace id: ${traceId.slice(0, 64)}`);
  return (await tracesById(r, [id], w)).get(id) ?? [];
}

const serviceRow = z.object({ service: z.string() });
export async function services(r: TraceReader, w: TimeWindow): Promise<string[]> {
  const cols = await datasetColumns(r);
  if (!cols.has('span_trace_id')) return [];
  return (await rows(r, servicesSql(r.dataset, cols), w)).map((row) => serviceRow.parse(row).service);
}

const operationRow = z.object({ name: z.string(), kind: z.number().int() });
export interface Operation {
  name: string;
  kind: SpanKind;
}
export async function operations(r: TraceReader, w: TimeWindow, service: string, kind?: SpanKind): Promise<Operation[]> {
  const cols = await datasetColumns(r);
  if (!cols.has('span_trace_id')) return [];
  return (await rows(r, operationsSql(r.dataset, cols, service, kind), w)).map((row) => {
    const o = operationRow.parse(row);
    return { name: o.name, kind: SPAN_KIND_NAMES[o.kind] ?? 'unspecified' };
  });
}

const searchRow = z.object({ trace_id: z.string(), last_ns: z.string() });
/** Ids of the traces with a span matching every condition in the window, newest first. */
export async function searchTraceIds(r: TraceReader, w: TimeWindow, q: TraceSearch): Promise<string[]> {
  const cols = await datasetColumns(r);
  if (!cols.has('span_trace_id')) return [];
  return (await rows(r, searchSql(r.dataset, cols, q), w)).map((row) => searchRow.parse(row).trace_id);
}

const dependencyRow = z.object({ parent: z.string(), child: z.string(), call_count: z.number().int() });
export type Dependency = z.infer<typeof dependencyRow>;
/** Calls between services (a parent span's service → its child span's) in the window. */
export async function dependencies(r: TraceReader, w: TimeWindow): Promise<Dependency[]> {
  const cols = await datasetColumns(r);
  if (!cols.has('span_parent_span_id')) return [];
  return (await rows(r, dependenciesSql(r.dataset, cols), w)).map((row) => dependencyRow.parse(row));
}

export type { Span, SpanEvent, SpanKind, SpanLink, TraceSearch };
