/**
 * Stored span rows back to an OTLP trace (`TracesData`): OTLP/JSON as the OTLP specification writes it
 * (hex ids, 64-bit integers as strings), or protobuf through the service's own OTLP types. Attributes are
 * columns named by their key; a span's resource attributes are the keys its `resource_attribute_keys`
 * lists (without that column only `service.name` can be told to be the resource's, docs/traces.md).
 */
import { requestClass } from '../../ingest/otlp/generated.ts';
import { isFixedColumn } from '../../query/traceql/conditions.ts';
import { sqlIdent, sqlString } from '../../duckdb.ts';
import type { ColumnType } from '../../model.ts';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
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

const SIBLING = /_(utf8|int64|float64|bool|list|timestamp_ms|timestamp_ns)$/;

/** Attribute columns of a schema and the attribute key each holds (a typed sibling holds its base's). */
export function attributeColumns(columns: Record<string, ColumnType>): { column: string; key: string }[] {
  return Object.keys(columns)
    .filter((c) => !isFixedColumn(c) && c !== 'resource_attribute_keys')
    .map((c) => {
      const base = c.replace(SIBLING, '');
      return { column: c, key: base !== c && Object.hasOwn(columns, base) ? base : c };
    });
}

/** The statement reading one trace's spans (times as nanosecond text, attributes as a JSON object). */
export function traceSql(dataset: string, traceId: string, columns: Record<string, ColumnType>, resourceKeys: string | undefined): string {
  const attrs = attributeColumns(columns);
  const struct = attrs.length ? `CAST(to_json({${attrs.map((a, i) => `${sqlString(`${i}`)}: ${sqlIdent(a.column)}`).join(', ')}}) AS VARCHAR)` : `'{}'`;
  const has = (c: string) => (Object.hasOwn(columns, c) ? sqlIdent(c) : 'NULL');
  return `SELECT span_trace_id AS trace_id, span_span_id AS span_id, span_parent_span_id AS parent_id, ${has('span_trace_state')} AS trace_state, span_name AS name,
  span_kind AS kind, CAST(epoch_ns(span_start_time_unix_nano) AS VARCHAR) AS start_ns, CAST(epoch_ns(span_end_time_unix_nano) AS VARCHAR) AS end_ns,
  span_status_code AS status_code, ${has('span_status_message')} AS status_message, ${has('span_flags')} AS flags, ${has('span_events')} AS events, ${has('span_links')} AS links,
  ${has('scope_name')} AS scope_name, ${has('scope_version')} AS scope_version, ${has('resource_schema_url')} AS resource_schema_url,
  ${has('span_dropped_attributes_count')} AS dropped_attributes, ${has('span_dropped_events_count')} AS dropped_events, ${has('span_dropped_links_count')} AS dropped_links,
  ${resourceKeys ? sqlIdent(resourceKeys) : 'NULL'} AS resource_keys, ${struct} AS attrs
FROM ${sqlIdent(dataset)} WHERE span_trace_id = ${sqlString(traceId)} ORDER BY span_start_time_unix_nano, span_span_id`;
}

type Row = Record<string, unknown>;
const str = (v: unknown) => (typeof v === 'string' ? v : v === null || v === undefined ? '' : String(v));
const num = (v: unknown) => (v === null || v === undefined ? 0 : Number(v));

function spanOf(r: Row, attributes: KeyValue[]) {
  const events = JSON.parse(str(r.events) || '[]') as { time_unix_nano: string | null; name: string | null; attributes: Record<string, Json>; dropped_attributes_count: number | null }[];
  const links = JSON.parse(str(r.links) || '[]') as { trace_id: string; span_id: string; trace_state: string | null; attributes: Record<string, Json>; flags: number | null }[];
  return {
    traceId: str(r.trace_id),
    spanId: str(r.span_id),
    ...(r.parent_id ? { parentSpanId: str(r.parent_id) } : {}),
    ...(r.trace_state ? { traceState: str(r.trace_state) } : {}),
    name: str(r.name),
    kind: num(r.kind),
    startTimeUnixNano: str(r.start_ns) || '0',
    endTimeUnixNano: str(r.end_ns) || '0',
    attributes,
    droppedAttributesCount: num(r.dropped_attributes),
    events: events.map((e) => ({ timeUnixNano: e.time_unix_nano ? isoToNanos(e.time_unix_nano) : '0', name: e.name ?? '', attributes: keyValues(e.attributes ?? {}), droppedAttributesCount: num(e.dropped_attributes_count) })),
    droppedEventsCount: num(r.dropped_events),
    links: links.map((l) => ({ traceId: l.trace_id, spanId: l.span_id, ...(l.trace_state ? { traceState: l.trace_state } : {}), attributes: keyValues(l.attributes ?? {}), ...(l.flags ? { flags: l.flags } : {}) })),
    droppedLinksCount: num(r.dropped_links),
    ...(r.flags !== null && r.flags !== undefined ? { flags: num(r.flags) } : {}),
    status: { code: num(r.status_code), ...(r.status_message ? { message: str(r.status_message) } : {}) },
  };
}

/** Rows of one trace (from traceSql) as OTLP/JSON `TracesData`: spans grouped by resource, then scope. */
export function tracesData(rows: Row[], columns: Record<string, ColumnType>) {
  const attrs = attributeColumns(columns);
  const resources = new Map<string, { resource: KeyValue[]; schemaUrl: string; scopes: Map<string, { scope: { name: string; version: string }; spans: ReturnType<typeof spanOf>[] }> }>();
  for (const r of rows) {
    const values = JSON.parse(str(r.attrs) || '{}') as Record<string, Json>;
    const resourceKeys = new Set(keyList(r.resource_keys) ?? ['service.name']);
    const resource: KeyValue[] = [];
    const span: KeyValue[] = [];
    attrs.forEach((a, i) => {
      const v = values[String(i)];
      if (v === null || v === undefined) return;
      (resourceKeys.has(a.key) ? resource : span).push({ key: a.key, value: anyValue(v) });
    });
    const rKey = JSON.stringify([resource, r.resource_schema_url]);
    let res = resources.get(rKey);
    if (!res) resources.set(rKey, (res = { resource, schemaUrl: str(r.resource_schema_url), scopes: new Map() }));
    const sKey = JSON.stringify([r.scope_name, r.scope_version]);
    let scope = res.scopes.get(sKey);
    if (!scope) res.scopes.set(sKey, (scope = { scope: { name: str(r.scope_name), version: str(r.scope_version) }, spans: [] }));
    scope.spans.push(spanOf(r, span));
  }
  return {
    resourceSpans: [...resources.values()].map((res) => ({
      resource: { attributes: res.resource },
      ...(res.schemaUrl ? { schemaUrl: res.schemaUrl } : {}),
      scopeSpans: [...res.scopes.values()].map((s) => ({ scope: s.scope, spans: s.spans })),
    })),
  };
}

/** A span's resource keys (a list, or a JSON array as text), or undefined when it has none. */
function keyList(v: unknown): string[] | undefined {
  const list: unknown = typeof v === 'string' ? JSON.parse(v) : v;
  return Array.isArray(list) && list.every((k) => typeof k === 'string') ? list : undefined;
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
