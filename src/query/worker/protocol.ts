import type { ErrorKind } from '../../errors.ts';
import type { PgType } from '../results/pgTypes.ts';
import type { ParseSite } from '../sql/parseTree.ts';
import type { BoundParam } from '../sql/boundParams.ts';

/**
 * Messages between the service and a query worker process (over the child-process IPC channel).
 * Both ends are this code base, so these are plain types rather than validated schemas.
 */

/** Result timestamps: ISO 8601 with `Z`, or Parseable's zone-less UTC layout (`2026-11-23T02:09:37.979`). */
export type TimeFormat = 'iso' | 'naive';

/** The session variables holding a run job's range (TIMESTAMP values), as views read them. */
export const RANGE_VARIABLES = { start: 'p_range_start', end: 'p_range_end' } as const;

export interface RunJob {
  type: 'run';
  id: number;
  /** Hard links to create in the worker's file directory: the only files its DuckDB can open. */
  links: { src: string; name: string }[];
  /** Temporary views, one per dataset, created on the query's own connection. */
  views: { name: string; sql: string }[];
  /**
   * The request's time range as TIMESTAMP literals, for views that name it by RANGE_VARIABLES: set as the
   * connection's variables before the statement, so a view is kept across ranges over the same files.
   */
  range?: { start: string; end: string };
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
   * A buffered statement the parse tree does not bound: run whole when it has at most this many rows
   * (session.ts runBounded), else streamed. Unset: streamed.
   */
  wholeUpTo?: number;
  /**
   * Rows as PostgreSQL DataRow messages (the PostgreSQL front door) instead of JSON: the format code of
   * each result column, as the client's Bind gave them. Always streamed.
   */
  pgFormats?: number[];
  /** Values of the statement's `$n` placeholders (a PostgreSQL Bind), bound by DuckDB when it runs. */
  params?: BoundParam[];
  /**
   * Tables the views read small files' rows from (fileTables.ts in the worker): made to hold these
   * files' rows before the views are created. `budget`: the estimated bytes the worker may hold in them.
   */
  fileTables?: { budget: number; tables: FileTableSpec[] };
}

/** A file table (storage/scan.ts `FileTable`): its columns and their estimated fixed bytes, and each file's id, estimated bytes and rows' SELECT. */
export interface FileTableSpec {
  name: string;
  columns: string;
  bytes: number;
  files: { id: number; bytes: number; sql: string }[];
}

/**
 * A PromQL request (query, query_range, series, labels, label values) for the engine in the worker
 * (promql.ts). It starts with no files: the engine asks for the time range it needs (`need`) and the
 * service answers with a snapshot of the dataset (`grant`), held until the job ends.
 */
export interface PromqlJob {
  type: 'promql';
  id: number;
  /** The request for the Go side, as JSON (see promql/main.go `request`). */
  request: string;
}

/**
 * Files and view of the dataset a PromQL job reads, covering [minMs, maxMs]; `labels` maps label names to
 * columns. As the worker holds it; sent as a PromqlGrantMessage.
 */
export interface PromqlGrant {
  type: 'grant';
  id: number;
  /** The dataset the links are files of (a worker keeps other held sets' links only for the same dataset: linkDir.ts). */
  dataset: string;
  links: { src: string; name: string }[];
  views: { name: string; sql: string }[];
  labels: { label: string; column: string }[];
  /** The dataset's time column, and whether it has the staleness flag column. */
  timeColumn: string;
  stale: boolean;
  /** The native histogram columns the dataset has (none: no histogram was ever stored). */
  histogramColumns: string[];
  /** The dataset has the float value column (false: it only ever got native histograms). */
  hasValue?: boolean;
  minMs: number;
  maxMs: number;
  /**
   * The view (under the same name) is the dataset's series relation, not its rows: the data view's
   * series index columns, same names and types (storage's seriesIndexColumns), one row per tuple and
   * file, with `p_min_time`/`p_max_time` (its first and last time there) and `p_rows`.
   */
  labelsOnly?: boolean;
  /**
   * Files read through the worker's sample cache (src/query/promql/sampleCache.ts) rather than the view,
   * each by a SELECT of its whole content (label sets only: its series relation) with its path as
   * PATH_PLACEHOLDER, grouped by that SQL, with each file's rows (its decode batches are bounded by
   * them); `cacheBytes`: the cache's budget.
   */
  cached?: { sql: string; paths: string[]; rows?: number[] }[];
  cacheBytes?: number;
}

