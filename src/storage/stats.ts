import { TIME_COLUMN } from '../model.ts';
import type { DatasetMeta } from './codec.ts';
import type { Dataset } from './dataset/dataset.ts';
import type { QuarantinedObject } from './files/quarantine.ts';

/** Counts and sizes: rows, raw request bytes, stored Parquet bytes and files. */
export interface Totals {
  rows: number;
  rawBytes: number;
  storageBytes: number;
  files: number;
}

/** A dataset's numbers (storage returns numbers; the HTTP layer shapes them as Parseable does). */
export interface DatasetStats {
  meta: DatasetMeta;
  current: Totals;
  deleted: Totals;
  wal: { rows: number; bytes: number; rawBytes: number; segments: number };
  /** Oldest and newest time-column value in stored files (the WAL is not read). */
  timeRange?: { minMs: number; maxMs: number };
  /** Damaged objects of this dataset set aside (see docs/operations.md "Damaged objects"). */
  quarantined: QuarantinedObject[];
}

/** Splits `total` over parts in proportion to their row counts; the parts sum to `total` exactly. */
export function splitByRows(total: number, rows: number[]): number[] {
  if (rows.length === 0) return [];
  const all = rows.reduce((s, r) => s + r, 0);
  if (all === 0) return rows.map((_, i) => (i === 0 ? total : 0));
  const shares = rows.map((r) => Math.floor((total * r) / all));
  shares[shares.length - 1] += total - shares.reduce((s, x) => s + x, 0);
  return shares;
}

/**
 * Counts and sizes of a dataset (numbers only; the HTTP layer shapes them). `current` is what is
 * stored now (Parquet files plus the WAL), `deleted` what retention removed; lifetime is their sum.
 */
export function datasetStats(ds: Dataset, quarantined: QuarantinedObject[]): DatasetStats {
  const wal = ds.wal.size;
  const files = ds.catalog.totals();
  const deleted = ds.catalog.deletedTotals();
  return {
    meta: ds.meta,
    current: {
      rows: files.rows + wal.rows,
      // ingestedBytes covers every flush ever applied, deleted files included.
      rawBytes: ds.catalog.ingestedBytes - deleted.rawBytes + wal.rawBytes,
      storageBytes: files.bytes,
      files: files.files,
    },
    deleted: { rows: deleted.rows, rawBytes: deleted.rawBytes, storageBytes: deleted.bytes, files: deleted.files },
    wal: { rows: wal.rows, bytes: wal.bytes, rawBytes: wal.rawBytes, segments: wal.segments },
    timeRange: ds.catalog.timeRange(),
    quarantined,
  };
}

/**
 * What one day (UTC, `YYYY-MM-DD`) holds: files of that date partition (by the time column), plus
 * the unflushed WAL rows when the day is today (they are at most P_FLUSH_INTERVAL old). A JSON
 * dataset with a time field of its events has WAL rows of any day: they count once flushed.
 */
export function dateTotals(ds: Dataset, date: string, now = Date.now()): Totals {
  const files = ds.catalog.totals(date);
  const eventTime = ds.meta.kind === 'json' && ds.meta.timeColumn !== TIME_COLUMN.json;
  const today = !eventTime && new Date(now).toISOString().slice(0, 10) === date;
  const wal = today ? ds.wal.size : { rows: 0, rawBytes: 0 };
  return { rows: files.rows + wal.rows, rawBytes: files.rawBytes + wal.rawBytes, storageBytes: files.bytes, files: files.files };
}

/**
 * Consecutive items in groups whose weights together stay within `max` (an item heavier than `max` is a
 * group of its own): WAL segments per flush unit, a partition's line steps per Parquet file.
 */
export function consecutiveGroups<T>(items: T[], weight: (item: T) => number, max: number): T[][] {
  const groups: T[][] = [];
  let total = 0;
  for (const item of items) {
    const last = groups[groups.length - 1];
    const w = weight(item);
    if (last && total + w <= max) {
      last.push(item);
      total += w;
    } else {
      groups.push([item]);
      total = w;
    }
  }
  return groups;
}
