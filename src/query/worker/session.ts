/**
 * How a query worker calls DuckDB for an SQL job with as few native calls as it can: every call is a
 * hop through libuv's thread pool and back to the event loop, 0.3–1 ms each at the worker's nice level
 * on a loaded machine — a good part of a small query's time (docs/performance.md, small SQL).
 */
import type { DuckDBConnection, DuckDBMaterializedResult, DuckDBResult } from '@duckdb/node-api';
import { RANGE_VARIABLES, type RunJob } from './protocol.ts';

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
    const statements = rangeStatements(range, this.current);
    if (!statements || !range) return (await conn.run(sql)) as DuckDBMaterializedResult;
    this.current = undefined;
    try {
      const result = (await conn.run(statements + sql)) as DuckDBMaterializedResult;
      this.current = rangeKey(range);
      return result;
    } catch (err) {
      if (!CONTEXT_ERROR.test((err as Error).message)) throw err;
      await this.set(conn, range);
      return (await conn.run(sql)) as DuckDBMaterializedResult;
    }
  }
}

/**
 * A statement streamed out of DuckDB, prepared directly: the sandbox lets exactly one statement through,
 * and `conn.stream` would first split the text into statements in a native call of its own.
 */
export async function streamOne(conn: DuckDBConnection, sql: string): Promise<DuckDBResult> {
  const prepared = await conn.prepare(sql);
  try {
    return await prepared.stream();
  } finally {
    prepared.destroySync();
  }
}
