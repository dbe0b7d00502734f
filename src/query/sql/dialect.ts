/**
 * DataFusion functions that dashboards written for Parseable use and DuckDB lacks, as DuckDB macros
 * with DataFusion's semantics. They are created in the default schema (`main`) of the query
 * instance — not TEMP, because TEMP objects live in one connection and every query opens its own —
 * so every connection sees them. Users cannot drop or replace them: the sandbox runs SELECT only.
 *
 * Rules kept here:
 * - No macro shadows a DuckDB builtin, except `to_timestamp`, which keeps the builtin's meaning for
 *   numbers (seconds since the epoch) and adds DataFusion's for text (ISO 8601, zone honoured). It
 *   returns a zone-less TIMESTAMP in UTC, as DataFusion does, where the builtin returned TIMESTAMPTZ.
 * - Helpers start with `__df_` so they never collide with a name a user would pick.
 * - Every timestamp a macro returns is a zone-less UTC TIMESTAMP, comparable with `p_timestamp`.
 *
 * The list of mapped functions is in docs/query.md "Dialect"; test/unit/dialect.test.ts
 * checks each against DataFusion's documented results.
 */

/** DuckDB type names `typeof()` returns for numbers (DECIMAL(p,s) is matched by prefix). */
const NUMERIC_TYPES = ['TINYINT', 'SMALLINT', 'INTEGER', 'BIGINT', 'HUGEINT', 'UTINYINT', 'USMALLINT', 'UINTEGER', 'UBIGINT', 'UHUGEINT', 'FLOAT', 'DOUBLE'];

/** A time followed by a zone (`Z`, `+02`, `+0200`, `+02:00`), after upper-casing. */
const ZONED_TIME_RE = String.raw`\d{2}:\d{2}(:\d{2}(\.\d+)?)?\s*(Z|[+-]\d{2}(:?\d{2})?)$`;

/** Arrow's names for the DuckDB types a dataset or an expression can have (DataFusion's arrow_typeof). */
const ARROW_TYPE_NAMES: [string, string][] = [
  ['VARCHAR', 'Utf8'],
  ['BOOLEAN', 'Boolean'],
  ['TINYINT', 'Int8'],
  ['SMALLINT', 'Int16'],
  ['INTEGER', 'Int32'],
  ['BIGINT', 'Int64'],
  ['UTINYINT', 'UInt8'],
  ['USMALLINT', 'UInt16'],
  ['UINTEGER', 'UInt32'],
  ['UBIGINT', 'UInt64'],
  ['FLOAT', 'Float32'],
  ['DOUBLE', 'Float64'],
  ['DATE', 'Date32'],
  ['BLOB', 'Binary'],
  ['INTERVAL', 'Interval(MonthDayNano)'],
  ['"NULL"', 'Null'],
  ['TIMESTAMP_S', 'Timestamp(Second, None)'],
  ['TIMESTAMP_MS', 'Timestamp(Millisecond, None)'],
  ['TIMESTAMP', 'Timestamp(Microsecond, None)'],
  ['TIMESTAMP_NS', 'Timestamp(Nanosecond, None)'],
  ['TIMESTAMP WITH TIME ZONE', 'Timestamp(Microsecond, Some("UTC"))'],
  ['VARCHAR[]', listTypeName('Utf8')],
  ['BIGINT[]', listTypeName('Int64')],
  ['DOUBLE[]', listTypeName('Float64')],
];

/** How arrow-rs prints a list type with nullable items named "item". */
function listTypeName(item: string): string {
  return `List(Field { name: "item", data_type: ${item}, nullable: true, dict_id: 0, dict_is_ordered: false, metadata: {} })`;
}

const q = (s: string) => `'${s.replaceAll("'", "''")}'`;

const isNumber = (x: string) => `(typeof(${x}) IN (${NUMERIC_TYPES.map(q).join(', ')}) OR typeof(${x}) LIKE 'DECIMAL%')`;

