import type { ErrorKind } from '../errors.ts';
import type { PgType } from './pgRows.ts';

/**
 * Messages between the service and a query worker process (over the child-process IPC channel).
 * Both ends are this code base, so these are plain types rather than validated schemas.
 */

/** Result timestamps: ISO 8601 with `Z`, or Parseable's zone-less UTC layout (`2026-11-23T02:09:37.979`). */
export type TimeFormat = 'iso' | 'naive';

export interface RunJob {
  type: 'run';
  id: number;
  /** Hard links to create in the worker's file directory: the only files its DuckDB can open. */
  links: { src: string; name: string }[];
  /** Temporary views, one per dataset, created on the query's own connection. */
  views: { name: string; sql: string }[];
  sql: string;
  sendNull: boolean;
  timeFormat: TimeFormat;
  /** Buffered answers stop with `too_large` past these; streamed answers are not limited. */
  maxRows: number;
  maxBytes: number;
  streaming: boolean;
  /** Run the statement whole in one call (only for results the parse tree bounds; see worker.ts). */
  materialize: boolean;
  /**
   * Rows as PostgreSQL DataRow messages (the PostgreSQL front door) instead of JSON: the format code of
   * each result column, as the client's Bind gave them. Always streamed.
   */
  pgFormats?: number[];
}

export type ToWorker = RunJob | { type: 'ack'; id: number };

export type FromWorker =
  | { type: 'ready' }
  | { type: 'fields'; id: number; fields: string[]; types: string[]; pgTypes?: PgType[] }
  /**
   * A whole buffered (not streamed) answer: the columns and every row, in place of fields, chunks and
   * done. For jobs with `pgFormats`, the rows are DataRow messages in `data` (and `text` is empty).
   */
  | { type: 'answer'; id: number; fields: string[]; types: string[]; text: string; rows: number; pgTypes?: PgType[]; data?: Uint8Array }
  /** Rows of one DuckDB chunk as JSON objects joined by commas (no brackets). */
  | { type: 'chunk'; id: number; text: string; rows: number }
  /** Rows of one DuckDB chunk as PostgreSQL DataRow messages (jobs with `pgFormats`). */
  | { type: 'rows'; id: number; data: Uint8Array; rows: number }
  | { type: 'done'; id: number; rows: number }
  /**
   * `damaged`: link names of Parquet files DuckDB could not decode (a checksum, decompression or
   * metadata error naming the file, or found by reading each file after an error that named none).
   */
  | { type: 'error'; id: number; kind: ErrorKind; message: string; damaged?: { name: string; reason: string }[] };

/** Chunks a streaming worker may send ahead of the HTTP response before it waits for an ack. */
export const STREAM_WINDOW = 4;
