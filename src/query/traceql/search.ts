/**
 * A TraceQL search as one SQL statement, run by the SQL executor like any query (sandbox, worker,
 * limits, the caller's datasets). Tempo's semantics (docs/traces.md "TraceQL"):
 *
 * - a span set `{ cond }` is the spans of a trace for which `cond` holds; a trace matches when it is not
 *   empty;
 * - `A && B` between span sets: both non-empty, the answer is their union; `A || B`: their union;
 * - the answer is the `limit` most recent traces (by their first span's start) with, per trace, how many
 *   spans matched and the first `spss` of them, with the attributes the query names (and `select()`).
 *
 * In SQL: each span set is a boolean column `p_m<i>` per span; per trace `p_h<i>` says whether any span
 * has it; whether a trace matches and whether a span is in its answer follow from those by the rules above.
 */
import { sqlIdent, sqlString } from '../../duckdb.ts';
import { attributeColumns, conditionSql, fieldsOf, INTRINSIC_SQL, TRACE_LEVEL, type TraceSchema } from './conditions.ts';
import { KINDS, STATUSES, type Condition, type Field, type SpansetExpr, type TraceqlQuery } from './parse.ts';

export interface SearchOptions {
  dataset: string;
  /** Most traces answered. */
  limit: number;
  /** Most spans answered per trace (Tempo's spans per span set). */
  spss: number;
}

/** A field answered as a span attribute: its key and the SQL of its value as JSON. */
export interface OutputField {
  key: string;
  sql: string;
}

function leaves(e: SpansetExpr): Condition[] {
  return e.op === 'spanset' ? [e.condition] : [...leaves(e.left), ...leaves(e.right)];
}

/** Whether the trace's span set is non-empty, from the per-trace `p_h<i>` columns. */
function nonEmpty(e: SpansetExpr, next: { i: number }): string {
  if (e.op === 'spanset') return `p_h${next.i++}`;
  const l = nonEmpty(e.left, next);
  const r = nonEmpty(e.right, next);
  return `(${l} ${e.op === 'and' ? 'AND' : 'OR'} ${r})`;
}

/** Whether a span is in the trace's answer: `and` keeps both sides' spans only when both are non-empty. */
function inAnswer(e: SpansetExpr, next: { i: number }): string {
  if (e.op === 'spanset') return `p_m${next.i++}`;
  const start = next.i;
  const l = inAnswer(e.left, next);
  const r = inAnswer(e.right, next);
  if (e.op === 'or') return `(${l} OR ${r})`;
  const both = `(${nonEmpty(e.left, { i: start })} AND ${nonEmpty(e.right, { i: start + leaves(e.left).length })})`;
  return `(${both} AND (${l} OR ${r}))`;
}

function outputKey(f: Field): string {
  return f.kind === 'intrinsic' ? f.name : f.name;
}

/** The value of a field for the answer's span attributes, as JSON (typed: a number stays a number). */
function outputSql(f: Field, schema: TraceSchema): string | undefined {
  if (f.kind === 'attribute') {
    const columns = attributeColumns(schema, f.name, 'any');
    return columns.length ? `coalesce(${columns.map((c) => `to_json(s.${sqlIdent(c)})`).join(', ')})` : undefined;
  }
  if (f.name === 'status') return `to_json(${listSql(STATUSES)}[s.span_status_code + 1])`;
  if (f.name === 'kind') return `to_json(${listSql(KINDS)}[s.span_kind + 1])`;
  if (f.name === 'statusMessage') return `to_json(${INTRINSIC_SQL.statusMessage})`;
  // name and duration are fields of every answered span already; trace-level ones belong to the trace.
  return undefined;
}

const listSql = (items: readonly string[]) => `[${items.map(sqlString).join(', ')}]`;

/** The fields answered per span: those the conditions name, then select()'s, once each. */
export function outputFields(q: TraceqlQuery, schema: TraceSchema): OutputField[] {
  const seen = new Set<string>();
  const out: OutputField[] = [];
  for (const f of [...leaves(q.expr).flatMap(fieldsOf), ...q.select]) {
    const key = outputKey(f);
    if (seen.has(key)) continue;
    seen.add(key);
    const sql = outputSql(f, schema);
    if (sql !== undefined) out.push({ key, sql });
  }
  return out;
}

