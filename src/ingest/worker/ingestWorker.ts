/**
 * Worker thread for ingestion: decode, flatten, place and serialise request bodies off the event loop,
 * so the main thread only does HTTP, the schema check and the WAL. The main thread re-checks the
 * type summary this returns against the schema as it is by then.
 *
 * The WAL lines come back as UTF-8 bytes in a buffer of their own, transferred (not copied) to the
 * main thread, which writes them as they are; a transferred request body is handed back the same way.
 */
import { writeFileSync } from 'node:fs';
import { parentPort } from 'node:worker_threads';
import { serializeJob, type IngestInfo, type IngestJob, type PlacementTarget } from './pipeline.ts';
import type { ColumnType, TimeRange } from '../../model.ts';
import { DomainError, type ErrorKind } from '../../errors.ts';
import { DecodeBudgetExceeded } from '../compression.ts';
import { ownBytes } from './lines.ts';

export type JobResult =
  | { id: number; ok: true; lines: Uint8Array; rows: number; types: [string, ColumnType[]][]; fixed: string[]; info: IngestInfo; timeRange?: TimeRange; body?: Uint8Array }
  | { id: number; ok: false; kind: ErrorKind; message: string; retryAfterSec?: number; overBudget?: boolean; body?: Uint8Array };

export function runJob(id: number, job: IngestJob, target: PlacementTarget): JobResult {
  try {
    const r = serializeJob(job, target);
    return { id, ok: true, lines: typeof r.lines === 'string' ? ownBytes(r.lines) : r.lines, rows: r.rows, types: [...r.types], fixed: r.fixed, info: r.info, timeRange: r.timeRange };
  } catch (err) {
    if (err instanceof DomainError) return { id, ok: false, kind: err.kind, message: err.message, retryAfterSec: err.retryAfterSec, overBudget: err instanceof DecodeBudgetExceeded };
    return { id, ok: false, kind: 'storage', message: (err as Error).message };
  }
}

/** What a worker thread posts once its modules are loaded and it takes jobs without delay. */
export const WORKER_READY = 'ready';

if (parentPort) {
  // The thread's name as top -H and /proc show it (Linux; elsewhere it stays as it was), so the CPU of
  // ingestion can be told apart from the event loop's and DuckDB's (bench/timeField.ts reads it).
  try {
    writeFileSync('/proc/thread-self/comm', 'ingest-worker');
  } catch {
    // not Linux, or /proc not mounted
  }
}

parentPort?.on('message', ({ id, job, target }: { id: number; job: IngestJob; target: PlacementTarget }) => {
  const result = runJob(id, job, target);
  const transfer: ArrayBuffer[] = [];
  if (result.ok) transfer.push(result.lines.buffer as ArrayBuffer);
  if (ownsBuffer(job.body)) {
    result.body = job.body;
    transfer.push(job.body.buffer as ArrayBuffer);
  }
  parentPort!.postMessage(result, transfer);
});

parentPort?.postMessage(WORKER_READY);

/** Whether `b` is the whole of its ArrayBuffer (so transferring the buffer moves nothing else with it). */
export function ownsBuffer(b: Uint8Array): boolean {
  return b.byteOffset === 0 && b.byteLength === b.buffer.byteLength && !(b.buffer instanceof SharedArrayBuffer);
}
