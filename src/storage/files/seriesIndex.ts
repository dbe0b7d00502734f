import * as fs from 'node:fs/promises';
import type { ColumnType } from '../../model.ts';
import { castProjection, listLiteral, sqlIdent, sqlString, withConnection, type DuckDBSource } from '../../duckdb.ts';
import { log } from '../../log.ts';
import type { FileEntry, Schema } from '../codec.ts';
import type { StorageContext } from '../dataset/dataset.ts';
import { seriesIndexKey } from '../layout.ts';
import { walScanSql } from './parquetWriter.ts';
import { timestampLiteral } from '../scan.ts';
import type { Segment } from '../wal/wal.ts';

/*
 * The series index of a metrics data file: the distinct tuples of the file's index columns (a
 * series' labels, its metric name and what names its type), each with the first and last time it
 * has in the file and its row count. Written beside the data file at flush and compaction, in the same
 * step (uploaded before the manifest that adds the file; see docs/storage.md), so the Prometheus API's
 * series, labels and label values calls read a few rows per series instead of every sample.
 *
 * An index is only ever a shortcut: a file without one (written before indexes existed, or whose index
 * could not be built or read) gives the same tuples computed from the file itself, so an answer never
 * depends on which files have an index.
 */

/** The relation's own columns: never an index column's name, since those exclude `p_*`. */
export const SERIES_MIN_TIME = 'p_min_time';
export const SERIES_MAX_TIME = 'p_max_time';
export const SERIES_ROWS = 'p_rows';

/**
 * Fixed columns of either metrics format (remote write, OTLP) that are not part of what names a series:
 * each sample's own values, and counts of dropped attributes. Every other column but the server's
 * `p_*` ones and time columns is a label (remote write) or an attribute (OTLP, of any scalar or list
 * type) and is indexed.
 */
const NOT_INDEXED = new Set([
  'data_point_value',
  'data_point_count',
  'data_point_sum',
  'data_point_min',
  'data_point_max',
  'data_point_bucket_counts',
  'data_point_flags',
  'data_point_exemplars',
  'data_point_scale',
  'data_point_zero_count',
  'data_point_zero_threshold',
  'data_point_positive_offset',
  'data_point_negative_offset',
  'data_point_positive_bucket_counts',
  'data_point_negative_bucket_counts',
  'data_point_quantile_values',
  'data_point_positive_spans',
  'data_point_negative_spans',
  'data_point_positive_deltas',
  'data_point_negative_deltas',
  'data_point_positive_counts',
  'data_point_negative_counts',
  'data_point_custom_values',
  'data_point_reset_hint',
  'is_stale_marker',
  'resource_dropped_attributes_count',
  'scope_dropped_attributes_count',
]);

/**
 * Non-text columns that name an OTLP series: its kind (monotonic sum or not, temporality) and a
 * histogram's bucket bounds (its `le` labels).
 */
const NAMING_COLUMNS = new Set(['metric_type', 'is_monotonic', 'aggregation_temporality', 'data_point_explicit_bounds']);

/** Whether a dataset has OTLP points: every OTLP data point row has its flags (src/query/promql/otlp.ts). */
const OTLP_MARKER = 'data_point_flags';

/**
 * Per-sample columns of OTLP points that the Prometheus mapping (src/query/promql/otlp.ts) consults to
 * tell which series a point feeds, indexed reduced to just that, so that a series keeps one tuple (two
 * at most) per file: the flags' "no recorded value" bit (and their presence, which tells an OTLP point
 * from a remote-write row), whether a point has a sum (a histogram without one has no `_sum` series),
 * an exponential histogram's scale with every scale ≥ 0 as 0 (the mapping only tests a lower bound
 * below 0), and a summary's quantiles without their values (`[{"quantile":0.5},…]`, its `quantile`
 * labels). Each applies only to a column of the type given (that of src/ingest/otlp/metrics.ts).
 */
const REDUCED: Record<string, { type: string; sql: (c: string) => string }> = {
  data_point_flags: { type: 'BIGINT', sql: (c) => `(${c} & 1)` },
  data_point_sum: { type: 'DOUBLE', sql: (c) => `CASE WHEN ${c} IS NOT NULL THEN 0 END` },
  data_point_scale: { type: 'BIGINT', sql: (c) => `least(${c}, 0)` },
  data_point_quantile_values: {
    type: 'VARCHAR',
    sql: (c) => `list_transform(from_json(${c}, '[{"quantile":"DOUBLE"}]'), x -> {'quantile': x.quantile})::JSON::VARCHAR`,
  },
};

/** Whether a dataset holds metrics (a float sample value or a native/exponential histogram's scale). */
export function isMetricsSchema(schema: Record<string, string>): boolean {
  return schema.data_point_value !== undefined || schema.data_point_scale !== undefined;
}

