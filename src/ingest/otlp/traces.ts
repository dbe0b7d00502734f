import type { ColumnType, FlatRow } from '../../model.ts';
import { attributesObject } from './attributes.ts';
import { COMMON_KNOWN_TYPES, forEachRecord, startRow, type Shared } from './common.ts';
import { enumNumber, id, int, list, msg, nanosToIso, storableNanos, str, time, u64, type ConvertContext, type Msg } from './values.ts';

export const TRACES_TIME_COLUMN = 'span_start_time_unix_nano';

export const TRACES_KNOWN_TYPES: Record<string, ColumnType> = {
  ...COMMON_KNOWN_TYPES,
  span_trace_id: 'VARCHAR',
  span_span_id: 'VARCHAR',
  span_parent_span_id: 'VARCHAR',
  span_trace_state: 'VARCHAR',
  span_name: 'VARCHAR',
  span_kind: 'BIGINT',
  span_kind_description: 'VARCHAR',
  span_start_time_unix_nano: 'TIMESTAMP_NS',
  span_end_time_unix_nano: 'TIMESTAMP_NS',
  span_duration_ns: 'BIGINT',
  span_status_code: 'BIGINT',
  span_status_description: 'VARCHAR',
  span_status_message: 'VARCHAR',
  span_flags: 'BIGINT',
  span_dropped_attributes_count: 'BIGINT',
  span_dropped_events_count: 'BIGINT',
  span_dropped_links_count: 'BIGINT',
  span_events: 'VARCHAR',
  span_links: 'VARCHAR',
  // JSON array of the attribute names whose column holds the resource's value (docs/traces.md): the
  // columns are flattened, and Jaeger's process tags and TraceQL's `resource.` scope need them apart.
  resource_attribute_keys: 'VARCHAR',
};

const SPAN_KINDS = ['SPAN_KIND_UNSPECIFIED', 'SPAN_KIND_INTERNAL', 'SPAN_KIND_SERVER', 'SPAN_KIND_CLIENT', 'SPAN_KIND_PRODUCER', 'SPAN_KIND_CONSUMER'];
const STATUS_CODES = ['STATUS_CODE_UNSET', 'STATUS_CODE_OK', 'STATUS_CODE_ERROR'];

/** One row per Span. A span with a missing or malformed id is rejected, and so is one with a bad link id. */
export function spanRows(request: Msg, ctx: ConvertContext): FlatRow[] {
  const rows: FlatRow[] = [];
  forEachRecord(request, { resources: 'resourceSpans', scopes: 'scopeSpans', records: 'spans' }, ctx.rejections, (span, shared, at) => {
    const traceId = id(span.traceId, 16, 'trace_id');
    const spanId = id(span.spanId, 8, 'span_id');
    const parentId = id(span.parentSpanId, 8, 'parent_span_id');
    const idError =
      traceId.error ??
      spanId.error ??
      parentId.error ??
      (traceId.hex === null ? 'trace_id is empty' : undefined) ??
      (spanId.hex === null ? 'span_id is empty' : undefined);
    if (idError !== undefined) {
      ctx.rejections.add(at, idError);
      return;
    }
    const links = linksJson(span.links, at);
    if (typeof links !== 'string') {
      ctx.rejections.add(links.at, links.error);
      return;
    }
    const start = storableNanos(u64(span.startTimeUnixNano, at, 'startTimeUnixNano') ?? 0n, at, 'startTimeUnixNano');
    const end = storableNanos(u64(span.endTimeUnixNano, at, 'endTimeUnixNano') ?? 0n, at, 'endTimeUnixNano');

    const row = startRow(shared, span, at);
    row.span_trace_id = traceId.hex;
    row.span_span_id = spanId.hex;
    row.span_parent_span_id = parentId.hex;
    row.span_trace_state = str(span.traceState, at, 'traceState');
    row.span_name = str(span.name, at, 'name');
    const kind = enumNumber(span.kind, SPAN_KINDS, at, 'kind');
    row.span_kind = kind;
    row.span_kind_description = SPAN_KINDS[kind] ?? null;
    // A span without a start time is filed under the receive time so the time column is never null.
    row.span_start_time_unix_nano = start === 0n ? ctx.receivedAt : nanosToIso(start);
    row.span_end_time_unix_nano = end === 0n ? null : nanosToIso(end);
    row.span_duration_ns = start !== 0n && end !== 0n ? Number(end - start) : null;
    const status = msg(span.status, at, 'status');
    const code = status === null ? 0 : enumNumber(status.code, STATUS_CODES, `${at}.status`, 'code');
    row.span_status_code = code;
    row.span_status_description = STATUS_CODES[code] ?? null;
    row.span_status_message = status === null ? null : str(status.message, `${at}.status`, 'message');
    row.span_flags = int(span.flags, at, 'flags');
    row.span_dropped_attributes_count = int(span.droppedAttributesCount, at, 'droppedAttributesCount');
    row.span_dropped_events_count = int(span.droppedEventsCount, at, 'droppedEventsCount');
    row.span_dropped_links_count = int(span.droppedLinksCount, at, 'droppedLinksCount');
    row.span_events = eventsJson(span.events, at);
    row.span_links = links;
    row.resource_attribute_keys = resourceKeysJson(shared, span.attributes);
    rows.push(row);
  });
  return rows;
}

