/**
 * The window of event times a request of OTLP records or remote-write samples may store (issue 30 A10):
 * from P_SIGNAL_TIME_PAST_LIMIT before its receipt to P_EVENT_TIME_FUTURE_LIMIT after. Their datasets are
 * partitioned by the records' own times, and every hour holding rows is a Parquet file of its own, so an
 * unbounded spread of times is an unbounded number of files in one flush (one 3.3 MB request of records
 * an hour apart wrote 100,000). JSON datasets with a time field have their own window (eventTime.ts).
 * Times are compared as ISO 8601 text to the second (`YYYY-MM-DDTHH:MM:SS`), as every decoder writes them.
 */
import { invalidInput } from '../errors.ts';
import { DEFAULT_FUTURE_LIMIT_MS } from './json/eventTime.ts';
import type { RequestLimits } from './limits.ts';

/** Default of P_SIGNAL_TIME_PAST_LIMIT: Parseable's default time partition limit, 30 days. */
export const DEFAULT_PAST_LIMIT_MS = 30 * 86_400_000;

export interface TimeWindow {
  /** The earliest and latest second stored, as `YYYY-MM-DDTHH:MM:SS`. */
  from: string;
  to: string;
  pastMs: number;
  futureMs: number;
}

export function timeWindow(receivedMs: number, limits: Pick<RequestLimits, 'eventTimeFutureMs' | 'signalTimePastMs'>): TimeWindow {
  const pastMs = limits.signalTimePastMs ?? DEFAULT_PAST_LIMIT_MS;
  const futureMs = limits.eventTimeFutureMs ?? DEFAULT_FUTURE_LIMIT_MS;
  const second = (ms: number) => new Date(Math.min(Math.max(ms, 0), 253_402_300_799_000)).toISOString().slice(0, 19);
  // A past limit of 0 is none (every string sorts at or after '').
  return { from: pastMs === 0 ? '' : second(receivedMs - pastMs), to: second(receivedMs + futureMs), pastMs, futureMs };
}

/**
 * Why an ISO time is outside the window, or undefined when it is inside. Signed years (`-000001-…`,
 * `+010000-…`, which would sort before every four-digit year) are before and after the window.
 */
export function outsideWindow(iso: string, w: TimeWindow): string | undefined {
  const s = iso.slice(0, 19);
  const signed = iso.charCodeAt(0) === 43 || iso.charCodeAt(0) === 45;
  if (signed && iso.charCodeAt(0) === 43) return `${iso} is more than ${w.futureMs / 1000} s after the request was received (P_EVENT_TIME_FUTURE_LIMIT)`;
  if (s < w.from || (signed && w.from !== '')) return `${iso} is more than ${w.pastMs / 1000} s before the request was received (P_SIGNAL_TIME_PAST_LIMIT)`;
  if (s > w.to) return `${iso} is more than ${w.futureMs / 1000} s after the request was received (P_EVENT_TIME_FUTURE_LIMIT)`;
  return undefined;
}

/** Whether a range of epoch ms lies inside the window (to the second, as `outsideWindow`). */
export function rangeInWindow(minMs: number, maxMs: number, w: TimeWindow): boolean {
  return outsideWindow(new Date(minMs).toISOString(), w) === undefined && outsideWindow(new Date(maxMs).toISOString(), w) === undefined;
}

/** Remote write: a request with a sample outside the window is refused whole (400), as Prometheus answers "out of bounds". */
export function checkSampleRange(minMs: number, maxMs: number, w: TimeWindow): void {
  for (const ms of [minMs, maxMs]) {
    const d = new Date(ms);
    const why = Number.isNaN(d.getTime()) ? `${ms} ms is not a time` : outsideWindow(d.toISOString(), w);
    if (why) throw invalidInput(`out of bounds: a sample timed ${why}; nothing of the request was stored`);
  }
}
