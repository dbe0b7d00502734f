import * as fs from 'node:fs/promises';
import type { ColumnType } from '../../model.ts';
import { log } from '../../log.ts';
import { withConnection } from '../../duckdb.ts';
import type { Dataset, StorageContext } from '../dataset/dataset.ts';
import { walQuarantineFile } from '../layout.ts';
import { walScanSql } from '../files/parquetWriter.ts';
import { COMMIT_MARKER, type Segment } from './wal.ts';
import { faultpoint } from '../../failpoint.ts';
import { classifyFailure } from '../../failures.ts';

/**
 * Damaged WAL segments (random bytes, a NUL hole, a line DuckDB cannot read as the dataset's types)
 * must not stop a dataset's flushes and queries for good. A segment DuckDB cannot read is cut down to
 * its readable lines; the lines it cannot keep go to `P_DATA_DIR/quarantine/wal/…` (set aside, not
 * deleted), and when even the cut segment does not read, the whole segment is set aside there.
 * Only DuckDB's parse error naming the segment counts as damage: any other failure on the way (out of
 * memory, EMFILE, a full disk) stops the salvage with the segment as it was, to be tried again.
 */

/**
 * Does DuckDB read the segment with the dataset's column types (what a flush and a query do)? Returns
 * the parse error when the segment's own bytes do not read; any other failure (out of memory, no file
 * descriptor, a full disk: see failures.ts) is thrown, so the caller retries later and never takes a
 * valid segment for damaged.
 */
async function readable(ctx: StorageContext, ds: Dataset, seg: Segment, point: string): Promise<string | undefined> {
  const columns = Object.entries(ds.schema) as [string, ColumnType][];
  if (!columns.length) columns.push([ds.meta.timeColumn, 'TIMESTAMP']);
  try {
    faultpoint(point);
    await withConnection(ctx.duck, (conn) => conn.run(`SELECT count(*) FROM (${walScanSql([seg.path], columns, ds.meta.timeColumn)})`));
    return undefined;
  } catch (err) {
    if (classifyFailure(err, [seg.path]) === 'damaged') return (err as Error).message;
    throw err;
  }
}

const TIMESTAMP_TEXT = /^\d{4,}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}(:?\d{2})?)?$/;

/** Would DuckDB read this value as a column of this type (as the WAL reader casts it)? */
function fits(v: unknown, type: ColumnType): boolean {
  if (v === null) return true;
  switch (type) {
    case 'VARCHAR':
      return typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';
    case 'BIGINT':
      return typeof v === 'number' && Number.isInteger(v);
    case 'DOUBLE':
      return typeof v === 'number' || v === 'NaN' || v === 'Infinity' || v === '-Infinity';
    case 'BOOLEAN':
      return typeof v === 'boolean';
    case 'TIMESTAMP':
    case 'TIMESTAMP_NS':
      return typeof v === 'string' && TIMESTAMP_TEXT.test(v);
    default:
      return Array.isArray(v) && v.every((x) => fits(x, type.slice(0, -2) as ColumnType));
  }
}

function goodLine(text: string, schema: Record<string, ColumnType>): boolean {
  if (text.includes('\0')) return false;
  let row: unknown;
  try {
    row = JSON.parse(text);
  } catch {
    return false;
  }
  if (row === null || typeof row !== 'object' || Array.isArray(row)) return false;
  for (const [k, v] of Object.entries(row)) {
    if (k.includes('\0')) return false;
    const type = schema[k];
    if (type !== undefined && !fits(v, type)) return false;
  }
  return true;
}

/**
 * Splits a segment into the lines worth keeping and the rest. A run of NUL bytes (a hole left by a
 * short write) splits a line in two: the part after it may be a whole row of the next batch.
 */
export function cutSegment(content: string, schema: Record<string, ColumnType>): { kept: string; dropped: string[] } {
  const kept: string[] = [];
  const dropped: string[] = [];
  for (const line of content.split('\n')) {
    for (const piece of line.split(/\0+/)) {
      if (!piece) continue;
      if (goodLine(piece, schema)) kept.push(piece);
      else dropped.push(piece);
    }
  }
  // A segment is recovered to its last commit marker after a crash; it must end with one.
  const marker = COMMIT_MARKER.trimEnd();
  if (kept.length && kept[kept.length - 1] !== marker) kept.push(marker);
  return { kept: kept.length ? `${kept.join('\n')}\n` : '', dropped };
}

/**
 * Checks the given segments and repairs the ones DuckDB cannot read. Returns how many it changed;
 * 0 means every segment reads (a flush that failed did so for another reason, e.g. a full disk).
 * Throws a resource error as it came (nothing set aside): the caller retries.
 */
export async function salvageSegments(ctx: StorageContext, ds: Dataset, segments: Segment[]): Promise<number> {
  let changed = 0;
  const { name, generation } = ds.meta;
  for (const seg of segments) {
    const problem = await readable(ctx, ds, seg, 'salvage-check');
    if (problem === undefined) continue;
    changed++;
    const base = seg.path.split('/').pop()!;
    const badFile = walQuarantineFile(ctx.settings.dataDir, name, generation, `${base}.bad-lines`);
    faultpoint('salvage-read');
    const content = await fs.readFile(seg.path, 'utf8');
    const { kept, dropped } = cutSegment(content, ds.schema);
    if (dropped.length) {
      faultpoint('salvage-bad-lines');
      await fs.mkdir(badFile.slice(0, badFile.lastIndexOf('/')), { recursive: true });
      await fs.appendFile(badFile, `${dropped.join('\n')}\n`);
    }
    if (!kept) {
      await ds.wal.remove([seg.seq]);
      ctx.quarantine.add({ key: seg.path, kind: 'wal', dataset: name, reason: `no readable line: ${problem}`, setAsideTo: badFile });
      continue;
    }
    faultpoint('salvage-rewrite');
    await ds.wal.rewriteSealed(seg.seq, Buffer.from(kept));
    // Reported as soon as the lines are out of the segment, whatever the check below meets.
    const cut = { key: seg.path, kind: 'wal' as const, dataset: name, reason: `${dropped.length} unreadable line(s) cut out: ${problem}`, setAsideTo: badFile };
    if (dropped.length) ctx.quarantine.add(cut);
    const still = await readable(ctx, ds, seg, 'salvage-recheck');
    if (still === undefined) {
      ctx.quarantine.add(cut);
      log.warn('wal: damaged segment cut to its readable lines', { dataset: name, segment: seg.path, droppedLines: dropped.length });
      continue;
    }
    const aside = walQuarantineFile(ctx.settings.dataDir, name, generation, base);
    faultpoint('salvage-set-aside');
    await ds.wal.setAside(seg.seq, aside);
    ctx.quarantine.add({ key: seg.path, kind: 'wal', dataset: name, reason: `unreadable even after cutting: ${still}`, setAsideTo: aside });
  }
  return changed;
}