/** Whether `column` is one of the OTLP columns an index holds reduced (see REDUCED). */
function reduced(schema: Record<string, string>, column: string): boolean {
  const r = REDUCED[column];
  return r !== undefined && r.type === schema[column] && schema[OTLP_MARKER] === REDUCED[OTLP_MARKER].type;
}

/**
 * The columns a series index keeps, in schema order: every column but the server's `p_*` ones, time
 * columns and the fixed per-sample ones (values, exemplars, bucket counts, native histogram spans…),
 * plus the OTLP columns that name a series (`metric_type`, `is_monotonic`, `aggregation_temporality`,
 * `data_point_explicit_bounds`) and, in a dataset with OTLP points, the per-sample ones the Prometheus
 * mapping consults, reduced (see REDUCED).
 */
export function seriesIndexColumns(schema: Record<string, string>): string[] {
  return Object.entries(schema)
    .filter(
      ([column, type]) =>
        NAMING_COLUMNS.has(column) || reduced(schema, column) || (!NOT_INDEXED.has(column) && !/^p_/i.test(column) && !type.startsWith('TIMESTAMP')),
    )
    .map(([column]) => column);
}

/** The projection of index columns over a data file's (or the WAL's) rows: cast, reduced where REDUCED says, NULL where absent. */
function indexProjection(columns: [string, ColumnType][], present: Set<string>, schema: Record<string, string>): string {
  return columns
    .map(([n, type]) => {
      const value = !present.has(n) ? 'NULL' : reduced(schema, n) ? REDUCED[n].sql(`CAST(${sqlIdent(n)} AS ${type})`) : sqlIdent(n);
      return `CAST(${value} AS ${type}) AS ${sqlIdent(n)}`;
    })
    .join(', ');
}

/**
 * The tuples of `source` (a FROM item): its index columns (cast to `columns`' types, reduced as
 * `schema` says, NULL where the source lacks one) with their first and last time and row count.
 */
function tuplesSql(source: string, columns: [string, ColumnType][], present: Set<string>, timeColumn: string, timeType: ColumnType, schema: Record<string, string>): string {
  const t = sqlIdent(timeColumn);
  const proj = columns.length ? `${indexProjection(columns, present, schema)}, ` : '';
  return (
    `SELECT ${proj}CAST(min(${t}) AS ${timeType}) AS ${SERIES_MIN_TIME}, CAST(max(${t}) AS ${timeType}) AS ${SERIES_MAX_TIME}, ` +
    `count(*) AS ${SERIES_ROWS} FROM ${source} GROUP BY ALL HAVING count(*) > 0`
  );
}

/**
 * Writes the series index of one data file (`dataPath`, holding `columns`) to `target`. Returns its
 * size and the index columns it holds.
 */
export async function writeSeriesIndex(
  instance: DuckDBSource,
  opts: { dataPath: string; columns: [string, ColumnType][]; timeColumn: string; target: string; zstdLevel: number },
): Promise<NonNullable<FileEntry['seriesIndex']>> {
  const schema = Object.fromEntries(opts.columns);
  const names = seriesIndexColumns(schema);
  const indexColumns = names.map((n) => [n, schema[n]] as [string, ColumnType]);
  const timeType = schema[opts.timeColumn] ?? 'TIMESTAMP';
  const select = tuplesSql(`read_parquet(${sqlString(opts.dataPath)})`, indexColumns, new Set(names), opts.timeColumn, timeType, schema);
  await withConnection(instance, (conn) => conn.run(`COPY (${select}) TO ${sqlString(opts.target)} (FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL ${opts.zstdLevel})`));
  return { bytes: (await fs.stat(opts.target)).size, columns: names };
}

/**
 * Writes and uploads the series index of a metrics data file, in the same step as the
 * file: before the manifest that adds it. An index that cannot be built leaves the file without one
 * (its series are then read from the file itself); an upload that fails fails the step, as the
 * file's own upload does. `uploaded` collects the key, for the cleanup of a failed step.
 */
export async function uploadSeriesIndex(
  ctx: StorageContext,
  dataKey: string,
  dataPath: string,
  columns: [string, ColumnType][],
  timeColumn: string,
  uploaded: string[],
): Promise<FileEntry['seriesIndex']> {
  if (!isMetricsSchema(Object.fromEntries(columns))) return undefined;
  const target = `${dataPath}.series`;
  let index: FileEntry['seriesIndex'];
  try {
    index = await writeSeriesIndex(ctx.duck, { dataPath, columns, timeColumn, target, zstdLevel: ctx.settings.zstdLevel });
  } catch (err) {
    log.warn('could not build a series index; the file goes without one', { key: dataKey, error: (err as Error).message });
    return undefined;
  }
  const key = seriesIndexKey(dataKey);
  uploaded.push(key);
  await ctx.store.putFile(key, target);
  return index;
}

