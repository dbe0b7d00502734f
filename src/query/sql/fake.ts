import { DomainError } from '../../errors.ts';
import type { CatalogAnswer, CatalogRequest, Described } from '../catalog/client.ts';
import type { Statement } from '../catalog/catalogDb.ts';
import { RowWriter } from '../results/pg.ts';
import { PG, type PgType } from '../results/pgTypes.ts';
import type { PgAnswer, PgQueries, QueryAnswer, QueryRequest, SqlQueries } from './queries.ts';
import { WHOLE_RANGE, type TimeRange } from './timeRange.ts';
import type { BoundParam } from './boundParams.ts';

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

/** What the next PostgreSQL statement answers (RecordingPgQueries). */
export interface PgScript {
  /** How the catalog classifies every statement (`data` unless set). */
  kind?: Statement['kind'];
  fields?: string[];
  /** Each column's type (text unless set; a text value's binary format is its text, so rows serve both formats). */
  types?: PgType[];
  /** Rows as text values, `null` for SQL NULL. */
  rows?: (string | null)[][];
  /** An error before the columns, or after `failAfter` rows. */
  throws?: DomainError;
  failAfter?: number;
  /** The statement runs until it is aborted (a CancelRequest, the client leaving), then fails as cancelled. */
  hang?: boolean;
}

/** One call as RecordingPgQueries received it. */
export interface RecordedPg {
  op: 'classify' | 'describe' | 'run' | 'plan' | 'timeRange' | 'executePg';
  sql: string;
  formats?: number[];
  principalId?: string;
  canRead?: (dataset: string) => boolean;
  signal?: AbortSignal;
  /** Values bound to the statement's placeholders (a PostgreSQL Bind of a data statement). */
  params?: readonly BoundParam[];
}

/** DataRow messages of text values, as the query worker sends them. */
function dataRows(rows: (string | null)[][]): Buffer {
  const w = new RowWriter(256);
  for (const row of rows) {
    w.byte(0x44); // 'D'
    const at = w.hole();
    w.int16(row.length);
    for (const v of row) {
      if (v === null) w.int32(-1);
      else w.lenString(v);
    }
    w.fill(at, w.pos - at);
  }
  return w.take();
}

/**
 * A fake of the SQL executor and its catalog as the PostgreSQL session uses them, for in-process door
 * tests (test/README.md "Where a test goes"): records each call and answers the scripted columns and
 * rows, one DataRow batch per row, as the query worker does. It does not parse: a statement is what
 * the script says it is.
 */
export class RecordingPgQueries implements PgQueries {
  readonly calls: RecordedPg[] = [];
  script: PgScript = {};
  readonly catalog = {
    classify: async (req: CatalogRequest, sql: string): Promise<Statement> => {
      this.calls.push({ op: 'classify', sql, principalId: req.principalId });
      return { kind: this.script.kind ?? 'data', sql };
    },
    describe: async (req: CatalogRequest, sql: string): Promise<Described> => {
      this.calls.push({ op: 'describe', sql, principalId: req.principalId });
      return { params: [], paramTypes: [], columns: this.columns() };
    },
    run: async (req: CatalogRequest, sql: string, formats: number[]): Promise<CatalogAnswer> => {
      this.calls.push({ op: 'run', sql, formats, principalId: req.principalId, signal: req.signal });
      await this.maybeHang(req.signal);
      if (this.script.throws) throw this.script.throws;
      const rows = this.script.rows ?? [];
      return { fields: this.columns().map((c) => ({ ...c, format: 0 })), data: dataRows(rows), rows: rows.length };
    },
  };

  async plan(sql: string): Promise<unknown> {
    this.calls.push({ op: 'plan', sql });
    return {};
  }

  async timeRange(sql: string, params?: readonly BoundParam[]): Promise<TimeRange> {
    this.calls.push({ op: 'timeRange', sql, ...(params ? { params } : {}) });
    return WHOLE_RANGE;
  }

  async executePg(req: Omit<QueryRequest, 'sendNull' | 'timeFormat' | 'streaming'>, formats: number[]): Promise<PgAnswer> {
    this.calls.push({ op: 'executePg', sql: req.sql, formats, principalId: req.principalId, canRead: req.canRead, signal: req.signal, ...(req.params ? { params: req.params } : {}) });
    await this.maybeHang(req.signal);
    const { rows = [], throws, failAfter } = this.script;
    if (throws && failAfter === undefined) throw throws;
    const columns = this.columns();
    let cancelled: DomainError | undefined;
    async function* batches() {
      for (const [i, row] of rows.entries()) {
        if (cancelled) throw cancelled;
        if (throws && i === failAfter) throw throws;
        yield { data: dataRows([row]), rows: 1 };
      }
      if (throws) throw throws;
    }
    return { fields: columns.map((c) => c.name), types: columns.map((c) => c.type), batches: batches(), cancel: (reason) => (cancelled = reason) };
  }

  /** The calls of one kind, in order. */
  of(op: RecordedPg['op']): RecordedPg[] {
    return this.calls.filter((c) => c.op === op);
  }

  private columns(): { name: string; type: PgType }[] {
    const { fields = [], types = [] } = this.script;
    return fields.map((name, i) => ({ name, type: types[i] ?? PG.text }));
  }

  private async maybeHang(signal: AbortSignal | undefined): Promise<void> {
    if (!this.script.hang) return;
    await new Promise<void>((_, reject) => {
      const stop = () => reject(new DomainError('cancelled', 'the statement was aborted'));
      if (signal?.aborted) stop();
      signal?.addEventListener('abort', stop, { once: true });
    });
  }
}
