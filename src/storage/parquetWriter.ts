import type { DuckDBInstance } from '@duckdb/node-api';
import type { ColumnType } from '../model.ts';
import { columnsStruct, listLiteral, sqlIdent, sqlString, withConnection } from '../duckdb.ts';

export interface WrittenFile {
  path: string;
  /** Partition of the file: `date=YYYY-MM-DD/hour=HH/minute=MM` (Parseable's layout). */
  partition: string;
  rows: number;
  bytes: number;
  minMs: number;
  maxMs: number;
}

/** Parses DuckDB's text form of a TIMESTAMP / TIMESTAMP_NS ('2026-11-22 23:34:36.123456789') to epoch ms. */
export function timestampTextToMs(text: string): number {
  const m = /^(\d{4,})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?/.exec(text);
  if (!m) throw new Error(`unexpected timestamp text: ${text}`);
  const ms = Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6]));
  return ms + (m[7] ? Number(m[7].slice(0, 3).padEnd(3, '0')) : 0);
}

/** Row count, size and time range of one file from a `COPY … RETURN_STATS` result row. */
export function fileStatsFromCopy(row: Record<string, unknown>, timeColumn: string): Omit<WrittenFile, 'partition'> {
  const stats = row.column_statistics as { key: string; value: { key: string; value: string }[] }[];
  const timeStats = stats.find((s) => s.key === sqlIdent(timeColumn) || s.key === timeColumn);
  const get = (k: string) => timeStats?.value.find((v) => v.key === k)?.value;
  const min = get('min');
  const max = get('max');
  if (!min || !max) throw new Error(`parquet writer returned no time statistics for ${String(row.filename)}`);
  return { path: String(row.filename), rows: Number(row.count), bytes: Number(row.file_size_bytes), minMs: timestampTextToMs(min), maxMs: timestampTextToMs(max) };
}

/** The SELECT that reads WAL segments as typed rows (dropping commit markers). */
export function walScanSql(segmentPaths: string[], columns: [string, ColumnType][], timeColumn: string): string {
  return (
    `SELECT * FROM read_json(${listLiteral(segmentPaths)}, format = 'newline_delimited', ` +
    `columns = ${columnsStruct(columns)}) WHERE ${sqlIdent(timeColumn)} IS NOT NULL`
  );
}

/**
 * Turns WAL segments into Parquet files, one per minute of the time column, in a staging directory.
 * DuckDB does the whole job (JSON parse, columnar encode, ZSTD) in its own threads; the per-file row
 * count, size and time range come back from COPY's RETURN_STATS, so no file is read twice.
 */
export async function writeParquet(
  instance: DuckDBInstance,
  opts: {
    segmentPaths: string[];
    columns: [string, ColumnType][];
    timeColumn: string;
    stagingDir: string;
    filePrefix: string;
    zstdLevel: number;
    rowGroupRows: number;
  },
): Promise<WrittenFile[]> {
  const t = sqlIdent(opts.timeColumn);
  const select =
    `SELECT ${opts.columns.map(([n]) => sqlIdent(n)).join(', ')}, ` +
    `strftime(${t}, '%Y-%m-%d') AS __p_date, strftime(${t}, '%H') AS __p_hour, strftime(${t}, '%M') AS __p_minute ` +
    `FROM (${walScanSql(opts.segmentPaths, opts.columns, opts.timeColumn)})`;
  const sql =
    `COPY (${select}) TO ${sqlString(opts.stagingDir)} (FORMAT parquet, COMPRESSION zstd, ` +
    `COMPRESSION_LEVEL ${opts.zstdLevel}, ROW_GROUP_SIZE ${opts.rowGroupRows}, ` +
    `PARTITION_BY (__p_date, __p_hour, __p_minute), FILENAME_PATTERN ${sqlString(`${opts.filePrefix}_{i}`)}, ` +
    `OVERWRITE_OR_IGNORE, RETURN_STATS)`;
  return withConnection(instance, async (conn) => {
    const result = await conn.runAndReadAll(sql);
    return result.getRowObjectsJson().map((row) => {
      const parts = Object.fromEntries((row.partition_keys as { key: string; value: string }[]).map((p) => [p.key, p.value]));
      return { ...fileStatsFromCopy(row, opts.timeColumn), partition: `date=${parts.__p_date}/hour=${parts.__p_hour}/minute=${parts.__p_minute}` };
    });
  });
}
