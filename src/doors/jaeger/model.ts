import { isoToNs } from '../../query/traces/otlp.ts';
import type { Span, SpanEvent, SpanLink } from '../../query/traces/store.ts';

/**
 * Spans as Jaeger's UI JSON (the `/api/traces` answers Jaeger UI and Grafana's Jaeger data source read).
 * The tags follow the OTLP→Jaeger translation Jaeger itself applies on OTLP ingest (the Collector's
 * pkg/translator/jaeger): scope name/version, the attributes, span.kind, otel.status_code, error,
 * otel.status_description, w3c.tracestate; the resource is the process (service.name its serviceName).
 */

export type TagType = 'string' | 'bool' | 'int64' | 'float64';
export interface JaegerTag {
  key: string;
  type: TagType;
  value: string | number | boolean;
}
export interface JaegerReference {
  refType: 'CHILD_OF' | 'FOLLOWS_FROM';
  traceID: string;
  spanID: string;
}
export interface JaegerSpan {
  traceID: string;
  spanID: string;
  operationName: string;
  references: JaegerReference[];
  startTime: number;
  duration: number;
  tags: JaegerTag[];
  logs: { timestamp: number; fields: JaegerTag[] }[];
  processID: string;
  warnings: string[] | null;
}
export interface JaegerProcess {
  serviceName: string;
  tags: JaegerTag[];
}
export interface JaegerTrace {
  traceID: string;
  spans: JaegerSpan[];
  processes: Record<string, JaegerProcess>;
  warnings: string[] | null;
}

/** Jaeger's trace id text: 16 hex digits when the high half is zero, else 32 (model.TraceID.String()). */
export const jaegerTraceId = (hex: string) => (hex.length === 32 && hex.startsWith('0000000000000000') ? hex.slice(16) : hex.padStart(16, '0'));

/** A value as a tag: JSON numbers that are whole are int64 (the column does not keep OTLP's int/double apart). */
export function tag(key: string, value: unknown): JaegerTag {
  if (typeof value === 'boolean') return { key, type: 'bool', value };
  if (typeof value === 'number') return { key, type: Number.isInteger(value) ? 'int64' : 'float64', value };
  if (typeof value === 'string') return { key, type: 'string', value };
  return { key, type: 'string', value: JSON.stringify(value ?? null) };
}

const nsToUs = (ns: bigint) => Number(ns / 1000n);

function spanTags(span: Span): JaegerTag[] {
  const tags: JaegerTag[] = [];
  if (span.scopeName) tags.push(tag('otel.scope.name', span.scopeName));
  if (span.scopeVersion) tags.push(tag('otel.scope.version', span.scopeVersion));
  for (const [k, v] of Object.entries(span.attributes)) tags.push(tag(k, v));
  if (span.kind !== 'unspecified') tags.push(tag('span.kind', span.kind));
  if (span.status !== 'unset') tags.push(tag('otel.status_code', span.status.toUpperCase()));
  if (span.status === 'error') tags.push(tag('error', true));
  if (span.statusMessage) tags.push(tag('otel.status_description', span.statusMessage));
  if (span.traceState) tags.push(tag('w3c.tracestate', span.traceState));
  return tags;
}

/** Parent first (CHILD_OF), then links (FOLLOWS_FROM unless `opentracing.ref_type` says child_of). */
export function references(span: Span): JaegerReference[] {
  const refs: JaegerReference[] = [];
  const traceID = jaegerTraceId(span.traceId);
  if (span.parentSpanId && span.parentSpanId !== '0000000000000000') refs.push({ refType: 'CHILD_OF', traceID, spanID: span.parentSpanId });
  for (const link of span.links) {
    const refType = linkRefType(link);
    if (refs.length && link.trace_id === span.traceId && link.span_id === span.parentSpanId) {
      refs[0].refType = refType;
      continue;
    }
    refs.push({ refType, traceID: jaegerTraceId(link.trace_id), spanID: link.span_id });
  }
  return refs;
}

const linkRefType = (link: SpanLink) => (link.attributes?.['opentracing.ref_type'] === 'child_of' ? 'CHILD_OF' : 'FOLLOWS_FROM');

function logOf(event: SpanEvent): { timestamp: number; fields: JaegerTag[] } {
  const fields: JaegerTag[] = [];
  const attributes = event.attributes ?? {};
  if (event.name && !Object.hasOwn(attributes, 'event')) fields.push(tag('event', event.name));
  for (const [k, v] of Object.entries(attributes)) fields.push(tag(k, v));
  return { timestamp: event.time_unix_nano ? nsToUs(isoToNs(event.time_unix_nano)) : 0, fields };
}

/** One trace's spans as Jaeger's trace JSON; identical processes share an id (p1, p2, … in span order). */
export function jaegerTrace(spans: Span[]): JaegerTrace {
  const processes: Record<string, JaegerProcess> = {};
  const byKey = new Map<string, string>();
  const out = spans.map((span): JaegerSpan => {
    const process: JaegerProcess = {
      serviceName: span.serviceName,
      tags: Object.entries(span.resource)
        .filter(([k]) => k !== 'service.name')
        .map(([k, v]) => tag(k, v)),
    };
    const key = JSON.stringify(process);
    let processID = byKey.get(key);
    if (processID === undefined) {
      processID = `p${byKey.size + 1}`;
      byKey.set(key, processID);
      processes[processID] = process;
    }
    return {
      traceID: jaegerTraceId(span.traceId),
      spanID: span.spanId,
      operationName: span.name,
      references: references(span),
      startTime: nsToUs(span.startNs),
      duration: nsToUs(span.endNs - span.startNs),
      tags: spanTags(span),
      logs: span.events.map(logOf),
      processID,
      warnings: null,
    };
  });
  return { traceID: jaegerTraceId(spans[0]?.traceId ?? ''), spans: out, processes, warnings: null };
}
