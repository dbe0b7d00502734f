import { DomainError } from '../../errors.ts';
import type { PgType } from '../../query/results/pgTypes.ts';
import type { Statement } from '../../query/catalog/catalogDb.ts';
import type { BoundParam } from '../../query/sql/boundParams.ts';
import { replacePlaceholders } from '../../query/catalog/sqlText.ts';
import { msg } from './messages.ts';
import { parameterLiteral } from './params.ts';

/*
 * What a PostgreSQL session keeps of the extended query protocol (sessionQueries.ts): prepared
 * statements, portals and the cursors they read, with the helpers that make or describe them.
 */

/** Rows of an answer under way: DataRow batches, pulled one at a time (the worker waits meanwhile). */
export interface Cursor {
  /** Columns, or undefined for a statement that returns no rows (NoData). */
  fields?: { name: string; type: PgType; format: number }[];
  next: () => Promise<{ data: Buffer; rows: number } | undefined>;
  tag: (rows: number) => string;
  close: () => void;
  /** Stops the statement's work (a CancelRequest); the pending next() then throws. */
  cancel?: (reason: DomainError) => void;
}

export interface Prepared {
  sql: string;
  /** What it counts against the session's and key's state bounds. */
  bytes: number;
  paramTypes: number[];
  /** Parameters a Bind supplies (the highest `$n`, or more declared). */
  params: number;
  /**
   * A statement with a gap in its placeholders, renumbered (`sql` is then the renumbered text): the
   * Bind's parameter each placeholder takes, in order (params.ts withoutGaps).
   */
  positions?: number[];
  /** The statement classified (and rewritten) once, with its placeholders; each Bind fills them in. */
  classified?: Statement;
}

export interface Portal {
  statement: Statement;
  /** A data or catalog statement's parameter values, bound by DuckDB to its placeholders (not written into its text). */
  params?: BoundParam[];
  bytes: number;
  formats: number[];
  cursor?: Cursor;
  /** Rows fetched but not yet sent (a row limit cut a batch). */
  pending?: Buffer;
  pendingRows: number;
  sent: number;
}

/** A cursor over a catalog statement's answer, run whole on a query worker (cancellable meanwhile). */
export async function catalogCursor(run: () => Promise<{ fields: Cursor['fields']; data: Buffer; rows: number }>): Promise<Cursor> {
  const answer = await run();
  let rest: { data: Buffer; rows: number } | undefined = answer.rows ? { data: answer.data, rows: answer.rows } : undefined;
  return {
    fields: answer.fields,
    next: async () => {
      const out = rest;
      rest = undefined;
      return out;
    },
    tag: (n) => `SELECT ${n}`,
    close: () => undefined,
  };
}

/**
 * A session command's text with each `$n` replaced by its value's literal: the door reads session
 * commands itself (sessionCommands.ts), no parser sees them, and nothing can bind a value there.
 */
export function withLiterals(prepared: Prepared, values: (Buffer | null)[], format: (i: number) => number): string {
  return replacePlaceholders(prepared.sql, (n) => {
    const i = (prepared.positions?.[n - 1] ?? n) - 1;
    if (i < 0 || i >= values.length) throw new DomainError('invalid', `there is no parameter $${n}`);
    return parameterLiteral(values[i], format(i), prepared.paramTypes[i] ?? 0);
  });
}

export function rowDescription(fields: { name: string; type: PgType; format: number }[]): Buffer {
  return msg.rowDescription(fields.map((f) => ({ name: f.name, oid: f.type.oid, size: f.type.size, format: f.format })));
}
