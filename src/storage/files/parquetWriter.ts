import * as fs from 'node:fs/promises';
import type { DuckDBConnection } from '@duckdb/node-api';
import type { ColumnType } from '../../model.ts';
import { log } from '../../log.ts';
import { columnsStruct, listLiteral, sqlIdent, sqlString, withConnection, type DuckDBSource } from '../../duckdb.ts';
import { classifyFailure } from '../../failures.ts';
import { parseBytes } from '../../settings.ts';
import { groupSteps, halveStep, splitWalLines, stepBudget, type LineStep } from '../wal/walSplit.ts';

export interface WrittenFile {
  path: string;
  /** Partition of the file: `date=YYYY-MM-DD/hour=HH/minute=MM` (Parseable's layout), or `date=…/hour=…` for spread data. */
  partition: string;
  rows: number;
  bytes: number;
  minMs: number;
  maxMs: number;
}

/**
 * A microsecond copy of a nanosecond time column, written into every Parquet file of a dataset whose
 * time column is TIMESTAMP_NS (OTLP's `time_unix_nano`, …). It is for Iceberg readers (docs/lake.md
 * "Nanosecond time columns"): a v2 `timestamp` over nanosecond values makes Java's iceberg-core and
 * Spark answer time filters with 0 rows, so the table's time column is this one. The service's own
 * queries never see it: they read the dataset's schema columns only.
 */
export const TIME_US_COLUMN = 'p_time_us';

/** The SELECT-list tail that adds TIME_US_COLUMN when the dataset's time column is TIMESTAMP_NS. */
export function timeShadow(columns: [string, ColumnType][], timeColumn: string): string {
  const type = columns.find(([n]) => n === timeColumn)?.[1];
  return type === 'TIMESTAMP_NS' ? `, CAST(${sqlIdent(timeColumn)} AS TIMESTAMP) AS ${sqlIdent(TIME_US_COLUMN)}` : '';
}

/**
 * The column types a file written from `columns` holds (every column cast to its type, plus the
 * microsecond copy): what the Iceberg publisher would otherwise read back from the file's footer.
 */