/**
 * Whether a file's index can answer for it under the dataset's current schema: it exists, and it holds
 * every current index column the file has (a column that became text after the file was written is in
 * the file but not in its index).
 */
export function indexUsable(f: Pick<FileEntry, 'columns' | 'seriesIndex'>, indexColumns: string[]): boolean {
  if (!f.seriesIndex) return false;
  const inIndex = new Set(f.seriesIndex.columns);
  const inFile = new Set(f.columns);
  return indexColumns.every((c) => inIndex.has(c) || !inFile.has(c));
}

/** What `seriesRelationSql` reads: the index or the data of each file, and the WAL segments. */
export interface SeriesSource {
  schema: Schema;
  timeColumn: string;
  /** `index`: `path` is the file's series index; otherwise the data file itself. */
  files: (Pick<FileEntry, 'columns' | 'seriesIndex'> & { path: string; index: boolean })[];
  segments: Pick<Segment, 'path'>[];
}

/**
 * The label-only relation of a metrics dataset: one row per tuple of the index columns (named and typed
 * as in the dataset's data view) per file, with `p_min_time`, `p_max_time` (the time column's type)
 * and `p_rows`. Indexed files are read from their index; the others' tuples are computed from the file
 * (per file, the same tuples its index would hold). The WAL's rows count only in
 * [startMs, endMs) (they are not per file). `pathFor` maps local paths to the reader's.
 */
export function seriesRelationSql(src: SeriesSource, startMs: number, endMs: number, pathFor: (file: string) => string = (f) => f): string {
  const names = seriesIndexColumns(src.schema);
  const columns = names.map((n) => [n, src.schema[n]] as [string, ColumnType]);
  const timeType = src.schema[src.timeColumn] ?? 'TIMESTAMP';
  const out = [...names.map(sqlIdent), SERIES_MIN_TIME, SERIES_MAX_TIME, SERIES_ROWS].join(', ');
  const parts: string[] = [];
  // Indexes with the same columns are read by one scan; others by name.
  const indexed = src.files.filter((f) => f.index);
  if (indexed.length) {
    const present = new Set(indexed.flatMap((f) => f.seriesIndex?.columns ?? []));
    const first = indexed[0].seriesIndex?.columns ?? [];
    const same = indexed.every((f) => (f.seriesIndex?.columns ?? []).join('\u0000') === first.join('\u0000'));
    parts.push(
      `SELECT ${columns.length ? `${castProjection(columns, present)}, ` : ''}CAST(${SERIES_MIN_TIME} AS ${timeType}) AS ${SERIES_MIN_TIME}, ` +
        `CAST(${SERIES_MAX_TIME} AS ${timeType}) AS ${SERIES_MAX_TIME}, ${SERIES_ROWS} ` +
        `FROM read_parquet(${listLiteral(indexed.map((f) => pathFor(f.path)))}, hive_partitioning = false${same ? '' : ', union_by_name = true'})`,
    );
  }
  const whole = src.files.filter((f) => !f.index);
  if (whole.length) {
    const present = new Set(whole.flatMap((f) => f.columns));
    const scan = `read_parquet(${listLiteral(whole.map((f) => pathFor(f.path)))}, hive_partitioning = false, union_by_name = true, filename = 'p_file')`;
    // Grouped by file as well: the same tuples as each file's index would hold.
    const perFile = tuplesSql(scan, [...columns, ['p_file', 'VARCHAR']], new Set([...present, 'p_file']), src.timeColumn, timeType, src.schema);
    parts.push(`SELECT ${out} FROM (${perFile})`);
  }
  if (src.segments.length) {
    const schemaColumns = Object.entries(src.schema) as [string, ColumnType][];
    const t = sqlIdent(src.timeColumn);
    const wal = `(SELECT * FROM (${walScanSql(src.segments.map((s) => pathFor(s.path)), schemaColumns, src.timeColumn)}) WHERE ${t} >= ${timestampLiteral(startMs)} AND ${t} < ${timestampLiteral(endMs)})`;
    parts.push(tuplesSql(wal, columns, new Set(names), src.timeColumn, timeType, src.schema));
  }
  if (!parts.length) {
    parts.push(`SELECT ${columns.length ? `${castProjection(columns, new Set())}, ` : ''}NULL::${timeType} AS ${SERIES_MIN_TIME}, NULL::${timeType} AS ${SERIES_MAX_TIME}, 0::BIGINT AS ${SERIES_ROWS} WHERE false`);
  }
  return parts.join(' UNION ALL ');
}
