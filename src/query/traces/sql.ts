import { sqlIdent, sqlString } from '../../duckdb.ts';
import { LEGACY_RESOURCE_PREFIXES, SPAN_KIND_NAMES, type SpanKind } from './model.ts';

/**
 * SQL over one traces dataset (the flattened OTLP columns, src/ingest/otlp/traces.ts). Every builder gets
 * the dataset's columns: a column no span ever had does not exist, and naming it would fail the query,
 * so such a condition is written as its constant answer instead.
 */

export interface Columns {
  has(name: string): boolean;
}

const SERVICE = 'service.name';
export const TIME = 'span_start_time_unix_nano';

/** The service name of a span, `unknown_service` when it has none (as OTLP→Jaeger translation does). */
export const serviceExpr = (cols: Columns) => (cols.has(SERVICE) ? `coalesce(CAST(${sqlIdent(SERVICE)} AS VARCHAR), 'unknown_service')` : `'unknown_service'`);

/** Every column plus the start and end as nanosecond text (spanRowSchema's `@start_ns`, `@end_ns`). */
export function spanColumns(cols: Columns): string {
  const end = cols.has('span_end_time_unix_nano') ? `CAST(epoch_ns(span_end_time_unix_nano) AS VARCHAR)` : 'NULL';
  return `*, CAST(epoch_ns(${TIME}) AS VARCHAR) AS "@start_ns", ${end} AS "@end_ns"`;
}

/** A 32-hex-digit trace id as stored (lower case); shorter ids are left-padded, as Jaeger and Tempo accept them. */
export function normalTraceId(id: string): string | undefined {
  const hex = id.trim().toLowerCase();
  if (!/^[0-9a-f]{1,32}$/.test(hex)) return undefined;
  return hex.padStart(32, '0');
}

export function spansOfTracesSql(dataset: string, cols: Columns, traceIds: string[]): string {
  const ids = traceIds.map(sqlString).join(', ');
  return `SELECT ${spanColumns(cols)} FROM ${sqlIdent(dataset)} WHERE span_trace_id IN (${ids}) ORDER BY span_trace_id, ${TIME}, span_span_id`;
}

export function servicesSql(dataset: string, cols: Columns): string {
  return `SELECT DISTINCT ${serviceExpr(cols)} AS service FROM ${sqlIdent(dataset)} ORDER BY 1`;
}

export function operationsSql(dataset: string, cols: Columns, service: string, kind?: SpanKind): string {
  const where = [`${serviceExpr(cols)} = ${sqlString(service)}`];
  if (kind !== undefined) where.push(cols.has('span_kind') ? `coalesce(span_kind, 0) = ${SPAN_KIND_NAMES.indexOf(kind)}` : kind === 'unspecified' ? 'true' : 'false');
  const name = cols.has('span_name') ? 'coalesce(span_name, \'\')' : `''`;
  const k = cols.has('span_kind') ? 'coalesce(span_kind, 0)' : '0';
  return `SELECT DISTINCT ${name} AS name, ${k} AS kind FROM ${sqlIdent(dataset)} WHERE ${where.join(' AND ')} ORDER BY 1, 2`;
}

export interface TraceSearch {
  service?: string;
  operation?: string;
  /** Every pair must match one span (span or resource attribute, or a derived tag: see tagCondition). */
  tags?: Record<string, string>;
  minDurationNs?: bigint;
  maxDurationNs?: bigint;
  /** Most trace ids answered (the newest by their latest matching span). */
  limit: number;
}

/**
 * A tag condition on one span. Besides attributes, the tags the OTLP→Jaeger translation derives are
 * searchable: `error` (status error), `span.kind`, `otel.status_code`, `otel.status_description`,
 * `otel.scope.name`, `otel.scope.version`.
 */
