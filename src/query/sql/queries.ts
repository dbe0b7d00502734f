import type { DomainError } from '../../errors.ts';
import type { Snapshot } from '../../storage/scan.ts';
import type { PgType } from '../results/pgTypes.ts';
import type { TimeFormat } from '../worker/protocol.ts';
import type { CatalogQueries } from '../catalog/client.ts';
import type { TimeRange } from './timeRange.ts';
import type { SandboxLimits } from './sandbox.ts';
import type { BoundParam } from './boundParams.ts';

/*
 * What the SQL query service offers its doors (the HTTP door, PostgreSQL, Jaeger and Tempo through
 * query/traces): executor.ts implements it, fake.ts is its fake for the doors' tests.
 */

export interface QueryLimits extends SandboxLimits {
  timeoutMs: number;
  maxRows: number;
  maxBytes: number;
  /** Estimated bytes of small files' rows each query worker may keep in tables (fileTable.ts); 0: none. */
  fileTableBytes?: number;
}

export interface QueryRequest {
  sql: string;
  startMs: number;
  endMs: number;
  sendNull: boolean;
  timeFormat: TimeFormat;
  streaming: boolean;
  /** Who asks (admission control counts per key). */
  principalId: string;
  /** May this caller read the dataset? Decided by name alone, so the answer never reveals existence. */
  canRead: (dataset: string) => boolean;
  /** Aborted when the client goes away. */
  signal?: AbortSignal;
  /** Only the data files this keeps are read (an index said the others hold no matching row; WAL is always read). */
  files?: (file: Snapshot['files'][number]) => boolean;
  /** Values of `sql`'s `$n` placeholders (a PostgreSQL Bind): DuckDB binds them, `sql` is not re-parsed. */
  params?: BoundParam[];
}

/** A query under way: its columns, then its rows as JSON text chunks (objects joined by commas). */
export interface QueryAnswer {
  fields: string[];
  /** Throws a DomainError if the query fails or is cut off after the columns were known. */
  chunks: AsyncIterable<string>;
}

/**
 * What the HTTP door calls of the SQL executor: the seam its in-process tests replace with
 * RecordingQueries (src/query/sql/fake.ts, beside it so that a changed signature breaks the fake).
 */
export interface SqlQueries {
  execute(req: QueryRequest): Promise<QueryAnswer>;
}

/**
 * What the PostgreSQL door's session calls of the SQL executor and its catalog: the seam its in-process
 * tests replace with RecordingPgQueries (src/query/sql/fake.ts).
 */
export interface PgQueries {
  plan(sql: string): Promise<unknown>;
  timeRange(sql: string, params?: readonly BoundParam[]): Promise<TimeRange>;
  executePg(req: Omit<QueryRequest, 'sendNull' | 'timeFormat' | 'streaming'>, formats: number[]): Promise<PgAnswer>;
  readonly catalog: Pick<CatalogQueries, 'classify' | 'describe' | 'run'>;
}

/** A query under way for the PostgreSQL front door: column names and types, then DataRow batches. */
export interface PgAnswer {
  fields: string[];
  types: PgType[];
  /** Throws a DomainError if the query fails or is cut off (time limit, cancel). */
  batches: AsyncIterable<{ data: Buffer; rows: number }>;
  /** Stops the query's worker (a CancelRequest). */
  cancel: (reason: DomainError) => void;
}