export const DIALECT_SQL: string[] = [
  // Any non-number (text with or without a zone, DATE, TIMESTAMP, TIMESTAMPTZ) → UTC TIMESTAMP. Text
  // without a zone is UTC, as in DataFusion (not the session's time zone).
  `CREATE OR REPLACE MACRO __df_text_ts(s) AS CASE
     WHEN regexp_matches(upper(s), ${q(ZONED_TIME_RE)}) THEN timezone('UTC', CAST(upper(s) AS TIMESTAMPTZ))
     ELSE CAST(s AS TIMESTAMP) END`,
  `CREATE OR REPLACE MACRO __df_ts(x) AS __df_text_ts(trim(CAST(x AS VARCHAR)))`,

  // date_bin(stride, source[, origin]): start of the stride-wide bin holding source, bins aligned
  // on origin (default the Unix epoch). A stride may be an INTERVAL or text ('15 minutes', '1m').
  `CREATE OR REPLACE MACRO date_bin(stride, source) AS time_bucket(CAST(stride AS INTERVAL), source, TIMESTAMP '1970-01-01 00:00:00'),
     (stride, source, origin) AS time_bucket(CAST(stride AS INTERVAL), source, __df_ts(origin))`,

  // to_timestamp family: numbers count seconds/millis/micros/nanos since the epoch; text is parsed.
  `CREATE OR REPLACE MACRO to_timestamp(x) AS CASE WHEN ${isNumber('x')}
     THEN make_timestamp(CAST(round(try_cast(x AS DOUBLE) * 1000000) AS BIGINT)) ELSE __df_ts(x) END`,
  `CREATE OR REPLACE MACRO to_timestamp_seconds(x) AS CASE WHEN ${isNumber('x')}
     THEN make_timestamp(CAST(trunc(try_cast(x AS DOUBLE)) AS BIGINT) * 1000000) ELSE date_trunc('second', __df_ts(x)) END`,
  `CREATE OR REPLACE MACRO to_timestamp_millis(x) AS CASE WHEN ${isNumber('x')}
     THEN epoch_ms(CAST(try_cast(x AS DOUBLE) AS BIGINT)) ELSE date_trunc('millisecond', __df_ts(x)) END`,
  `CREATE OR REPLACE MACRO to_timestamp_micros(x) AS CASE WHEN ${isNumber('x')}
     THEN make_timestamp(CAST(try_cast(x AS DOUBLE) AS BIGINT)) ELSE __df_ts(x) END`,
  `CREATE OR REPLACE MACRO to_timestamp_nanos(x) AS CASE WHEN ${isNumber('x')}
     THEN make_timestamp_ns(CAST(try_cast(x AS HUGEINT) AS BIGINT)) ELSE CAST(__df_ts(x) AS TIMESTAMP_NS) END`,
  `CREATE OR REPLACE MACRO from_unixtime(x) AS make_timestamp(CAST(x AS BIGINT) * 1000000)`,
  `CREATE OR REPLACE MACRO to_unixtime(x) AS CASE WHEN ${isNumber('x')}
     THEN CAST(try_cast(x AS DOUBLE) AS BIGINT) ELSE CAST(floor(epoch(__df_ts(x))) AS BIGINT) END`,
  `CREATE OR REPLACE MACRO to_date(x) AS CASE WHEN ${isNumber('x')}
     THEN CAST(DATE '1970-01-01' + CAST(try_cast(x AS DOUBLE) AS INTEGER) AS DATE) ELSE CAST(__df_ts(x) AS DATE) END,
     (x, fmt) AS CAST(strptime(CAST(x AS VARCHAR), fmt) AS DATE)`,
  // DataFusion formats with chrono's strftime-like specifiers, which DuckDB's strftime shares.
  `CREATE OR REPLACE MACRO to_char(x, fmt) AS strftime(x, fmt)`,
  `CREATE OR REPLACE MACRO date_format(x, fmt) AS strftime(x, fmt)`,

  // Approximate aggregates.
  `CREATE OR REPLACE MACRO approx_percentile_cont(x, p) AS approx_quantile(x, p),
     (x, p, centroids) AS approx_quantile(x, p)`,
  `CREATE OR REPLACE MACRO approx_median(x) AS approx_quantile(x, 0.5)`,
  `CREATE OR REPLACE MACRO approx_distinct(x) AS approx_count_distinct(x)`,

  // Regular expressions (RE2 in both engines). DuckDB wants constant option strings, so flags go
  // into the pattern as RE2's inline flags ('c', case-sensitive, is the default and dropped).
  `CREATE OR REPLACE MACRO __df_flagged(p, flags) AS CASE WHEN coalesce(replace(flags, 'c', ''), '') = '' THEN p
     ELSE '(?' || replace(flags, 'c', '') || ')' || p END`,
  `CREATE OR REPLACE MACRO regexp_like(s, p) AS regexp_matches(s, p), (s, p, flags) AS regexp_matches(s, __df_flagged(p, flags))`,
  `CREATE OR REPLACE MACRO regexp_count(s, p) AS len(regexp_extract_all(s, p)),
     (s, p, start) AS len(regexp_extract_all(substr(s, start), p)),
     (s, p, start, flags) AS len(regexp_extract_all(substr(s, start), __df_flagged(p, flags)))`,

  // Types, nulls, strings, lists, numbers.
  `CREATE OR REPLACE MACRO arrow_typeof(x) AS CASE typeof(x)
     ${ARROW_TYPE_NAMES.map(([duck, arrow]) => `WHEN ${q(duck)} THEN ${q(arrow)}`).join('\n     ')}
     ELSE regexp_replace(typeof(x), '^DECIMAL\\((\\d+),(\\d+)\\)$', 'Decimal128(\\1, \\2)') END`,
  `CREATE OR REPLACE MACRO nvl(a, b) AS coalesce(a, b)`,
  `CREATE OR REPLACE MACRO nvl2(a, b, c) AS CASE WHEN a IS NOT NULL THEN b ELSE c END`,
  `CREATE OR REPLACE MACRO btrim(s) AS trim(s), (s, chars) AS trim(s, chars)`,
  `CREATE OR REPLACE MACRO find_in_set(s, list) AS CASE WHEN s IS NULL OR list IS NULL THEN NULL
     ELSE coalesce(list_position(string_split(list, ','), s), 0) END`,
  `CREATE OR REPLACE MACRO array_element(l, i) AS list_extract(l, i)`,
  `CREATE OR REPLACE MACRO signum(x) AS CAST(sign(x) AS DOUBLE)`,
  `CREATE OR REPLACE MACRO nanvl(x, y) AS CASE WHEN isnan(x) THEN y ELSE x END`,
  `CREATE OR REPLACE MACRO iszero(x) AS x = 0`,
];

/** The DataFusion function names DIALECT_SQL provides (helpers excluded), for docs/query.md and tests. */
export const DIALECT_FUNCTIONS: string[] = DIALECT_SQL.map((s) => /MACRO\s+(\w+)/.exec(s)![1]).filter((n) => !n.startsWith('__df_'));

/** The one DuckDB builtin a macro replaces (see the rules above). */
export const SHADOWED_BUILTINS = ['to_timestamp'];
