/**
 * How a query worker calls DuckDB for an SQL job with as few native calls as it can: every call is a
 * hop through libuv's thread pool and back to the event loop, 0.3–1 ms each at the worker's nice level
 * on a loaded machine — a good part of a small query's time (docs/performance.md, small SQL).
 */
import { quotedString, type DuckDBConnection, type DuckDBMaterializedResult, type DuckDBResult } from '@duckdb/node-api';
import { RANGE_VARIABLES, type RunJob } from './protocol.ts';
import { withPrepared, type BoundParam } from '../sql/boundParams.ts';

/** The statements setting a range as the variables views read; '' when `current` (its key) holds it already. */
export function rangeStatements(range: RunJob['range'], current: string | undefined): string {
  if (!range || rangeKey(range) === current) return '';
  return `SET VARIABLE ${RANGE_VARIABLES.start} = ${range.start}; SET VARIABLE ${RANGE_VARIABLES.end} = ${range.end}; `;
}

const rangeKey = (range: NonNullable<RunJob['range']>) => `${range.start} ${range.end}`;

/** Errors DuckDB reports with the statement's `LINE n: … ^` context only when the statement runs alone. */
const CONTEXT_ERROR = /^(Binder|Catalog) Error/;

/** A connection's range variables (RunJob.range): what they hold, and the statements run with them. */
export class RangeSession {
  /** The range the variables hold now (rangeKey), undefined when unknown (a call that set them failed). */
  private current: string | undefined;

  /** Sets the range in a call of its own (skipped when unchanged): needed before a view is created, which binds it. */
  async set(conn: DuckDBConnection, range: RunJob['range']): Promise<void> {
    const statements = rangeStatements(range, this.current);
    if (!statements || !range) return;
    this.current = undefined;
    await conn.run(statements);
    this.current = rangeKey(range);
  }

  /**
   * Runs a statement whole, in the same native call as setting its range when that is due (DuckDB runs
   * the statements of one text in order and answers with the last one's result). A bind error in that
   * call comes without the statement's line context: the statement then runs again alone (after the
   * range on its own), so the client gets the message the statement gives by itself. Other errors are
   * the same either way and are not run twice.
   */
  async runWhole(conn: DuckDBConnection, sql: string, range: RunJob['range']): Promise<DuckDBMaterializedResult> {
    const withRange = rangeStatements(range, this.current) !== '';
    try {
      return await this.runWithRange(conn, sql, range);
    } catch (err) {
      if (!withRange || !CONTEXT_ERROR.test((err as Error).message)) throw err;
      await this.set(conn, range);
      return (await conn.run(sql)) as DuckDBMaterializedResult;
    }
  }

  /** `runWhole` without a second try: undefined when the call fails (the range is then unknown, set again later). */
  async runQuiet(conn: DuckDBConnection, sql: string, range: RunJob['range']): Promise<DuckDBMaterializedResult | undefined> {
    try {
      return await this.runWithRange(conn, sql, range);
    } catch {
      return undefined;
    }
  }

  /** One native call: the range's statements when due, then `sql`; the range is unknown if it fails. */
  private async runWithRange(conn: DuckDBConnection, sql: string, range: RunJob['range']): Promise<DuckDBMaterializedResult> {
    const statements = rangeStatements(range, this.current);
    if (!statements || !range) return (await conn.run(sql)) as DuckDBMaterializedResult;
    this.current = undefined;
    const result = (await conn.run(statements + sql)) as DuckDBMaterializedResult;
    this.current = rangeKey(range);
    return result;
  }
}

/**
 * The statement with at most `limit` + 1 rows (one more than may be answered whole, so that more is
 * seen). The newline ends a trailing `--` comment of the statement, and a statement's closing `;` (a
 * text cannot end inside a literal) goes; DuckDB keeps a subquery's ORDER BY through the outer LIMIT.
 * A text that is not one SELECT fails here and takes the streamed path.
 */
export function boundedSql(sql: string, limit: number): string {
  // A loop, not a regular expression: /[\s;]+$/ is quadratic on a long run of spaces inside the text.
  let end = sql.length;
  while (end > 0 && (sql[end - 1] === ';' || /\s/.test(sql[end - 1]))) end--;
  return `SELECT * FROM (${sql.slice(0, end)}\n) AS p_bounded LIMIT ${limit + 1}`;
}

/**
 * Whether DuckDB renamed a column of the bounded statement: a subquery's duplicate names become
 * `name_1`, `name_2`, … (case-insensitively), which the statement alone answers as they are.
 */
export function renamedColumns(names: readonly string[]): boolean {
  const lower = new Set(names.map((n) => n.toLowerCase()));
  return names.some((n) => {
    const m = /^(.*)_\d+$/s.exec(n);
    return m !== null && lower.has(m[1].toLowerCase());
  });
}

/**
 * A statement the parse tree does not bound, run whole when it turns out small: `boundedSql` in one
 * native call (with the range, as `RangeSession.runWhole`), undefined — take the streamed path — when
 * it has more than `limit` rows, DuckDB renamed a column, or it failed (the streamed path then gives
 * the statement's own error). Its result is held outside DuckDB's memory limit, as a bounded
 * statement's is, so `limit` is the same bound. The range variables are left right either way.
 */
export async function runBounded(session: RangeSession, conn: DuckDBConnection, sql: string, range: RunJob['range'], limit: number): Promise<DuckDBMaterializedResult | undefined> {
  const result = await session.runQuiet(conn, boundedSql(sql, limit), range);
  if (!result || result.rowCount > limit || renamedColumns(result.columnNames())) return undefined;
  return result;
}

/**
 * A statement streamed out of DuckDB, prepared directly: the sandbox lets exactly one statement through,
 * and `conn.stream` would first split the text into statements in a native call of its own.
 */
export async function streamOne(conn: DuckDBConnection, sql: string, params?: readonly BoundParam[]): Promise<DuckDBResult> {
  return withPrepared(conn, sql, params, (prepared) => prepared.stream());
}

/**
 * A statement with bound parameters (a PostgreSQL Bind) run whole: the range in a call of its own (a
 * prepared statement is one statement), then the statement prepared once and run with the values.
 */
export async function runWholeBound(session: RangeSession, conn: DuckDBConnection, sql: string, range: RunJob['range'], params: readonly BoundParam[]): Promise<DuckDBMaterializedResult> {
  await session.set(conn, range);
  return withPrepared(conn, sql, params, (prepared) => prepared.run());
}

/**
 * The error DuckDB gives reading a stored file whole (every column decoded), or undefined when it
 * reads: how a worker tells a damaged file from a query's own error (SQL's damaged files, PromQL's
 * unreadable files of a grant).
 */
export async function readWholeError(conn: DuckDBConnection, file: string): Promise<Error | undefined> {
  try {
    await conn.run(`SELECT bit_xor(hash(COLUMNS(*))) FROM read_parquet(${quotedString(file)})`);
    return undefined;
  } catch (err) {
    return err as Error;
  }
}
