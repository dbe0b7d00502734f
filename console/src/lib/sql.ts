/** SQL text the console writes around the user's own queries (DuckDB dialect). */

/** Double-quotes an identifier when it is not a plain lower-case word (`"service.name"`, `"my-logs"`). */
export function ident(name: string): string {
  return /^[a-z_][a-z0-9_]*$/.test(name) && !RESERVED.has(name) ? name : `"${name.replace(/"/g, '""')}"`;
}

const RESERVED = new Set(['select', 'from', 'where', 'order', 'group', 'by', 'limit', 'table', 'user', 'end', 'default', 'desc', 'asc', 'all', 'and', 'or', 'not', 'case', 'when', 'then', 'else', 'to', 'in', 'is', 'as', 'on', 'join', 'union', 'offset', 'having', 'window', 'using', 'with']);

export function literal(value: string): string {
  return `'${value.replace(/'/g, "''")}'`;
}

/** The query without a trailing `LIMIT n [OFFSET m]` and `;`, so a histogram counts every matching row. */
export function stripTrailingLimit(sql: string): string {
  return sql.trim().replace(/;\s*$/, '').replace(/\s+limit\s+\d+(\s+offset\s+\d+)?\s*$/i, '');
}

/** The first table name after FROM (quoted or not): the dataset a query reads. */
export function firstDataset(sql: string): string | undefined {
  const m = /\bfrom\s+(?:"((?:[^"]|"")+)"|([A-Za-z_][A-Za-z0-9_-]*))/i.exec(sql);
  if (!m) return undefined;
  return m[1] !== undefined ? m[1].replace(/""/g, '"') : m[2];
}

/** One ORDER BY term: a column (plain, dotted or double-quoted) or a position, its direction, its nulls. */
const ORDER_TERM = String.raw`(?:\d+|[A-Za-z_][\w.]*|"[^"]*")(?:\s+(?:asc|desc))?(?:\s+nulls\s+(?:first|last))?`;
const TRAILING_ORDER = new RegExp(String.raw`\s+order\s+by\s+${ORDER_TERM}(?:\s*,\s*${ORDER_TERM})*\s*$`, 'i');

/**
 * The query without a trailing `ORDER BY` of plain columns (after its LIMIT is gone, it cannot change
 * which rows there are): a count per bucket need not sort them first (the console's default query's
 * `ORDER BY time DESC` cost the histogram over 15 minutes 5.4 ms against 3.5 ms without, in DuckDB).
 * Anything else (an expression, a parenthesis, a quote) is left as it is.
 */
export function stripTrailingOrder(sql: string): string {
  return sql.replace(TRAILING_ORDER, '');
}

/**
 * Rows of `source` (a query or a dataset) per time bucket: `t` (bucket start) and `n`. Buckets start on
 * the epoch's grid, the one the bars are drawn on (time.ts `histogramBars`): DuckDB's own origin for
 * `time_bucket` is 2000-01-03, a Monday, which put 2-day and 7-day buckets off that grid (their bars
 * drew empty).
 */
export function histogramSql(source: { query: string } | { dataset: string }, timeColumn: string, bucketSeconds: number): string {
  const from = 'query' in source ? `(${stripTrailingOrder(stripTrailingLimit(source.query))}) AS q` : ident(source.dataset);
  return (
    `SELECT time_bucket(INTERVAL '${bucketSeconds} seconds', CAST(${ident(timeColumn)} AS TIMESTAMP), TIMESTAMP '1970-01-01') AS t, count(*) AS n ` +
    `FROM ${from} GROUP BY t ORDER BY t`
  );
}

export function defaultQuery(dataset: string, timeColumn: string): string {
  return `SELECT * FROM ${ident(dataset)}\nORDER BY ${ident(timeColumn)} DESC\nLIMIT 1000`;
}

/** Columns a person reads first: the time, then level and message, then the rest, Parseable's p_* last. */
const FIRST = ['severity_text', 'level', 'body', 'msg', 'message', 'span_name', 'metric_name', 'service.name'];

export function defaultColumns(fields: string[], timeColumn?: string): string[] {
  const rank = (f: string) => (f === timeColumn ? 0 : FIRST.includes(f) ? 1 + FIRST.indexOf(f) : f.startsWith('p_') ? 1000 : 100);
  return fields
    .map((f, i) => ({ f, i, r: rank(f) }))
    .sort((a, b) => a.r - b.r || a.i - b.i)
    .map((x) => x.f);
}

/**
 * `sql` with one more condition: inside its WHERE (or as a new one, before GROUP BY / ORDER BY /
 * LIMIT) when it is a plain one-level SELECT, else around it as a subquery, which is always right.
 */
export function addCondition(sql: string, cond: string): string {
  const text = sql.trim().replace(/;\s*$/, '');
  const plain = !/\(\s*select\b/i.test(text) && !/\b(union|intersect|except|with|qualify|having|window)\b/i.test(text) && (text.match(/\bfrom\b/gi) ?? []).length === 1;
  if (plain) {
    const tail = /\s(group\s+by|order\s+by|limit)\b/i.exec(text);
    const cut = tail ? tail.index : text.length;
    const head = text.slice(0, cut);
    const rest = text.slice(cut);
    const where = /\bwhere\b/i.exec(head);
    if (where) return `${head.slice(0, where.index)}WHERE (${head.slice(where.index + 5).trim()})\n  AND ${cond}${rest.startsWith('\n') ? '' : '\n'}${rest.trimStart()}`.trimEnd();
    return `${head.trimEnd()}\nWHERE ${cond}${rest ? `\n${rest.trimStart()}` : ''}`;
  }
  return `SELECT * FROM (\n${text}\n) AS q\nWHERE ${cond}`;
}

/**
 * The condition "`field` is (or is not) `value`", `value` as the field list shows it (text, cut at
 * `cutAt` characters). Numbers and booleans compare as such, other types as their text.
 */
export function valueCondition(field: string, kind: string | undefined, value: string, exclude: boolean, cutAt = 200): string {
  const col = ident(field);
  if (value.length >= cutAt) return `${exclude ? 'NOT ' : ''}starts_with(CAST(${col} AS VARCHAR), ${literal(value)})`;
  const rhs = (kind === 'number' && /^-?\d+(\.\d+)?(e[+-]?\d+)?$/i.test(value)) || (kind === 'bool' && /^(true|false)$/.test(value)) ? value : literal(value);
  const lhs = kind === 'text' || rhs === value ? col : `CAST(${col} AS VARCHAR)`;
  return exclude ? `${lhs} IS DISTINCT FROM ${rhs}` : `${lhs} = ${rhs}`;
}