export function tagCondition(cols: Columns, key: string, value: string): string {
  const v = sqlString(value);
  const col = (name: string) => (cols.has(name) ? `CAST(${sqlIdent(name)} AS VARCHAR) = ${v}` : 'false');
  switch (key) {
    case 'error':
      return value === 'true' ? `(coalesce(span_status_code, 0) = 2 OR ${col('error')})` : col('error');
    case 'span.kind': {
      const kind = SPAN_KIND_NAMES.indexOf(value as SpanKind);
      return kind > 0 && cols.has('span_kind') ? `(span_kind = ${kind} OR ${col(key)})` : col(key);
    }
    case 'otel.status_code': {
      const code = ['', 'OK', 'ERROR'].indexOf(value);
      return code > 0 && cols.has('span_status_code') ? `(span_status_code = ${code} OR ${col(key)})` : col(key);
    }
    case 'otel.status_description':
      return `(${col('span_status_message')} OR ${col(key)})`;
    case 'otel.scope.name':
      return `(${col('scope_name')} OR ${col(key)})`;
    case 'otel.scope.version':
      return `(${col('scope_version')} OR ${col(key)})`;
    default:
      return col(key);
  }
}

/** The span conditions of a search (time bounds come from the executor's range). */
export function searchConditions(cols: Columns, q: TraceSearch): string[] {
  const where: string[] = [];
  if (q.service !== undefined) where.push(`${serviceExpr(cols)} = ${sqlString(q.service)}`);
  if (q.operation !== undefined) where.push(cols.has('span_name') ? `span_name = ${sqlString(q.operation)}` : 'false');
  for (const [k, v] of Object.entries(q.tags ?? {})) where.push(tagCondition(cols, k, v));
  const duration = cols.has('span_duration_ns') ? 'coalesce(span_duration_ns, 0)' : '0';
  if (q.minDurationNs !== undefined) where.push(`${duration} >= ${q.minDurationNs}`);
  if (q.maxDurationNs !== undefined) where.push(`${duration} <= ${q.maxDurationNs}`);
  return where.length ? where : ['true'];
}

export function searchSql(dataset: string, cols: Columns, q: TraceSearch): string {
  return (
    `SELECT span_trace_id AS trace_id, CAST(epoch_ns(max(${TIME})) AS VARCHAR) AS last_ns FROM ${sqlIdent(dataset)} ` +
    `WHERE ${searchConditions(cols, q).join(' AND ')} GROUP BY span_trace_id ORDER BY max(${TIME}) DESC, span_trace_id LIMIT ${Math.max(1, Math.floor(q.limit))}`
  );
}

/**
 * Calls from a parent span's service to a child span's service, as Jaeger's stores count them: one per
 * child span whose parent (same trace) is of another service.
 */
export function dependenciesSql(dataset: string, cols: Columns): string {
  const t = sqlIdent(dataset);
  const svc = serviceExpr(cols);
  const spans = `SELECT span_trace_id AS t, span_span_id AS s, span_parent_span_id AS p, ${svc} AS svc FROM ${t}`;
  return (
    `WITH spans AS (${spans}) SELECT parent.svc AS parent, child.svc AS child, count(*) AS call_count ` +
    `FROM spans child JOIN spans parent ON child.t = parent.t AND child.p = parent.s WHERE parent.svc <> child.svc GROUP BY 1, 2 ORDER BY 1, 2`
  );
}

/**
 * SQL that is true when a span's column `key` holds the resource's value (`resource`) or the span's own
 * (`span`: its scope's or its own attribute), e.g. for TraceQL's `resource.x` / `span.x`. Spans stored
 * before `resource_attribute_keys` existed fall back to the well-known resource prefixes. A column the
 * dataset lacks is false either way.
 */
export function attributeFrom(cols: Columns, scope: 'resource' | 'span', key: string): string {
  if (!cols.has(key)) return 'false';
  const legacy = LEGACY_RESOURCE_PREFIXES.some((p) => key.startsWith(p)) ? 'true' : 'false';
  const listed = cols.has('resource_attribute_keys') ? `json_contains(resource_attribute_keys, ${sqlString(JSON.stringify(key))})` : 'NULL';
  const fromResource = `coalesce(${listed}, ${legacy})`;
  return `(${sqlIdent(key)} IS NOT NULL AND ${scope === 'resource' ? fromResource : `NOT ${fromResource}`})`;
}
