/**
 * Column types a dataset can hold. Parquet files carry the same types; the query layer casts every
 * file to the dataset's current type so files written before a widening still read correctly.
 */
export type ColumnType =
  | 'VARCHAR'
  | 'BIGINT'
  | 'DOUBLE'
  | 'BOOLEAN'
  | 'TIMESTAMP'
  | 'TIMESTAMP_NS'
  | 'BIGINT[]'
  | 'DOUBLE[]'
  | 'VARCHAR[]';

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
