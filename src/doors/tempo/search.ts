/**
 * `GET /tempo/api/search`: TraceQL (`q=`) or the older tag search (`tags=` in logfmt, `minDuration`,
 * `maxDuration`), both translated to one SQL statement (src/query/traceql/search.ts) and run by the SQL
 * executor under the caller's key. The answer is Tempo's SearchResponse as Grafana reads it.
 */
import type { Context } from 'hono';
import { z } from 'zod';
import { invalidInput } from '../../errors.ts';
import { collectRows } from '../../query/sql/collect.ts';
import { parseDuration, parseTraceql, type Condition, type TraceqlQuery } from '../../query/traceql/parse.ts';
import { searchSql, type OutputField } from '../../query/traceql/search.ts';
import { anyValue } from '../../query/traces/otlp.ts';
import type { AppEnv, Services } from '../shared/context.ts';
import { params, SEARCH_DEFAULT_LOOKBACK_MS, searchParams, tempoRequest, timeRange } from './request.ts';

/** Parses Tempo's logfmt `tags` (`a=b c="d e"`) into pairs. */
export function parseLogfmt(text: string): [string, string][] {
  const out: [string, string][] = [];
  const re = /\s*([^\s=]+)=(?:"((?:[^"\\]|\\.)*)"|(\S*))/gy;
  let m: RegExpExecArray | null;
  let last = 0;
  while ((m = re.exec(text)) !== null) {
    out.push([m[1], m[2] !== undefined ? m[2].replace(/\\(.)/g, '$1') : m[3]]);
    last = re.lastIndex;
  }
  if (text.slice(last).trim() !== '') throw invalidInput(`tags: cannot read "${text.slice(last).trim()}" (logfmt: key=value key2="value 2")`);
  return out;
}

function durationParam(text: string | undefined, name: string): number | undefined {
  if (text === undefined || text === '') return undefined;
  const nanos = parseDuration(text);
  if (nanos === undefined) throw invalidInput(`${name}: not a duration: "${text}" (e.g. 100ms, 1.5s, 2m)`);
  return nanos;
}

/**
 * The older tag search as a query: one span with every tag (its value a case-insensitive substring, as
 * Tempo's documentation says), in a trace whose duration is within min/maxDuration.
 */
export function tagSearchQuery(tags: string | undefined, minDuration: string | undefined, maxDuration: string | undefined): TraceqlQuery {
  const conds: Condition[] = parseLogfmt(tags ?? '').map(([key, value]) => ({
    op: 'compare',
    field: key === 'name' ? { kind: 'intrinsic', name: 'name' } : { kind: 'attribute', scope: 'any', name: key },
    operator: 'contains',
    value: { type: 'string', value },
  }));
  const min = durationParam(minDuration, 'minDuration');
  const max = durationParam(maxDuration, 'maxDuration');
  if (min !== undefined) conds.push({ op: 'compare', field: { kind: 'intrinsic', name: 'traceDuration' }, operator: '>=', value: { type: 'duration', nanos: min } });
  if (max !== undefined) conds.push({ op: 'compare', field: { kind: 'intrinsic', name: 'traceDuration' }, operator: '<=', value: { type: 'duration', nanos: max } });
  const condition = conds.reduce<Condition | undefined>((acc, c) => (acc === undefined ? c : { op: 'and', left: acc, right: c }), undefined) ?? { op: 'const', value: true };
  return { expr: { op: 'spanset', condition }, select: [] };
}

const resultRow = z.object({
  trace_id: z.string(),
  start_ns: z.string(),
  duration_ns: z.union([z.number(), z.string()]).nullable(),
  root_name: z.string().nullable(),
  root_service: z.string().nullable(),
  matched: z.union([z.number(), z.string()]),
  spans: z.string(),
});
const spanJson = z.array(z.object({ id: z.string(), name: z.string().nullable(), start: z.string(), duration: z.number().nullable(), a: z.array(z.unknown()) }));

/** One result row as Tempo's TraceSearchMetadata. */
function traceMetadata(row: z.infer<typeof resultRow>, fields: OutputField[]) {
  const spans = spanJson.parse(JSON.parse(row.spans)).map((s) => ({
    spanID: s.id,
    name: s.name ?? '',
    startTimeUnixNano: s.start,
    durationNanos: String(s.duration ?? 0),
    attributes: fields.flatMap((f, i) => (s.a[i] === null || s.a[i] === undefined ? [] : [{ key: f.key, value: anyValue(s.a[i]) }])),
  }));
  const spanSet = { spans, matched: Number(row.matched) };
  return {
    traceID: row.trace_id,
    // Tempo's words for a trace whose root span it has not seen.
    rootServiceName: row.root_service ?? '<root span not yet received>',
    rootTraceName: row.root_name ?? '',
    startTimeUnixNano: row.start_ns,
    durationMs: Math.floor(Number(row.duration_ns ?? 0) / 1e6),
    spanSet,
    spanSets: [spanSet],
  };
}

export async function search(c: Context<AppEnv>, services: Services) {
  const p = params(c, searchParams);
  const req = await tempoRequest(c, services);
  const query = p.q !== undefined && p.q.trim() !== '' ? parseTraceql(p.q) : tagSearchQuery(p.tags, p.minDuration, p.maxDuration);
  const { sql, fields } = searchSql(query, req.schema, { dataset: req.dataset, limit: p.limit, spss: p.spss });
  const rows = await collectRows(services.queries, { sql, ...timeRange(p, SEARCH_DEFAULT_LOOKBACK_MS), principalId: req.principalId, canRead: req.canRead, signal: req.signal });
  const traces = rows.map((r) => traceMetadata(resultRow.parse(r), fields));
  return c.json({ traces, metrics: { completedJobs: 1, totalJobs: 1 } });
}