/**
 * A PostgreSQL catalog statement (catalog.ts): classified, described or run in the worker's catalog
 * database, which holds empty tables of exactly `datasets` (those the key may read) while it runs.
 * Answered by one `catalog` message (`run`: an `answer` with DataRows, bounded by `maxRows`).
 */
export interface CatalogJob {
  type: 'catalog';
  id: number;
  op: 'classify' | 'describe' | 'run';
  datasets: { name: string; schema: Record<string, string> }[];
  sql: string;
  /**
   * The service's parse tree of `sql` (json_serialize_sql; for `classify`, of its pgSyntax text): the
   * worker checks, classifies and rewrites from it rather than parse the statement again (issue 35).
   */
  tree?: string;
  /** For `run`: a catalog statement a classification returned as checked (catalogDb.ts `Statement`). */
  checked?: boolean;
  /** For `run`: the result format code of each column. */
  pgFormats?: number[];
  /** For `run`: a Bind's values, bound by DuckDB to the statement's placeholders (issue 35: not spliced in as text). */
  params?: BoundParam[];
  maxRows: number;
  maxDepth: number;
}

/** Parses a catalog job made in the worker, by site (parseTree.ts), sent back with its answer. */
export type ParseTally = Partial<Record<ParseSite, number>>;

export type WorkerJob = RunJob | PromqlJob | CatalogJob;

/** What of a grant depends only on the snapshot's files and segments (promql/grantSets.ts): sent once per worker. */
export type PromqlFileSet = Pick<PromqlGrant, 'dataset' | 'links' | 'labels' | 'timeColumn' | 'stale' | 'histogramColumns' | 'hasValue' | 'cached' | 'cacheBytes'>;

/**
 * A grant as sent: the range's part (views, minMs, maxMs) and the file-set part, whole (`set`) or, when
 * the worker's `need` said it holds that part (`have`), by its id alone.
 */
export type PromqlGrantMessage = Pick<PromqlGrant, 'type' | 'id' | 'views' | 'minMs' | 'maxMs' | 'labelsOnly'> & { setId: number; set?: PromqlFileSet };

export type ToWorker = WorkerJob | PromqlGrantMessage | { type: 'ack'; id: number };

export type FromWorker =
  | { type: 'ready' }
  | { type: 'fields'; id: number; fields: string[]; types: string[]; pgTypes?: PgType[] }
  /**
   * A whole buffered (not streamed) answer: the columns and every row, in place of fields, chunks and
   * done. For jobs with `pgFormats`, the rows are DataRow messages in `data` (and `text` is empty).
   */
  | { type: 'answer'; id: number; fields: string[]; types: string[]; text: string; rows: number; pgTypes?: PgType[]; data?: Uint8Array; parses?: ParseTally }
  /** Rows of one DuckDB chunk as JSON objects joined by commas (no brackets). */
  | { type: 'chunk'; id: number; text: string; rows: number }
  /** Rows of one DuckDB chunk as PostgreSQL DataRow messages (jobs with `pgFormats`). */
  | { type: 'rows'; id: number; data: Uint8Array; rows: number }
  | { type: 'done'; id: number; rows: number }
  /**
   * `damaged`: link names of Parquet files DuckDB could not decode (a checksum, decompression or
   * metadata error naming the file, or found by reading each file after an error that named none).
   */
  | { type: 'error'; id: number; kind: ErrorKind; message: string; damaged?: { name: string; reason: string }[]; parses?: ParseTally }
  /**
   * A PromQL job needs the dataset's rows in [minMs, maxMs] (answered by a `grant`); `labelsOnly`: only
   * its label sets (the series relation); `damaged`: link names of series indexes of the last grant
   * that could not be read (their files are read instead); `have`: ids of the grants' file-set parts
   * the worker holds (promql/grantSets.ts), which the service then names by id instead of sending.
   */
  | { type: 'need'; id: number; minMs: number; maxMs: number; labelsOnly?: boolean; damaged?: string[]; have?: number[] }
  /** A catalog job's answer: a classification (`classify`) or a description (`describe`). */
  | { type: 'catalog'; id: number; statement?: { kind: 'session' | 'catalog' | 'data'; sql: string; utcParams?: number[]; checked?: boolean }; described?: { params: string[]; paramTypes: PgType[]; columns: { name: string; type: PgType }[] }; parses?: ParseTally }
  /** A PromQL job's answer: the Prometheus API's JSON body (success or error envelope). */
  | { type: 'promql'; id: number; json: string }
  /** The worker started its PromQL engine, a child process (promqlEngine.ts): counted and killed with it. */
  | { type: 'engine'; pid: number };

/** Chunks a streaming worker may send ahead of the HTTP response before it waits for an ack. */
export const STREAM_WINDOW = 4;
