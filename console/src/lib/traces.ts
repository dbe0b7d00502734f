import { parseTimestampNs } from './time.ts';

export type SpanRow = Record<string, unknown>;

export interface WaterfallSpan {
  row: SpanRow;
  id: string;
  depth: number;
  /** From the trace's first start to this span's start, and its length, in ns. */
  offsetNs: number;
  durationNs: number;
  error: boolean;
}

export interface Waterfall {
  spans: WaterfallSpan[];
  totalNs: number;
  startNs: bigint;
}

const ERROR_STATUS = 2;

/**
 * Spans of one trace in waterfall order: each span after its parent, siblings by start time; a span
 * whose parent is not among them (not sent, or outside the range) is drawn as a root.
 */
export function buildWaterfall(rows: SpanRow[]): Waterfall {
  const withTimes = rows
    .map((row) => {
      const start = parseTimestampNs(row.span_start_time_unix_nano) ?? 0n;
      const endParsed = parseTimestampNs(row.span_end_time_unix_nano);
      const dur = typeof row.span_duration_ns === 'number' ? BigInt(Math.round(row.span_duration_ns)) : endParsed !== undefined ? endParsed - start : 0n;
      return { row, id: String(row.span_span_id ?? ''), parent: row.span_parent_span_id ? String(row.span_parent_span_id) : '', start, end: start + dur };
    })
    .sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  if (withTimes.length === 0) return { spans: [], totalNs: 0, startNs: 0n };
  const ids = new Set(withTimes.map((s) => s.id));
  const children = new Map<string, typeof withTimes>();
  const roots: typeof withTimes = [];
  for (const s of withTimes) {
    if (s.parent && ids.has(s.parent) && s.parent !== s.id) {
      const list = children.get(s.parent) ?? [];
      list.push(s);
      children.set(s.parent, list);
    } else roots.push(s);
  }
  const startNs = withTimes[0].start;
  const endNs = withTimes.reduce((m, s) => (s.end > m ? s.end : m), startNs);
  const spans: WaterfallSpan[] = [];
  const seen = new Set<string>();
  const visit = (s: (typeof withTimes)[number], depth: number) => {
    if (seen.has(s.id)) return; // a cycle of parent ids must not loop forever
    seen.add(s.id);
    spans.push({
      row: s.row,
      id: s.id,
      depth,
      offsetNs: Number(s.start - startNs),
      durationNs: Number(s.end - s.start),
      error: Number(s.row.span_status_code) === ERROR_STATUS,
    });
    for (const c of children.get(s.id) ?? []) visit(c, depth + 1);
  };
  for (const r of roots) visit(r, 0);
  return { spans, totalNs: Math.max(1, Number(endNs - startNs)), startNs };
}

/** Span columns the waterfall shows itself; every other non-null column is an attribute. */
const CORE = new Set([
  'span_trace_id', 'span_span_id', 'span_parent_span_id', 'span_name', 'span_start_time_unix_nano', 'span_end_time_unix_nano',
  'span_duration_ns', 'span_events', 'span_links', 'p_timestamp',
  // Bookkeeping of which attributes came from the resource (docs/traces.md), not an attribute itself.
  'resource_attribute_keys',
]);

export function spanAttributes(row: SpanRow): [string, unknown][] {
  return Object.entries(row)
    // Dropped-item counters only matter when something was dropped.
    .filter(([k, v]) => !CORE.has(k) && v !== null && v !== undefined && v !== '' && !(/dropped_/.test(k) && v === 0))
    .sort(([a], [b]) => a.localeCompare(b));
}

/** `span_events` / `span_links` are JSON text (arrays); anything unreadable is shown as no items. */
export function parseJsonList(v: unknown): Record<string, unknown>[] {
  if (Array.isArray(v)) return v as Record<string, unknown>[];
  if (typeof v !== 'string' || !v) return [];
  try {
    const parsed = JSON.parse(v) as unknown;
    return Array.isArray(parsed) ? (parsed as Record<string, unknown>[]) : [];
  } catch {
    return [];
  }
}