export function writtenTypes(columns: [string, ColumnType][], timeColumn: string): Record<string, ColumnType> {
  const types: Record<string, ColumnType> = Object.fromEntries(columns);
  if (types[timeColumn] === 'TIMESTAMP_NS') types[TIME_US_COLUMN] = 'TIMESTAMP';
  return types;
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

/** One partition of a flush: a minute (or an hour, for spread data) and its rows. */
export interface FlushPartition {
  /** Start of the partition, epoch ms. */
  startMs: number;
  rows: number;
}

/**
 * A flush writes minute partitions (Parseable's layout) when its rows fall in at most this many
 * minutes, else hour partitions (`date=…/hour=…`, the grain compaction writes): a backfill or a
 * request whose records are one minute apart would otherwise open thousands of files at once.
 */
export const MINUTE_GRAIN_MAX_PARTITIONS = 64;
/**
 * At most this many partitions are written by one COPY: DuckDB keeps a row-group buffer per open
 * partition, so this bounds a flush's memory and open files whatever the data's times.
 */
export const UNIT_MAX_PARTITIONS = 64;

export type Grain = 'minute' | 'hour';

/** The grain and the units (consecutive partitions, at most `maxPartitions` each) of a flush. */
export function planUnits(
  minutes: FlushPartition[],
  maxMinutePartitions = MINUTE_GRAIN_MAX_PARTITIONS,
  maxPartitions = UNIT_MAX_PARTITIONS,
): { grain: Grain; units: FlushPartition[][] } {
  let grain: Grain = 'minute';
  let parts = [...minutes].sort((a, b) => a.startMs - b.startMs);
  if (parts.length > maxMinutePartitions) {
    grain = 'hour';
    const hours = new Map<number, number>();
    for (const m of parts) {
      const h = m.startMs - (((m.startMs % HOUR_MS) + HOUR_MS) % HOUR_MS);
      hours.set(h, (hours.get(h) ?? 0) + m.rows);
    }
    parts = [...hours].map(([startMs, rows]) => ({ startMs, rows })).sort((a, b) => a.startMs - b.startMs);
  }
  const units: FlushPartition[][] = [];
  for (let i = 0; i < parts.length; i += maxPartitions) units.push(parts.slice(i, i + maxPartitions));
  return { grain, units };
}

const MINUTE_MS = 60_000;
const HOUR_MS = 3_600_000;

/**
 * Turns WAL segments into Parquet files in a staging directory, one per minute of the time column (or
 * per hour, for data spread over many minutes: see planUnits). The segments are parsed once, into a
 * temporary table of the flush's own connection (DuckDB spills it to its temp directory under memory
 * pressure); then the partitions are written a unit at a time, each unit one COPY of at most
 * UNIT_MAX_PARTITIONS partitions. A unit that runs out of memory or file descriptors is written again in
 * halves, down to one partition; only then does the flush fail (and is retried later, whole).
 * The per-file row count, size and time range come back from COPY's RETURN_STATS.
 */
export async function writeParquet(
  instance: DuckDBSource,
  opts: {
    segmentPaths: string[];
    columns: [string, ColumnType][];
    timeColumn: string;
    stagingDir: string;
    filePrefix: string;
    zstdLevel: number;
    rowGroupRows: number;
    /** Called before each unit's COPY (fault injection in tests). */
    beforeUnit?: (unit: FlushPartition[]) => void;
    /**
     * The rows are known to fall in a few minutes (receipt-timed rows appended within half an hour, or
     * rows whose own times the ingest side reported within half an hour; see flush.ts fewMinutes):
     * written by one COPY straight from the segments, without the temporary table (~20% of a flush's
     * time); should that still run out of memory or descriptors, the units are the fallback.
     */
    fewMinutes?: boolean;
  },
): Promise<WrittenFile[]> {
  const t = sqlIdent(opts.timeColumn);
  const names = opts.columns.map(([n]) => sqlIdent(n)).join(', ');
  // DuckDB creates a COPY's target directory but not its parents.
  await fs.mkdir(opts.stagingDir, { recursive: true });
  if (opts.fewMinutes) {
    const target = `${opts.stagingDir}/direct`;
    try {
      opts.beforeUnit?.([]);
      return await withConnection(instance, (conn) => copyUnit(conn, `(${walScanSql(opts.segmentPaths, opts.columns, opts.timeColumn)})`, undefined, 'minute', target, names + timeShadow(opts.columns, opts.timeColumn), t, opts));
    } catch (err) {
      await fs.rm(target, { recursive: true, force: true });
      const kind = classifyFailure(err);
      if (kind !== 'memory' && kind !== 'files') throw err;
      log.warn('flush: the direct write ran out of resources; writing in units', { error: (err as Error).message });
    }
  }
  try {
    return await writeUnits(instance, opts, names, t);
  } catch (err) {
    const kind = classifyFailure(err);
    if (kind !== 'memory' && kind !== 'files') throw err;
    // Even one partition ran out: a dataset with more columns than the limit (made before it, or
    // under a bigger budget; issue 30 A11). read_json holds a buffer per column, so the WAL is read
    // as lines instead, a partition at a time (docs/memory.md "Wide datasets").
    log.warn('flush: one partition ran out of resources; writing partition by partition from the WAL lines', { columns: opts.columns.length, error: (err as Error).message });
    await fs.rm(opts.stagingDir, { recursive: true, force: true });
    await fs.mkdir(opts.stagingDir, { recursive: true });
    return writeFromLines(instance, opts, names);
  }
}

type WriteOptions = Parameters<typeof writeParquet>[1];

/** The units path of writeParquet: the segments parsed once into a temporary table, then written a unit at a time. */
async function writeUnits(instance: DuckDBSource, opts: WriteOptions, names: string, t: string): Promise<WrittenFile[]> {
  return withConnection(instance, async (conn) => {
    await conn.run(
      `CREATE TEMP TABLE __flush AS SELECT ${names}, epoch_ms(date_trunc('minute', ${t})) AS __p_minute_ms ` +
        `FROM (${walScanSql(opts.segmentPaths, opts.columns, opts.timeColumn)})`,
    );
    try {
      const minutes = (await conn.runAndReadAll('SELECT __p_minute_ms, count(*) FROM __flush GROUP BY 1')).getRows().map(([ms, n]) => ({ startMs: Number(ms), rows: Number(n) }));
      const { grain, units } = planUnits(minutes);
      const written: WrittenFile[] = [];
      let dir = 0;
      const writeUnit = async (unit: FlushPartition[]): Promise<void> => {
        const target = `${opts.stagingDir}/u${dir++}`;
        try {
          opts.beforeUnit?.(unit);
          written.push(...(await copyUnit(conn, '__flush', unit, grain, target, names + timeShadow(opts.columns, opts.timeColumn), t, opts)));
        } catch (err) {
          await fs.rm(target, { recursive: true, force: true });
          const kind = classifyFailure(err);
          if (unit.length < 2 || (kind !== 'memory' && kind !== 'files')) throw err;
          const half = Math.ceil(unit.length / 2);
          log.warn('flush: a unit ran out of resources; writing it in halves', { partitions: unit.length, error: (err as Error).message });
          await writeUnit(unit.slice(0, half));
          await writeUnit(unit.slice(half));
        }
      };
      for (const unit of units) await writeUnit(unit);
      return written;
    } finally {
      await conn.run('DROP TABLE IF EXISTS __flush');
    }
  });
}

/** A JSON Pointer to a top-level member (RFC 6901: `~` and `/` escaped), whatever its name. */
export function jsonPointer(name: string): string {
  return `/${name.replaceAll('~', '~0').replaceAll('/', '~1')}`;
}

/**
 * The WAL segments' rows, read as lines (one VARCHAR each) and cut into the schema's columns by one
 * json_extract per line: what read_json does, without the buffers it holds per column (303 columns
 * × 100 rows needed over 85 MiB with read_json, and flushed at 85 MiB this way; 1,990 × 2,000 at
 * 341 MiB). Strings come out unquoted (`->>`), other types by JSON's cast, as read_json types them.
 */
export function walLinesSql(segmentPaths: string[], columns: [string, ColumnType][], timeColumn: string): string {
  const pointers = `[${columns.map(([n]) => sqlString(jsonPointer(n))).join(', ')}]`;
  const cell = (i: number, type: ColumnType) => (type === 'VARCHAR' ? `__v[${i + 1}] ->> '$'` : `CAST(__v[${i + 1}] AS ${type})`);
  const timeAt = columns.findIndex(([n]) => n === timeColumn);
  const lines = `read_csv(${listLiteral(segmentPaths)}, columns = {'__line': 'VARCHAR'}, delim = '\x01', quote = '', escape = '', header = false, auto_detect = false)`;
  return (
    `SELECT ${columns.map(([n, type], i) => `${cell(i, type)} AS ${sqlIdent(n)}`).join(', ')} ` +
    `FROM (SELECT json_extract(__line, ${pointers}) AS __v FROM ${lines}) WHERE __v[${timeAt + 1}] IS NOT NULL AND json_type(__v[${timeAt + 1}]) <> 'NULL'`
  );
}

/** The partition (`date=…/hour=…[/minute=…]`) a time falls in at a grain. */
export function partitionOf(ms: number, grain: Grain): string {
  const at = new Date(ms).toISOString();
  return `date=${at.slice(0, 10)}/hour=${at.slice(11, 13)}` + (grain === 'minute' ? `/minute=${at.slice(14, 16)}` : '');
}

/**
 * The last resort of a flush (see writeParquet), for a dataset wider than its memory allows: the WAL
 * split into per-minute step files in one streaming pass (walSplit.ts), each within the storage
 * DuckDB's memory; then each partition's steps, a group at a time, by an unpartitioned COPY (PARTITION_BY
 * and a temporary table each hold a block per column) from the lines (walLinesSql). A group that still
 * runs out of memory is written again in halves, down to one line.
 */
async function writeFromLines(instance: DuckDBSource, opts: WriteOptions, names: string): Promise<WrittenFile[]> {
  return withConnection(instance, async (conn) => {
    const budget = stepBudget(await memoryLimitOf(conn));
    const steps = await splitWalLines(opts.segmentPaths, opts.timeColumn, opts.columns.length, budget, `${opts.stagingDir}/lines`);
    const minutes = new Map<number, number>();
    for (const s of steps) if (!Number.isNaN(s.minuteMs)) minutes.set(s.minuteMs, (minutes.get(s.minuteMs) ?? 0) + s.rows);
    const { grain } = planUnits([...minutes].map(([startMs, rows]) => ({ startMs, rows })));
    // Each partition's steps together (a minute's, or an hour's of minutes); lines of no known time last.
    const partitionKey = (s: LineStep) => (Number.isNaN(s.minuteMs) ? '~' : partitionOf(s.minuteMs, grain));
    const byPartition = new Map<string, LineStep[]>();
    for (const s of steps) byPartition.set(partitionKey(s), [...(byPartition.get(partitionKey(s)) ?? []), s]);
    const written: WrittenFile[] = [];
    const fileNumbers = new Map<string, number>();
    const writeGroup = async (group: LineStep[]): Promise<void> => {
      try {
        opts.beforeUnit?.([]);
        const file = await copyLines(conn, group, grain, fileNumbers, opts, names);
        if (file) written.push(file);
      } catch (err) {
        const kind = classifyFailure(err);
        const halves = kind === 'memory' ? (group.length > 1 ? [group.slice(0, Math.ceil(group.length / 2)), group.slice(Math.ceil(group.length / 2))] : (await halveStep(group[0]))?.map((s) => [s])) : undefined;
        if (!halves) throw err;
        log.warn('flush: a step of lines ran out of memory; writing it in halves', { rows: group.reduce((n, s) => n + s.rows, 0), error: (err as Error).message });
        for (const h of halves) await writeGroup(h);
      }
    };
    for (const partSteps of byPartition.values()) for (const group of groupSteps(partSteps, budget)) await writeGroup(group);
    return written;
  });
}

/** The storage DuckDB's memory limit in bytes ('85.0 MiB' as DuckDB shows it); 48 MiB, its smallest sized default, when unreadable. */
async function memoryLimitOf(conn: DuckDBConnection): Promise<number> {
  const text = String((await conn.runAndReadAll("SELECT current_setting('memory_limit')")).getRows()[0]?.[0]);
  try {
    return parseBytes(text);
  } catch {
    return 48 * 1024 * 1024;
  }
}

/** One Parquet file from a group of step files; its partition from the rows' written times. */
async function copyLines(conn: DuckDBConnection, group: LineStep[], grain: Grain, fileNumbers: Map<string, number>, opts: WriteOptions, names: string): Promise<WrittenFile | undefined> {
  const rows = group.reduce((n, s) => n + s.rows, 0);
  const tmp = `${opts.stagingDir}/lines/out-${group[0].path.split('/').pop()}.parquet`;
  const result = await conn.runAndReadAll(
    `COPY (SELECT ${names + timeShadow(opts.columns, opts.timeColumn)} FROM (${walLinesSql(group.map((s) => s.path), opts.columns, opts.timeColumn)})) TO ${sqlString(tmp)} ` +
      `(FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL ${opts.zstdLevel}, ROW_GROUP_SIZE ${Math.max(1, Math.min(opts.rowGroupRows, rows))}, RETURN_STATS)`,
  );
  const [row] = result.getRowObjectsJson();
  if (!row || Number(row.count) === 0) return undefined;
  const stats = fileStatsFromCopy(row, opts.timeColumn);
  const partition = partitionOf(stats.minMs, grain);
  // `_<n>` as every flushed file (layout.ts); numbered within the partition's directory.
  const n = fileNumbers.get(partition) ?? 0;
  fileNumbers.set(partition, n + 1);
  await fs.mkdir(`${opts.stagingDir}/${partition}`, { recursive: true });
  const file = `${opts.stagingDir}/${partition}/${opts.filePrefix}_${n}.parquet`;
  await fs.rename(tmp, file);
  return { ...stats, path: file, partition };
}

/** Writes the rows of `source` (the whole of it, or the partitions of `unit`) with one partitioned COPY. */
async function copyUnit(
  conn: DuckDBConnection,
  source: string,
  unit: FlushPartition[] | undefined,
  grain: Grain,
  target: string,
  names: string,
  t: string,
  opts: { filePrefix: string; zstdLevel: number; rowGroupRows: number; timeColumn: string },
): Promise<WrittenFile[]> {
  const keys = grain === 'minute' ? '__p_date, __p_hour, __p_minute' : '__p_date, __p_hour';
  let where = '';
  if (unit) {
    const from = unit[0].startMs;
    const to = unit[unit.length - 1].startMs + (grain === 'minute' ? MINUTE_MS : HOUR_MS);
    where = ` WHERE __p_minute_ms >= ${from} AND __p_minute_ms < ${to}`;
  }
  const select =
    `SELECT ${names}, strftime(${t}, '%Y-%m-%d') AS __p_date, strftime(${t}, '%H') AS __p_hour` +
    (grain === 'minute' ? `, strftime(${t}, '%M') AS __p_minute` : '') +
    ` FROM ${source}${where}`;
  const sql =
    `COPY (${select}) TO ${sqlString(target)} (FORMAT parquet, COMPRESSION zstd, ` +
    `COMPRESSION_LEVEL ${opts.zstdLevel}, ROW_GROUP_SIZE ${opts.rowGroupRows}, ` +
    `PARTITION_BY (${keys}), FILENAME_PATTERN ${sqlString(`${opts.filePrefix}_{i}`)}, ` +
    `OVERWRITE_OR_IGNORE, RETURN_STATS)`;
  const result = await conn.runAndReadAll(sql);
  return result.getRowObjectsJson().map((row) => {
    const p = Object.fromEntries((row.partition_keys as { key: string; value: string }[]).map((x) => [x.key, x.value]));
    const partition = `date=${p.__p_date}/hour=${p.__p_hour}` + (grain === 'minute' ? `/minute=${p.__p_minute}` : '');
    return { ...fileStatsFromCopy(row, opts.timeColumn), partition };
  });
}
