/**
 * A trace from the traces store (src/query/traces) as OTLP `TracesData`: OTLP/JSON as the OTLP
 * specification writes it (hex ids, 64-bit integers as strings), or protobuf through the service's own
 * OTLP types. Which attributes are the resource's is the store's answer (docs/traces.md).
 */
import { requestClass } from '../../ingest/otlp/generated.ts';
import type { Span, SpanKind } from '../../query/traces/store.ts';
export type AnyValue = { stringValue: string } | { intValue: string } | { doubleValue: number } | { boolValue: boolean } | { arrayValue: { values: AnyValue[] } } | { kvlistValue: { values: KeyValue[] } };
export interface KeyValue {
  key: string;
  value: AnyValue;
}

/** A JSON value as an OTLP AnyValue (an integral number is an intValue). */
export function anyValue(v: unknown): AnyValue {
  if (typeof v === 'string') return { stringValue: v };
  if (typeof v === 'boolean') return { boolValue: v };
  if (typeof v === 'number') return Number.isInteger(v) ? { intValue: String(v) } : { doubleValue: v };
  if (Array.isArray(v)) return { arrayValue: { values: v.map(anyValue) } };
  if (v !== null && typeof v === 'object') return { kvlistValue: { values: keyValues(v as Record<string, unknown>) } };
  return { stringValue: String(v) };
}

const keyValues = (o: Record<string, unknown>): KeyValue[] => Object.entries(o).map(([key, v]) => ({ key, value: anyValue(v) }));

/** ISO-8601 with up to nine fraction digits (how events are stored) → Unix nanoseconds as text. */
export function isoToNanos(iso: string): string {
  const m = /^(.{19})(?:\.(\d{1,9}))?Z$/.exec(iso);
  if (!m) return '0';
  return String(BigInt(Date.parse(`${m[1]}Z`)) * 1_000_000n + BigInt((m[2] ?? '').padEnd(9, '0')));
}

const KIND_NUMBERS: Record<SpanKind, number> = { unspecified: 0, internal: 1, server: 2, client: 3, producer: 4, consumer: 5 };
const STATUS_NUMBERS: Record<Span['status'], number> = { unset: 0, ok: 1, error: 2 };

function otlpSpan(s: Span) {
  return {
    traceId: s.traceId,
    spanId: s.spanId,
    ...(s.parentSpanId ? { parentSpanId: s.parentSpanId } : {}),
    ...(s.traceState ? { traceState: s.traceState } : {}),
    name: s.name,
    kind: KIND_NUMBERS[s.kind],
    startTimeUnixNano: String(s.startNs),
    endTimeUnixNano: String(s.endNs),
    attributes: keyValues(s.attributes),
    events: s.events.map((e) => ({
      timeUnixNano: e.time_unix_nano ? isoToNanos(e.time_unix_nano) : '0',
      name: e.name ?? '',
      attributes: keyValues(e.attributes ?? {}),
      droppedAttributesCount: e.dropped_attributes_count ?? 0,
    })),
    links: s.links.map((l) => ({ traceId: l.trace_id, spanId: l.span_id, ...(l.trace_state ? { traceState: l.trace_state } : {}), attributes: keyValues(l.attributes ?? {}), ...(l.flags ? { flags: l.flags } : {}) })),
    ...(s.flags ? { flags: s.flags } : {}),
    status: { code: STATUS_NUMBERS[s.status], ...(s.statusMessage ? { message: s.statusMessage } : {}) },
  };
}

/** One trace's spans (from the traces store) as OTLP/JSON `TracesData`: grouped by resource, then scope. */
export function tracesData(spans: Span[]) {
  type Scope = { scope: { name: string; version: string }; spans: ReturnType<typeof otlpSpan>[] };
  const resources = new Map<string, { attributes: KeyValue[]; scopes: Map<string, Scope> }>();
  for (const s of spans) {
    const attributes = keyValues(s.resource);
    const rKey = JSON.stringify(attributes);
    let res = resources.get(rKey);
    if (!res) resources.set(rKey, (res = { attributes, scopes: new Map() }));
    const sKey = JSON.stringify([s.scopeName, s.scopeVersion]);
    let scope = res.scopes.get(sKey);
    if (!scope) res.scopes.set(sKey, (scope = { scope: { name: s.scopeName ?? '', version: s.scopeVersion ?? '' }, spans: [] }));
    scope.spans.push(otlpSpan(s));
  }
  return {
    resourceSpans: [...resources.values()].map((res) => ({
      resource: { attributes: res.attributes },
      scopeSpans: [...res.scopes.values()].map((sc) => ({ scope: sc.scope, spans: sc.spans })),
    })),
  };
}

type Data = ReturnType<typeof tracesData>;

/** The same trace as protobuf `TracesData` bytes (ids as bytes). */
export function tracesDataProto(data: Data): Uint8Array {
  const hex = (h: string | undefined) => (h ? Buffer.from(h, 'hex') : Buffer.alloc(0));
  const binary = {
    resourceSpans: data.resourceSpans.map((rs) => ({
      ...rs,
      scopeSpans: rs.scopeSpans.map((ss) => ({
        ...ss,
        spans: ss.spans.map((s) => ({
          ...s,
          traceId: hex(s.traceId),
          spanId: hex(s.spanId),
          parentSpanId: hex(s.parentSpanId),
          links: s.links.map((l) => ({ ...l, traceId: hex(l.traceId), spanId: hex(l.spanId) })),
        })),
      })),
    })),
  };
  const cls = requestClass.traces;
  return cls.encode(cls.fromObject(binary)).finish();
}

/** Tempo's TraceByIDResponse (v2): the trace in field 1. */
export function traceByIdResponseProto(trace: Uint8Array): Uint8Array {
  const len: number[] = [];
  let n = trace.length;
  do {
    len.push((n & 0x7f) | (n > 0x7f ? 0x80 : 0));
    n >>>= 7;
  } while (n > 0);
  return Buffer.concat([Buffer.from([0x0a, ...len]), trace]);
}
