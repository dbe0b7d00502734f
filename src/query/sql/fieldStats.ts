/**
 * Field statistics of a query's rows (the console's field list, as Kibana Discover shows it): for every
 * column, how many rows have a value, how many distinct values it has and its most frequent values.
 * One statement wraps the caller's query, so it runs through the same sandbox, authorisation and time
 * range as the query itself; the answer is one row per (column, top value).
 */

/** Values are compared and returned as text cut to this many characters (a log body can be huge). */
export const FIELD_VALUE_CHARS = 200;
export const MAX_TOP_VALUES = 20;

/**
 * The query as a subquery: a trailing `;` (and the LIMIT that makes a page of rows) would stop it counting
 * every row. Linear in the statement's length: it reads the last four words from the end, never a
 * regular expression that backtracks over a run of whitespace (a 300 KB body of spaces froze the event
 * loop for a minute with `\s+limit\s+\d+…$`).
 */
export function stripTrailingLimit(sql: string): string {
  let s = sql.trim();
  if (s.endsWith(';')) s = s.slice(0, -1).trimEnd();
  const words = lastWords(s, 4);
  const is = (w: { text: string } | undefined, keyword: string) => w !== undefined && w.text.toLowerCase() === keyword;
  const isNumber = (w: { text: string } | undefined) => w !== undefined && /^\d+$/.test(w.text);
  const [a, b, c, d] = words;
  let cut: number | undefined;
  if (is(a, 'limit') && isNumber(b) && is(c, 'offset') && isNumber(d)) cut = a!.start;
  else if (is(c, 'limit') && isNumber(d)) cut = c!.start;
  // LIMIT must follow something: a statement that is only `LIMIT 5` stays as it is.
  return cut === undefined || cut === 0 ? s : s.slice(0, cut).trimEnd();
}

/** The last `n` whitespace-separated words of `s` and where each starts, in order, padded at the front with undefined. */
function lastWords(s: string, n: number): ({ text: string; start: number } | undefined)[] {
  const words: ({ text: string; start: number } | undefined)[] = [];
  let end = s.length;
  while (words.length < n && end > 0) {
    while (end > 0 && isSpace(s.charCodeAt(end - 1))) end--;
    let start = end;
    while (start > 0 && !isSpace(s.charCodeAt(start - 1))) start--;
    if (start === end) break;
    words.unshift({ text: s.slice(start, end), start });
    end = start;
  }
  while (words.length < n) words.unshift(undefined);
  return words;
}

/** Whitespace as SQL separates words (ASCII space, tab, line breaks, form feed). */
const isSpace = (code: number) => code === 32 || (code >= 9 && code <= 13);

/**
 * Cells (rows × columns) field statistics look at, at most: the first rows of the query's answer, as
 * many as fit (2,000 rows × 1,990 columns ran a query worker out of memory at a 512 MiB budget,
 * issue 30 A15). 1,990 columns leave 100 rows; 20 columns, 10,000. The answer says how many rows it
 * looked at (`sampled`) beside how many the query returns (`total`).
 */
export const FIELD_STATS_MAX_CELLS = 200_000;

/**
 * `UNPIVOT` turns every non-null cell into a (column, value) pair: counting pairs per column gives the
 * rows that have it, per (column, value) the value counts. The query's width comes from its first row
 * (as JSON, NULLs included), and the rows looked at are the first FIELD_STATS_MAX_CELLS / width. The query is
 * not materialised (each use streams it; `total` only counts). Names start with `p_fs_` so that they
 * cannot meet a dataset the caller's query reads.
 */
export function fieldStatsSql(query: string, top: number): string {
  return `WITH p_fs_q AS NOT MATERIALIZED (${stripTrailingLimit(query)}
),
p_fs_w AS (SELECT coalesce(max(len(json_keys(to_json(p_fs_r)))), 1) AS p_fs_cols FROM (FROM p_fs_q LIMIT 1) p_fs_r),
p_fs_s AS (FROM p_fs_q LIMIT (SELECT greatest(1, ${FIELD_STATS_MAX_CELLS} // p_fs_cols) FROM p_fs_w)),
p_fs_u AS (UNPIVOT (SELECT left(CAST(COLUMNS(*) AS VARCHAR), ${FIELD_VALUE_CHARS}) FROM p_fs_s) ON COLUMNS(*) INTO NAME p_fs_name VALUE p_fs_value),
p_fs_g AS (SELECT p_fs_name, p_fs_value, count(*) AS p_fs_n FROM p_fs_u GROUP BY ALL),
p_fs_t AS (SELECT (SELECT count(*) FROM p_fs_q) AS total, (SELECT count(*) FROM p_fs_s) AS sampled)
SELECT p_fs_name AS name, sum(p_fs_n) OVER (PARTITION BY p_fs_name) AS present, count(*) OVER (PARTITION BY p_fs_name) AS distinct_values,
  p_fs_value AS value, p_fs_n AS count, (SELECT total FROM p_fs_t) AS total, (SELECT sampled FROM p_fs_t) AS sampled
FROM p_fs_g
QUALIFY row_number() OVER (PARTITION BY p_fs_name ORDER BY p_fs_n DESC, p_fs_value) <= ${top}
UNION ALL
-- A query with no rows still says so (total 0).
SELECT NULL, 0, 0, NULL, 0, (SELECT total FROM p_fs_t), (SELECT sampled FROM p_fs_t)`;
}

export interface FieldStats {
  /** Rows the query returns over the range. */
  total: number;
  /** Rows the statistics looked at: the first ones, at most FIELD_STATS_MAX_CELLS / the query's columns. */
  sampled: number;
  fields: { name: string; present: number; distinct: number; top: { value: string; count: number }[] }[];
}

/** The statement's rows, shaped: one entry per column that has a value in some row, in `fields` order. */
export function shapeFieldStats(rows: Record<string, unknown>[], fields: string[]): FieldStats {
  let total = 0;
  let sampled = 0;
  const by = new Map<string, FieldStats['fields'][number]>();
  for (const r of rows) {
    total = Number(r.total ?? 0);
    sampled = Number(r.sampled ?? 0);
    if (r.name === null || r.name === undefined) continue;
    const name = String(r.name);
    let f = by.get(name);
    if (!f) by.set(name, (f = { name, present: Number(r.present), distinct: Number(r.distinct_values), top: [] }));
    f.top.push({ value: String(r.value), count: Number(r.count) });
  }
  for (const f of by.values()) f.top.sort((a, b) => b.count - a.count || a.value.localeCompare(b.value));
  const order = new Map(fields.map((f, i) => [f, i]));
  return { total, sampled, fields: [...by.values()].sort((a, b) => (order.get(a.name) ?? 1e9) - (order.get(b.name) ?? 1e9) || a.name.localeCompare(b.name)) };
}
