import type { DomainError } from '../../errors.ts';
import type { QueryAnswer, QueryRequest, SqlQueries } from './executor.ts';

/** What the next query answers: columns and rows (JSON objects), an error before the columns, or one after `failAfter` rows. */
export interface QueryScript {
  fields?: string[];
  rows?: Record<string, unknown>[];
  throws?: DomainError;
  /** Rows sent before the answer fails with `throws` (as a time limit cuts a query off mid-stream). */
  failAfter?: number;
}

/**
 * A fake of the SQL executor for in-process door tests (test/README.md "Where a test goes"): records
 * each request and answers the scripted columns and rows, one chunk per row, in the executor's chunk
 * format (JSON objects joined by commas).
 */
export class RecordingQueries implements SqlQueries {
  readonly calls: QueryRequest[] = [];
  script: QueryScript = {};

  async execute(req: QueryRequest): Promise<QueryAnswer> {
    this.calls.push(req);
    const { fields = [], rows = [], throws, failAfter } = this.script;
    if (throws && failAfter === undefined) throw throws;
    async function* chunks(): AsyncIterable<string> {
      for (const [i, row] of rows.entries()) {
        if (throws && i === failAfter) throw throws;
        yield JSON.stringify(row);
      }
      if (throws) throw throws;
    }
    return { fields, chunks: chunks() };
  }
}
