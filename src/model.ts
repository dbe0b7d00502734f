/**
 * The service's vocabulary, declared once: the column types a dataset can hold, the rows every ingest
 * format produces, and the kinds of dataset with their time columns. A leaf: every layer uses it, it
 * uses nothing.
 */

/**
 * Column types a dataset can hold. Parquet files carry the same types; a query casts every file to the
 * dataset's current type, so files written before a widening still read correctly.
 */
export const COLUMN_TYPES = ['VARCHAR', 'BIGINT', 'DOUBLE', 'BOOLEAN', 'TIMESTAMP', 'TIMESTAMP_NS', 'BIGINT[]', 'DOUBLE[]', 'VARCHAR[]'] as const;
export type ColumnType = (typeof COLUMN_TYPES)[number];

/** One stored cell. Timestamps travel as ISO-8601 UTC strings ('Z'); lists as JS arrays. */
export type FlatValue = string | number | boolean | null | number[] | string[];

/**
 * Fields of a row that cannot have a column of their own (a duplicate name, a client field named like
 * a service column) ride on the row under this symbol until the ingest worker writes them into the
 * `p_overflow` column. A symbol is invisible to `for…in` and JSON.stringify, so rows without it pay
 * nothing.
 */
export const OVERFLOW = Symbol('overflow');
export type OverflowEntry = [name: string, value: unknown];

export type FlatRow = Record<string, FlatValue> & { [OVERFLOW]?: OverflowEntry[] };

/**
 * What every ingestion format (JSON, OTLP, Prometheus) hands to the storage layer: flat rows, plus the
 * types of the columns the format defines itself. Columns not in `knownTypes` are inferred from values.
 */
export interface RowBatch {
  rows: FlatRow[];
  knownTypes: Record<string, ColumnType>;
}

/**
 * The earliest and latest time (epoch ms) of a batch's rows in their dataset's time column, when the
 * ingest side knows it (a JSON dataset's time field): a flush of rows within a few minutes writes them
 * straight from the WAL (src/storage/files/flush.ts).
 */
export interface TimeRange {
  minMs: number;
  maxMs: number;
}

/** What a dataset holds; it keeps the kind it was created with (OTLP signals do not mix). */
export const DATASET_KINDS = ['json', 'otel-logs', 'otel-traces', 'otel-metrics'] as const;
export type DatasetKind = (typeof DATASET_KINDS)[number];

/**
 * Each kind's time column: the one that partitions its files and that a query's time range selects on.
 * JSON events by receive time; OTel records (and Prometheus samples, stored as OTel metric data points)
 * by their own time.
 */
export const TIME_COLUMN: Record<DatasetKind, string> = {
  json: 'p_timestamp',
  'otel-logs': 'time_unix_nano',
  'otel-traces': 'span_start_time_unix_nano',
  'otel-metrics': 'time_unix_nano',
};

/** Per column, the distinct types a batch brings, in the order they first appear. */
export type TypeSummary = Map<string, ColumnType[]>;

export function inferType(value: FlatValue): ColumnType | undefined {
  switch (typeof value) {
    case 'string':
      return 'VARCHAR';
    case 'boolean':
      return 'BOOLEAN';
    case 'number':
      return Number.isSafeInteger(value) ? 'BIGINT' : 'DOUBLE';
    default:
      if (Array.isArray(value)) return value.every((v) => typeof v === 'number') ? 'DOUBLE[]' : 'VARCHAR[]';
      return undefined;
  }
}