/** Texts of resource key lists already built, by list: every span of a scope usually shares one. */
const keysJsonCache = new WeakMap<string[], string>();

/** The resource's attribute names the span's own attributes did not override, as JSON text. */
function resourceKeysJson(shared: Shared, spanAttributes: unknown): string {
  const keys = shared.resourceKeys;
  let own: Set<string> | undefined;
  if (keys.length > 0 && Array.isArray(spanAttributes) && spanAttributes.length > 0) {
    own = new Set(spanAttributes.map((kv) => (kv !== null && typeof kv === 'object' ? (kv as Msg).key : undefined)).filter((k): k is string => typeof k === 'string'));
  }
  if (own !== undefined && keys.some((k) => own.has(k))) return JSON.stringify(keys.filter((k) => !own.has(k)));
  let text = keysJsonCache.get(keys);
  if (text === undefined) keysJsonCache.set(keys, (text = JSON.stringify(keys)));
  return text;
}

function eventsJson(v: unknown, spanAt: string): string {
  const events = list(v, spanAt, 'events');
  if (events.length === 0) return '[]';
  const at = `${spanAt}.events`;
  const out = events.map((item, i) => {
    const event = msg(item, at, i) ?? {};
    const eAt = `${at}[${i}]`;
    return {
      time_unix_nano: time(event.timeUnixNano, eAt, 'timeUnixNano'),
      name: str(event.name, eAt, 'name'),
      attributes: attributesObject(event.attributes, eAt, 'attributes'),
      dropped_attributes_count: int(event.droppedAttributesCount, eAt, 'droppedAttributesCount'),
    };
  });
  return JSON.stringify(out);
}

/** The links as JSON text, or the first bad id, which rejects the span. */
function linksJson(v: unknown, spanAt: string): string | { at: string; error: string } {
  const links = list(v, spanAt, 'links');
  if (links.length === 0) return '[]';
  const out = [];
  for (let i = 0; i < links.length; i++) {
    const lAt = `${spanAt}.links[${i}]`;
    const link = msg(links[i], lAt) ?? {};
    const traceId = id(link.traceId, 16, 'link trace_id');
    const spanId = id(link.spanId, 8, 'link span_id');
    const error =
      traceId.error ??
      spanId.error ??
      (traceId.hex === null ? 'link trace_id is empty' : undefined) ??
      (spanId.hex === null ? 'link span_id is empty' : undefined);
    if (error !== undefined) return { at: lAt, error };
    out.push({
      trace_id: traceId.hex,
      span_id: spanId.hex,
      trace_state: str(link.traceState, lAt, 'traceState'),
      attributes: attributesObject(link.attributes, lAt, 'attributes'),
      flags: int(link.flags, lAt, 'flags'),
    });
  }
  return JSON.stringify(out);
}
