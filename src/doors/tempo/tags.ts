/**
 * Tag names and values for Grafana's search editor: `search/tags`, `v2/search/tags` (by scope),
 * `search/tag/{tag}/values` and `v2/search/tag/{tag}/values` (typed, filtered by a TraceQL span set `q`).
 * Names come from the dataset's columns (the resource's from the keys spans list, when stored); values
 * from a SQL statement over the time range, run by the executor under the caller's key.
 */
import type { Context } from 'hono';
import { sqlIdent } from '../../duckdb.ts';
import { attributeColumns as typedColumns, attributeNames, conditionSql, fieldsOf, resourceKeysList, TRACE_LEVEL, type TraceSchema } from '../../query/traceql/conditions.ts';
import { KINDS, parseField, parseTraceql, STATUSES, type Condition, type Field } from '../../query/traceql/parse.ts';
import { traceRowSql } from '../../query/traceql/search.ts';
import { collectRows } from '../../query/sql/collect.ts';
import type { AppEnv, Services } from '../shared/context.ts';
import { params, rangeParams, SEARCH_DEFAULT_LOOKBACK_MS, tempoRequest, timeRange, type TempoRequest } from './request.ts';

/** The intrinsics TraceQL answers here (docs/traces.md), as Tempo lists them. */
export const INTRINSIC_TAGS = ['duration', 'kind', 'name', 'rootName', 'rootServiceName', 'status', 'statusMessage', 'traceDuration'];
const DEFAULT_VALUES_LIMIT = 1000;

async function run(services: Services, req: TempoRequest, sql: string, range: { startMs: number; endMs: number }) {
  return collectRows(services.queries, { sql, ...range, principalId: req.principalId, canRead: req.canRead, signal: req.signal });
}

/** Attribute names, split into the resource's and the spans' (every name is both without the keys column). */
async function tagScopes(c: Context<AppEnv>, services: Services): Promise<{ resource: string[]; span: string[] }> {
  const p = params(c, rangeParams);
  const req = await tempoRequest(c, services);
  const names = attributeNames(req.schema.columns);
  const keys = resourceKeysList(req.schema);
  if (keys === undefined) return { resource: names, span: names };
  const rows = await run(services, req, `SELECT DISTINCT unnest(${keys}) AS k FROM ${sqlIdent(req.dataset)} s ORDER BY k`, timeRange(p, SEARCH_DEFAULT_LOOKBACK_MS));
  const resource = new Set(rows.map((r) => String(r.k)));
  return { resource: names.filter((n) => resource.has(n)), span: names.filter((n) => !resource.has(n)) };
}

export async function tagNames(c: Context<AppEnv>, services: Services) {
  const scope = c.req.query('scope') ?? 'all';
  const { resource, span } = await tagScopes(c, services);
  const byScope: Record<string, string[]> = { resource, span, intrinsic: INTRINSIC_TAGS };
  const tagNames = scope === 'all' || scope === '' ? [...new Set([...resource, ...span])].sort() : (byScope[scope] ?? []);
  return c.json({ tagNames, metrics: {} });
}

export async function tagNamesV2(c: Context<AppEnv>, services: Services) {
  const wanted = c.req.query('scope') || 'all';
  const { resource, span } = await tagScopes(c, services);
  const scopes = [
    { name: 'resource', tags: resource },
    { name: 'span', tags: span },
    { name: 'intrinsic', tags: INTRINSIC_TAGS },
  ].filter((s) => wanted === 'all' || s.name === wanted);
  return c.json({ scopes, metrics: {} });
}

/** The filter of `q`, when it is one span set Tempo would use; otherwise none (Tempo answers all values then). */
function filterOf(q: string | undefined): Condition | undefined {
  if (q === undefined || q.trim() === '') return undefined;
  try {
    const parsed = parseTraceql(q);
    return parsed.expr.op === 'spanset' ? parsed.expr.condition : undefined;
  } catch {
    return undefined;
  }
}

/** SQL of (type, value) pairs of a field, from the spans (and their traces) where `filter` holds. */
function valuesSql(field: Field, req: TempoRequest, filter: Condition | undefined, limit: number): string {
  const table = sqlIdent(req.dataset);
  const schema: TraceSchema = req.schema;
  const traceLevel = [...(filter ? fieldsOf(filter) : []), field].some((f) => f.kind === 'intrinsic' && TRACE_LEVEL.has(f.name));
  const from = traceLevel ? `${table} s JOIN (${traceRowSql(table, schema, '')}) t ON s.span_trace_id = t.p_tid` : `${table} s`;
  const where = filter ? conditionSql(filter, schema) : 'true';
  const select = (type: string, expr: string) => `SELECT DISTINCT '${type}' AS type, CAST(${expr} AS VARCHAR) AS value FROM ${from} WHERE ${expr} IS NOT NULL AND ${where}`;
  const parts: string[] = [];
  if (field.kind === 'intrinsic') {
    const list = (xs: readonly string[]) => `[${xs.map((x) => `'${x}'`).join(', ')}]`;
    const intrinsic: Record<string, [string, string]> = {
      name: ['string', 's.span_name'],
      statusMessage: ['string', 's.span_status_message'],
      rootName: ['string', 't.p_root_name'],
      rootServiceName: ['string', 't.p_root_svc'],
      status: ['keyword', `${list(STATUSES)}[s.span_status_code + 1]`],
      kind: ['keyword', `${list(KINDS)}[s.span_kind + 1]`],
    };
    const known = intrinsic[field.name];
    if (known) parts.push(select(known[0], known[1]));
  } else {
    for (const [type, valueType] of [['string', 'string'], ['int', 'number'], ['bool', 'bool']] as const) {
      for (const col of typedColumns(schema, field.name, valueType)) {
        const t = valueType === 'number' && schema.columns[col] === 'DOUBLE' ? 'float' : type;
        const scoped: Condition = { op: 'compare', field, operator: '!=', value: { type: 'nil' } };
        parts.push(`${select(t, `s.${sqlIdent(col)}`)} AND ${conditionSql(scoped, schema)}`);
      }
    }
  }
  if (!parts.length) return `SELECT NULL AS type, NULL AS value WHERE false`;
  return `SELECT type, value FROM (${parts.join('\nUNION\n')}) ORDER BY value LIMIT ${limit}`;
}

export async function tagValues(c: Context<AppEnv>, services: Services, v2: boolean) {
  const p = params(c, rangeParams);
  const req = await tempoRequest(c, services);
  const tag = c.req.param('tag') ?? '';
  // The v1 API names attributes without a scope; v2 takes a TraceQL identifier (`.a`, `span.a`, `name`).
  const field: Field = v2 ? parseField(tag) : INTRINSIC_TAGS.includes(tag) ? parseField(tag) : { kind: 'attribute', scope: 'any', name: tag };
  const sql = valuesSql(field, req, v2 ? filterOf(p.q) : undefined, p.limit ?? DEFAULT_VALUES_LIMIT);
  const rows = await run(services, req, sql, timeRange(p, SEARCH_DEFAULT_LOOKBACK_MS));
  if (!v2) return c.json({ tagValues: [...new Set(rows.map((r) => String(r.value)))], metrics: {} });
  return c.json({ tagValues: rows.map((r) => ({ type: String(r.type), value: String(r.value) })), metrics: {} });
}
