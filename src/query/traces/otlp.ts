import type { Span, SpanEvent, SpanLink } from './model.ts';

/**
 * Stored spans as OTLP `TracesData` in its JSON mapping (resourceSpans → scopeSpans → spans; hex ids,
 * 64-bit integers and nanosecond times as text, enums as numbers, fields at their default left out), the
 * one mapping behind Jaeger's `/api/v3` and Tempo's trace by id (the Tempo door encodes the same object as
 * protobuf). Spans of the same resource and scope are grouped, in the order they first appear. What the
 * store cannot give back (bytes, an integral double, arrays in span attributes) is in docs/traces.md.
 */

export type AnyValue =
  | { stringValue: string }
  | { boolValue: boolean }
  | { intValue: string }
  | { doubleValue: number }
  | { arrayValue: { values: AnyValue[] } }
  | { kvlistValue: { values: KeyValue[] } }
  // An AnyValue with no member set (an attribute sent without a value).
  | Record<string, never>;
export interface KeyValue {
  key: string;
  value: AnyValue;
}

/**
 * A stored value as an OTLP AnyValue. Event and link attributes keep arrays and maps as JSON, so they come
 * back as arrayValue/kvlistValue; a whole number is an intValue (the JSON keeps no int/double tag); an
 * attribute stored without a value (null) is an empty AnyValue, as it was sent.
 */
export function anyValue(v: unknown): AnyValue {
  if (typeof v === 'string') return { stringValue: v };
  if (typeof v === 'boolean') return { boolValue: v };
  if (typeof v === 'number') return Number.isInteger(v) ? { intValue: String(v) } : { doubleValue: v };
  if (typeof v === 'bigint') return { intValue: String(v) };
  if (Array.isArray(v)) return { arrayValue: { values: v.map(anyValue) } };
  if (v !== null && typeof v === 'object') return { kvlistValue: { values: keyValues(v as Record<string, unknown>) } };
  return {};
}

export const keyValues = (attrs: Record<string, unknown>): KeyValue[] => Object.entries(attrs).map(([key, v]) => ({ key, value: anyValue(v) }));

const KIND_NUMBERS = { unspecified: 0, internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const;
const STATUS_NUMBERS = { unset: 0, ok: 1, error: 2 } as const;

/** Event times are stored as RFC 3339 text with nanosecond digits: back to nanoseconds since the epoch. */
export function isoToNs(iso: string): bigint {
  const m = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$/.exec(iso);
  if (!m) return BigInt(Date.parse(iso)) * 1_000_000n;
  const seconds = BigInt(Date.parse(`${m[1]}${m[3]}`)) / 1000n;
  return seconds * 1_000_000_000n + BigInt((m[2] ?? '').padEnd(9, '0'));
}

/** `{ [name]: n }` when n is set and not zero: proto3's JSON mapping leaves a default out. */
const nonZero = <K extends string>(name: K, n: number | null | undefined) => (n ? ({ [name]: n } as Record<K, number>) : {});
/** `{ [name]: list }` when the list is not empty (a repeated field's default, left out likewise). */
const nonEmpty = <K extends string, T>(name: K, list: T[]) => (list.length ? ({ [name]: list } as Record<K, T[]>) : ({} as Partial<Record<K, T[]>>));
const attributes = (attrs: Record<string, unknown> | null | undefined) => nonEmpty('attributes', keyValues(attrs ?? {}));

const otlpEvent = (e: SpanEvent) => ({
  timeUnixNano: e.time_unix_nano ? String(isoToNs(e.time_unix_nano)) : '0',
  ...(e.name ? { name: e.name } : {}),
  ...attributes(e.attributes),
  ...nonZero('droppedAttributesCount', e.dropped_attributes_count),
});

const otlpLink = (l: SpanLink) => ({
  traceId: l.trace_id,
  spanId: l.span_id,
  ...(l.trace_state ? { traceState: l.trace_state } : {}),
  ...attributes(l.attributes),
  ...nonZero('flags', l.flags),
});

export function otlpSpan(s: Span) {
  return {
    traceId: s.traceId,
    spanId: s.spanId,
    ...(s.traceState ? { traceState: s.traceState } : {}),
    ...(s.parentSpanId ? { parentSpanId: s.parentSpanId } : {}),
    ...nonZero('flags', s.flags),
    name: s.name,
    ...nonZero('kind', KIND_NUMBERS[s.kind]),
    startTimeUnixNano: String(s.startNs),
    endTimeUnixNano: String(s.endNs),
    ...attributes(s.attributes),
    ...nonZero('droppedAttributesCount', s.droppedAttributesCount),
    ...nonEmpty('events', s.events.map(otlpEvent)),
    ...nonZero('droppedEventsCount', s.droppedEventsCount),
    ...nonEmpty('links', s.links.map(otlpLink)),
    ...nonZero('droppedLinksCount', s.droppedLinksCount),
    status: { ...(s.statusMessage ? { message: s.statusMessage } : {}), ...nonZero('code', STATUS_NUMBERS[s.status]) },
  };
}

export type OtlpSpan = ReturnType<typeof otlpSpan>;

/** Spans (of one trace or several) as OTLP/JSON `TracesData`: grouped by resource, then scope. */
export function otlpTracesData(spans: Span[]) {
  type Scope = { scope: { name?: string; version?: string }; spans: OtlpSpan[] };
  const resources = new Map<string, { resource: { attributes?: KeyValue[] }; scopes: Map<string, Scope> }>();
  for (const s of spans) {
    const rKey = JSON.stringify(s.resource);
    let r = resources.get(rKey);
    if (!r) resources.set(rKey, (r = { resource: attributes(s.resource), scopes: new Map() }));
    const sKey = JSON.stringify([s.scopeName, s.scopeVersion]);
    let scope = r.scopes.get(sKey);
    if (!scope) r.scopes.set(sKey, (scope = { scope: { ...(s.scopeName ? { name: s.scopeName } : {}), ...(s.scopeVersion ? { version: s.scopeVersion } : {}) }, spans: [] }));
    scope.spans.push(otlpSpan(s));
  }
  return { resourceSpans: [...resources.values()].map((r) => ({ resource: r.resource, scopeSpans: [...r.scopes.values()] })) };
}

export type OtlpTracesData = ReturnType<typeof otlpTracesData>;
