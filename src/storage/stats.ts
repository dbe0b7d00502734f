import type { DatasetMeta } from './codec.ts';
import type { QuarantinedObject } from './quarantine.ts';

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
  /** Damaged objects of this dataset set aside (see README "Damaged objects"). */
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
