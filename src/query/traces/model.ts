import { z } from 'zod';

/**
 * A span as the trace query service hands it to the doors (Jaeger, Tempo): read back from the flattened
 * OTLP columns and validated with zod, so a door never sees a cell of an unexpected type.
 */

/** Resource attribute prefixes taken as the resource's for spans written before `resource_attribute_keys`. */
export const LEGACY_RESOURCE_PREFIXES = ['service.', 'telemetry.sdk.', 'host.', 'process.', 'os.', 'k8s.', 'container.', 'cloud.', 'deployment.'];

export type AttributeValue = string | number | boolean;
export type Attributes = Record<string, AttributeValue>;

const jsonValue: z.ZodType<unknown> = z.unknown();
const eventSchema = z.object({
  time_unix_nano: z.string().nullable().optional(),
  name: z.string().nullable().optional(),
  attributes: z.record(z.string(), jsonValue).nullable().optional(),
  dropped_attributes_count: z.number().nullable().optional(),
});
const linkSchema = z.object({
  trace_id: z.string(),
  span_id: z.string(),
  trace_state: z.string().nullable().optional(),
  attributes: z.record(z.string(), jsonValue).nullable().optional(),
  flags: z.number().nullable().optional(),
});
export type SpanEvent = z.infer<typeof eventSchema>;
export type SpanLink = z.infer<typeof linkSchema>;

const jsonText = <T extends z.ZodTypeAny>(schema: T) =>
  z
    .string()
    .nullable()
    .optional()
    .transform((s, ctx) => {
      if (s === null || s === undefined || s === '') return [] as z.infer<T>[];
      try {
        return z.array(schema).parse(JSON.parse(s)) as z.infer<T>[];
      } catch {
        ctx.addIssue({ code: 'custom', message: 'not a JSON array of the expected shape' });
        return z.NEVER;
      }
    });

/** The fixed columns of a span row (TRACES_KNOWN_TYPES) plus the computed time columns the queries add. */
export const spanRowSchema = z.object({
  span_trace_id: z.string(),
  span_span_id: z.string(),
  span_parent_span_id: z.string().nullable().optional(),
  span_trace_state: z.string().nullable().optional(),
  span_name: z.string().nullable().optional(),
  span_kind: z.number().nullable().optional(),
  span_status_code: z.number().nullable().optional(),
  span_status_message: z.string().nullable().optional(),
  span_flags: z.number().nullable().optional(),
  span_dropped_attributes_count: z.number().nullable().optional(),
  span_dropped_events_count: z.number().nullable().optional(),
  span_dropped_links_count: z.number().nullable().optional(),
  span_events: jsonText(eventSchema),
  span_links: jsonText(linkSchema),
  scope_name: z.string().nullable().optional(),
  scope_version: z.string().nullable().optional(),
  resource_attribute_keys: jsonText(z.string()),
  /** Start and end as nanoseconds since the epoch, as decimal text (a JS number would lose digits). */
  '@start_ns': z.string().regex(/^\d+$/),
  '@end_ns': z.string().regex(/^\d+$/).nullable().optional(),
});

export type SpanKind = 'unspecified' | 'internal' | 'server' | 'client' | 'producer' | 'consumer';
export const SPAN_KIND_NAMES: SpanKind[] = ['unspecified', 'internal', 'server', 'client', 'producer', 'consumer'];
export type StatusCode = 'unset' | 'ok' | 'error';
const STATUS_NAMES: StatusCode[] = ['unset', 'ok', 'error'];

export interface Span {
  traceId: string;
  spanId: string;
  parentSpanId: string | null;
  traceState: string | null;
  name: string;
  kind: SpanKind;
  startNs: bigint;
  endNs: bigint;
  status: StatusCode;
  statusMessage: string | null;
  flags: number;
  /** What the sender dropped (OTLP's counts; 0 or absent when none). */
  droppedAttributesCount?: number;
  droppedEventsCount?: number;
  droppedLinksCount?: number;
  serviceName: string;
  scopeName: string | null;
  scopeVersion: string | null;
  /** Attributes that came from the resource (Jaeger's process tags, TraceQL's `resource.`). */
  resource: Attributes;
  /** The span's own (and its scope's) attributes. */
  attributes: Attributes;
  events: SpanEvent[];
  links: SpanLink[];
}

/** Columns of a span row that are neither attributes nor span fields: the service's own and the computed ones. */
const isServiceColumn = (name: string) => name.startsWith('p_') || name.startsWith('@');
const FIXED = new Set([...Object.keys(spanRowSchema.shape), 'span_kind_description', 'span_status_description', 'span_start_time_unix_nano', 'span_end_time_unix_nano', 'span_duration_ns', 'resource_schema_url', 'resource_dropped_attributes_count', 'scope_schema_url', 'scope_dropped_attributes_count']);

const isLegacyResourceKey = (key: string) => LEGACY_RESOURCE_PREFIXES.some((p) => key.startsWith(p));

/** The attribute columns of a row, split into the resource's and the span's own. */
function splitAttributes(row: Record<string, unknown>, resourceKeys: Set<string> | undefined): { resource: Attributes; attributes: Attributes } {
  const resource: Attributes = {};
  const attributes: Attributes = {};
  for (const [key, value] of Object.entries(row)) {
    if (FIXED.has(key) || isServiceColumn(key) || value === null || value === undefined) continue;
    if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') continue;
    const fromResource = resourceKeys === undefined ? isLegacyResourceKey(key) : resourceKeys.has(key);
    (fromResource ? resource : attributes)[key] = value;
  }
  return { resource, attributes };
}

const serviceOf = (resource: Attributes, attributes: Attributes) => {
  const name = resource['service.name'] ?? attributes['service.name'];
  return typeof name === 'string' ? name : 'unknown_service';
};

/** A row of `SELECT *, <time columns>` over a traces dataset as a Span; throws a ZodError on a malformed row. */
export function spanFromRow(row: Record<string, unknown>): Span {
  const r = spanRowSchema.parse(row);
  // Rows written before the column have none: the well-known resource prefixes decide (docs/traces.md).
  const { resource, attributes } = splitAttributes(row, row.resource_attribute_keys == null ? undefined : new Set(r.resource_attribute_keys));
  const startNs = BigInt(r['@start_ns']);
  return {
    traceId: r.span_trace_id,
    spanId: r.span_span_id,
    parentSpanId: r.span_parent_span_id || null,
    traceState: r.span_trace_state || null,
    name: r.span_name ?? '',
    kind: SPAN_KIND_NAMES[r.span_kind ?? 0] ?? 'unspecified',
    startNs,
    endNs: r['@end_ns'] ? BigInt(r['@end_ns']) : startNs,
    status: STATUS_NAMES[r.span_status_code ?? 0] ?? 'unset',
    statusMessage: r.span_status_message || null,
    flags: r.span_flags ?? 0,
    droppedAttributesCount: r.span_dropped_attributes_count ?? 0,
    droppedEventsCount: r.span_dropped_events_count ?? 0,
    droppedLinksCount: r.span_dropped_links_count ?? 0,
    serviceName: serviceOf(resource, attributes),
    scopeName: r.scope_name || null,
    scopeVersion: r.scope_version || null,
    resource,
    attributes,
    events: r.span_events,
    links: r.span_links,
  };
}
