import { z } from 'zod';
import { forbidden, invalidInput, notFound } from '../../errors.ts';
import type { TableSource } from '../../storage/scan.ts';
import { sqlIdent, sqlString } from '../../duckdb.ts';
import type { QueryExecutor } from './executor.ts';
import { parseTimeBound } from './time.ts';

/**
 * Parseable's `POST /api/v1/counts`: how many rows fall in each time bin of [startTime, endTime),
 * optionally filtered by conditions and split by columns (the top K groups). Answered with SQL over
 * the dataset through the same path as `POST /api/v1/query`, so it sees exactly what a query sees.
 */

/** More bins than this is no histogram any console can draw; it is refused (explicit) or widened (default). */
export const MAX_BINS = 10_000;
const DEFAULT_TOP_K = 10;

const OPERATORS = ['=', '!=', '<', '>', '<=', '>=', 'is null', 'is not null', 'ilike', 'contains', 'begins with', 'ends with', 'does not contain', 'does not begin with', 'does not end with'] as const;
type Operator = (typeof OPERATORS)[number];

const ConditionConfig = z.object({
  column: z.string().min(1),
  operator: z.enum(OPERATORS),
  value: z.union([z.string(), z.number(), z.boolean()]).nullish(),
  type: z.string().nullish(),
});

interface Conditions {
  operator?: 'and' | 'or';
  conditionConfig: z.infer<typeof ConditionConfig>[];
  groups?: Conditions[];
}
const Conditions: z.ZodType<Conditions> = z.lazy(() =>
  z.object({
    operator: z.string().toLowerCase().pipe(z.enum(['and', 'or'])).optional(),
    conditionConfig: z.array(ConditionConfig).default([]),
    groups: z.array(Conditions).optional(),
  }),
);

/** Parseable's `CountsRequest` (camelCase; `topK` also as `topk`/`top_k`, as Parseable accepts). */
export const CountsRequest = z.object({
  stream: z.string().min(1),
  startTime: z.string().min(1),
  endTime: z.string().min(1),
  numBins: z.number().int().positive().max(MAX_BINS).optional(),
  conditions: z
    .object({
      conditions: Conditions.optional(),
      groupBy: z.array(z.string().min(1)).optional(),
      topK: z.number().int().positive().optional(),
      topk: z.number().int().positive().optional(),
      top_k: z.number().int().positive().optional(),
    })
    .optional(),
});
export type CountsRequest = z.infer<typeof CountsRequest>;

export interface CountsResponse {
  fields: string[];
  records: Record<string, unknown>[];
}

/** Bin width: Parseable's defaults (1 min up to 5 h, 5 min up to a day, 1 h up to 10 days, then 1 day). */
export function binWidthMs(spanMs: number, numBins?: number): number {
  const span = Math.max(spanMs, 1);
  if (numBins) return Math.ceil(span / numBins);
  const minutes = span / 60_000;
  const width = minutes <= 300 ? 60_000 : minutes <= 1440 ? 300_000 : minutes <= 14_400 ? 3_600_000 : 86_400_000;
  return Math.max(width, Math.ceil(span / MAX_BINS));
}

/** RFC 3339 as Parseable (chrono) writes it: `+00:00`, fraction only when there is one. */
export const rfc3339 = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z').replace('Z', '+00:00');

const escapeLike = (v: string) => v.replaceAll('\\', '\\\\').replaceAll('%', '\\%').replaceAll('_', '\\_');

function literal(value: string, type: string | null | undefined): string {
  const t = type?.toLowerCase();
  if (t === 'bool' || t === 'boolean') {
    if (value !== 'true' && value !== 'false') throw invalidInput(`"${value}" is not a boolean`);
    return value;
  }
  const asNumber = value.trim() !== '' && Number.isFinite(Number(value)) ? String(Number(value)) : undefined;
  if (t === 'int' || t === 'float' || t === 'number') {
    if (asNumber === undefined) throw invalidInput(`"${value}" is not a number`);
    return asNumber;
  }
  if (t) return sqlString(value);
  return asNumber ?? (value === 'true' || value === 'false' ? value : sqlString(value));
}

const LIKE: Partial<Record<Operator, [string, (v: string) => string]>> = {
  contains: ['LIKE', (v) => `%${v}%`],
  'does not contain': ['NOT LIKE', (v) => `%${v}%`],
  ilike: ['ILIKE', (v) => `%${v}%`],
  'begins with': ['LIKE', (v) => `${v}%`],
  'does not begin with': ['NOT LIKE', (v) => `${v}%`],
  'ends with': ['LIKE', (v) => `%${v}`],
  'does not end with': ['NOT LIKE', (v) => `%${v}`],
};

function conditionSql(c: z.infer<typeof ConditionConfig>): string {
  if (c.type?.toLowerCase().startsWith('list')) throw invalidInput(`conditions on list columns ("${c.column}") are not supported`);
  const col = sqlIdent(c.column);
  if (c.operator === 'is null' || c.operator === 'is not null') return `${col} ${c.operator.toUpperCase()}`;
  const value = c.value === null || c.value === undefined ? '' : String(c.value);
  const like = LIKE[c.operator];
  if (like) return `${col} ${like[0]} ${sqlString(like[1](escapeLike(value)))} ESCAPE '\\'`;
  return `${col} ${c.operator} ${literal(value, c.type)}`;
}