/** The trace row: start, duration over all its spans, and its root span's name and service. */
export function traceRowSql(table: string, schema: TraceSchema, where: string): string {
  const service = schema.columns['service.name'] === 'VARCHAR' ? sqlIdent('service.name') : 'NULL::VARCHAR';
  const root = "coalesce(span_parent_span_id, '') = ''";
  return `SELECT span_trace_id AS p_tid, min(span_start_time_unix_nano) AS p_tstart,
    epoch_ns(max(coalesce(span_end_time_unix_nano, span_start_time_unix_nano))) - epoch_ns(min(span_start_time_unix_nano)) AS p_tdur,
    arg_min(span_name, span_start_time_unix_nano) FILTER (WHERE ${root}) AS p_root_name,
    arg_min(${service}, span_start_time_unix_nano) FILTER (WHERE ${root}) AS p_root_svc
  FROM ${table}${where} GROUP BY span_trace_id`;
}

/**
 * The search statement. Its rows: trace_id, start_ns (text: nanoseconds exceed a double), duration_ns,
 * root_name, root_service, matched, spans (JSON text: [{id, name, start, duration, a: [values…]}]).
 */
export function searchSql(q: TraceqlQuery, schema: TraceSchema, opts: SearchOptions): { sql: string; fields: OutputField[] } {
  const table = sqlIdent(opts.dataset);
  const conds = leaves(q.expr);
  const matches = conds.map((c) => conditionSql(c, schema));
  const anyMatch = matches.map((m) => `(${m})`).join(' OR ');
  // Conditions on spans alone need no trace row: the matching spans come first, and trace rows are built only
  // for the traces whose span sets are not empty. A trace-level intrinsic needs every trace's row first.
  const traceLevel = conds.flatMap(fieldsOf).some((f) => f.kind === 'intrinsic' && TRACE_LEVEL.has(f.name));
  const fields = outputFields(q, schema);
  const fieldCols = fields.map((f, i) => `, ${f.sql} AS p_f${i}`).join('');
  const spanStruct = `{'id': k.p_sid, 'name': k.p_name, 'start': CAST(epoch_ns(k.p_st) AS VARCHAR), 'duration': k.p_dur, 'a': [${fields.map((_, i) => `k.p_f${i}`).join(', ')}]::JSON[]}`;
  const spans = `p_c AS (SELECT s.span_trace_id AS p_tid, s.span_span_id AS p_sid, s.span_name AS p_name, s.span_start_time_unix_nano AS p_st, s.span_duration_ns AS p_dur${fieldCols}${matches.map((m, i) => `, ${m} AS p_m${i}`).join('')}
  FROM ${table} s${traceLevel ? ' JOIN p_tr t ON s.span_trace_id = t.p_tid' : ''} WHERE ${anyMatch}),
p_h AS (SELECT p_tid, ${matches.map((_, i) => `bool_or(p_m${i}) AS p_h${i}`).join(', ')} FROM p_c GROUP BY p_tid HAVING ${nonEmpty(q.expr, { i: 0 })})`;
  const traces = `p_tr AS (${traceRowSql(table, schema, traceLevel ? '' : ' s WHERE span_trace_id IN (SELECT p_tid FROM p_h)')})`;
  const sql = `WITH ${traceLevel ? `${traces},\n${spans}` : `${spans},\n${traces}`},
p_top AS (SELECT * FROM p_tr WHERE p_tid IN (SELECT p_tid FROM p_h) ORDER BY p_tstart DESC, p_tid LIMIT ${Math.trunc(opts.limit)}),
p_k AS (SELECT p_c.*, row_number() OVER (PARTITION BY p_c.p_tid ORDER BY p_st, p_sid) AS p_rn, count(*) OVER (PARTITION BY p_c.p_tid) AS p_matched
  FROM p_c JOIN p_h ON p_c.p_tid = p_h.p_tid WHERE p_c.p_tid IN (SELECT p_tid FROM p_top) AND ${inAnswer(q.expr, { i: 0 })})
SELECT t.p_tid AS trace_id, CAST(epoch_ns(t.p_tstart) AS VARCHAR) AS start_ns, t.p_tdur AS duration_ns, t.p_root_name AS root_name, t.p_root_svc AS root_service,
  max(k.p_matched) AS matched, CAST(to_json(list(${spanStruct} ORDER BY k.p_st, k.p_sid) FILTER (WHERE k.p_rn <= ${Math.trunc(opts.spss)})) AS VARCHAR) AS spans
FROM p_top t JOIN p_k k ON t.p_tid = k.p_tid
GROUP BY t.p_tid, t.p_tstart, t.p_tdur, t.p_root_name, t.p_root_svc
ORDER BY t.p_tstart DESC, t.p_tid`;
  return { sql, fields };
}
