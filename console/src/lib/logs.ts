import type { Row } from './api.ts';
import { formatHash } from './route.ts';
import { formatTime, parseTimestamp } from './time.ts';

/**
 * A row read as a log line: its time, level, message and the rest as `key=value` chips, whatever the
 * dataset calls them (JSON logs, OTLP logs). Also where a row names a trace.
 */
const LEVEL = ['level', 'severity_text', 'severity', 'log.level', 'loglevel', 'levelname', 'lvl'];
const MESSAGE = ['message', 'msg', 'body', 'log', 'text', 'event'];
export const TRACE_ID = ['trace_id', 'traceId', 'trace.id', 'traceid'];
export const SPAN_ID = ['span_id', 'spanId', 'span.id', 'spanid'];

export interface LogLayout {
  time?: string;
  level?: string;
  message?: string;
}

/** Which columns of `fields` hold the time, the level and the message (undefined: none does). */
export function logLayout(fields: string[], timeColumn?: string): LogLayout {
  const find = (names: string[]) => names.find((n) => fields.includes(n));
  return { time: timeColumn && fields.includes(timeColumn) ? timeColumn : undefined, level: find(LEVEL), message: find(MESSAGE) };
}

/** Rows read well as log lines when they have a time and a message or a level. */
export const looksLikeLogs = (l: LogLayout) => !!l.time && !!(l.message || l.level);

export type LevelClass = 'error' | 'warn' | 'info' | 'debug' | 'other';

/** A level's colour class from its text (`ERROR`, `warning`, `E`) or OTLP's severity number. */
export function levelClass(v: unknown): LevelClass {
  if (typeof v === 'number') return v >= 17 ? 'error' : v >= 13 ? 'warn' : v >= 9 ? 'info' : v >= 1 ? 'debug' : 'other';
  const t = String(v ?? '').toLowerCase();
  if (/^(err|error|fatal|crit|critical|emerg|emergency|alert|panic|severe|e|f)$/.test(t)) return 'error';
  if (/^(warn|warning|w)$/.test(t)) return 'warn';
  if (/^(info|information|notice|i|n)$/.test(t)) return 'info';
  if (/^(debug|trace|verbose|fine|d|t)$/.test(t)) return 'debug';
  return 'other';
}

/** Bookkeeping that says nothing unless it is non-zero (OTLP's dropped counters, empty flags). */
const quietWhenZero = (c: string) => /dropped_/.test(c) || c === 'flags';

/** The fields after time, level and message, in column order, without empty values. */
export function chips(row: Row, columns: string[], layout: LogLayout): [string, unknown][] {
  const shown = new Set([layout.time, layout.level, layout.message]);
  return columns.filter((c) => !shown.has(c) && row[c] !== null && row[c] !== undefined && row[c] !== '' && !(row[c] === 0 && quietWhenZero(c))).map((c) => [c, row[c]]);
}

export function logTime(row: Row, layout: LogLayout): string {
  const ms = layout.time ? parseTimestamp(row[layout.time]) : undefined;
  return ms === undefined ? '' : formatTime(ms, true);
}

/** A trace id as the trace view looks it up: 32 hex digits (OTLP), else the text as it is. */
export const isTraceColumn = (name: string) => TRACE_ID.includes(name) || name === 'span_trace_id';

/**
 * Where a trace id leads: the trace view, over an hour either side of `atMs` (the row's time), in
 * `dataset` when the caller knows which trace dataset holds it (else the view looks for it).
 */
export function traceHref(traceId: string, atMs?: number, dataset?: string): string {
  const at = atMs ?? Date.now();
  return formatHash('traces', { dataset, trace: traceId, from: new Date(at - 3_600_000).toISOString(), to: new Date(Math.min(Date.now(), at + 3_600_000) + 60_000).toISOString() });
}