/** Parseable's filter string: flat conditions and nested groups joined by the group's operator. */
export function whereSql(c: Conditions): string {
  const parts = [...c.conditionConfig.map(conditionSql), ...(c.groups ?? []).map((g) => `(${whereSql(g)})`)];
  if (!parts.length) throw invalidInput('conditions must have at least one condition or group');
  return parts.map((p) => `(${p})`).join(c.operator === 'or' ? ' OR ' : ' AND ');
}

export interface CountsPlan {
  sql: string;
  startMs: number;
  endMs: number;
  widthMs: number;
  bins: number;
  groupBy: string[];
}

/** The SQL (bin number, group columns as __g0…, count) and the bins it is read into. */
export function planCounts(req: CountsRequest, dataset: string, timeColumn: string, now = Date.now()): CountsPlan {
  const startMs = parseTimeBound(req.startTime, 'startTime', now);
  const endMs = parseTimeBound(req.endTime, 'endTime', now);
  // As queries: an empty range is an empty answer, a reversed one an error.
  if (startMs > endMs) throw invalidInput('startTime must not be after endTime');
  const widthMs = binWidthMs(endMs - startMs, req.numBins);
  const bins = Math.ceil((endMs - startMs) / widthMs);
  const groupBy = req.conditions?.groupBy ?? [];
  const groups = groupBy.map((g, i) => `${sqlIdent(g)} AS "__g${i}"`);
  const where = req.conditions?.conditions ? ` WHERE ${whereSql(req.conditions.conditions)}` : '';
  const bin = `CAST(floor((epoch_ms(CAST(${sqlIdent(timeColumn)} AS TIMESTAMP)) - ${startMs}) / ${widthMs}) AS BIGINT)`;
  let sql = `SELECT ${[`${bin} AS "__bin"`, ...groups, 'count(*) AS "__count"'].join(', ')} FROM ${sqlIdent(dataset)}${where} GROUP BY ALL`;
  if (groupBy.length) {
    const g = groupBy.map((_, i) => `"__g${i}"`).join(', ');
    const topK = req.conditions?.topK ?? req.conditions?.topk ?? req.conditions?.top_k ?? DEFAULT_TOP_K;
    // Groups ranked by their total over the range (ties broken by value); NULL is a group too.
    sql =
      `SELECT * FROM (SELECT *, dense_rank() OVER (ORDER BY "__total" DESC, ${g}) AS "__rank" FROM ` +
      `(SELECT *, sum("__count") OVER (PARTITION BY ${g}) AS "__total" FROM (${sql}))) WHERE "__rank" <= ${topK} ORDER BY "__bin", ${g}`;
  }
  return { sql, startMs, endMs, widthMs, bins, groupBy };
}

/** Rows of the plan's SQL as Parseable's response: every bin without groups, the non-empty ones with. */
export function shapeCounts(plan: CountsPlan, rows: Record<string, unknown>[]): CountsResponse {
  const bounds = (i: number) => ({
    start_time: rfc3339(plan.startMs + i * plan.widthMs),
    end_time: rfc3339(Math.min(plan.startMs + (i + 1) * plan.widthMs, plan.endMs)),
  });
  if (!plan.groupBy.length) {
    const counts = new Array<number>(plan.bins).fill(0);
    for (const r of rows) counts[Number(r.__bin)] += Number(r.__count);
    return { fields: ['start_time', 'end_time', 'count'], records: counts.map((count, i) => ({ ...bounds(i), count })) };
  }
  return {
    fields: ['start_time', 'end_time', 'count', ...plan.groupBy],
    records: rows.map((r) => ({
      ...bounds(Number(r.__bin)),
      count: Number(r.__count),
      ...Object.fromEntries(plan.groupBy.map((g, i) => [g, r[`__g${i}`] ?? null])),
    })),
  };
}

export interface CountsContext {
  queries: QueryExecutor;
  storage: TableSource;
  canRead: (dataset: string) => boolean;
  principalId: string;
}

/**
 * The one place counts run SQL: the query executor, with the same sandbox, time range, permissions,
 * admission limits and time limit as `POST /api/v1/query`.
 */
export async function runCountsSql(ctx: CountsContext, sql: string, startMs: number, endMs: number): Promise<Record<string, unknown>[]> {
  const answer = await ctx.queries.execute({ sql, startMs, endMs, sendNull: true, timeFormat: 'iso', streaming: false, principalId: ctx.principalId, canRead: ctx.canRead });
  const chunks: string[] = [];
  for await (const chunk of answer.chunks) chunks.push(chunk);
  return JSON.parse(`[${chunks.join(',')}]`) as Record<string, unknown>[];
}

export async function counts(ctx: CountsContext, req: CountsRequest): Promise<CountsResponse> {
  // Permission before existence, as queries: a key that may not read a name gets the same answer
  // whether a dataset of that name exists or not.
  const meta = await ctx.storage.resolve(req.stream, true);
  if (!ctx.canRead(req.stream) && !(meta && ctx.canRead(meta.name))) throw forbidden(`this API key may not read dataset "${req.stream}"`);
  if (!meta) throw notFound(`dataset "${req.stream}" does not exist`);
  const plan = planCounts(req, meta.name, meta.timeColumn);
  return shapeCounts(plan, await runCountsSql(ctx, plan.sql, plan.startMs, plan.endMs));
}
