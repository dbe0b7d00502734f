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
export type FlatRow = Record<string, FlatValue>;

/**
 * What every ingestion format (JSON, OTLP, Prometheus) hands to the storage layer: flat rows, plus the
 * types of the columns the format defines itself. Columns not in `knownTypes` are inferred from values.
 */
export interface RowBatch {
  rows: FlatRow[];
  knownTypes: Record<string, ColumnType>;
}
