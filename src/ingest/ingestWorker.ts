/**
 * Worker thread for ingestion: decode, flatten, place and serialise request bodies off the event loop,
 * so the main thread only does HTTP, the schema check and the WAL. The main thread re-checks the
 * type summary this returns against the schema as it is by then.
 */
import { parentPort } from 'node:worker_threads';
import { serializeJob, type IngestInfo, type IngestJob, type PlacementTarget } from './pipeline.ts';
import type { ColumnType } from '../model.ts';
import { DomainError, type ErrorKind } from '../errors.ts';

export type JobResult =
  | { id: number; ok: true; lines: string; rows: number; types: [string, ColumnType[]][]; fixed: string[]; info: IngestInfo }
  | { id: number; ok: false; kind: ErrorKind; message: string; retryAfterSec?: number };

export function runJob(id: number, job: IngestJob, target: PlacementTarget): JobResult {
  try {
    const r = serializeJob(job, target);
    return { id, ok: true, lines: r.lines, rows: r.rows, types: [...r.types], fixed: r.fixed, info: r.info };
  } catch (err) {
    if (err instanceof DomainError) return { id, ok: false, kind: err.kind, message: err.message, retryAfterSec: err.retryAfterSec };
    return { id, ok: false, kind: 'storage', message: (err as Error).message };
  }
}

parentPort?.on('message', ({ id, job, target }: { id: number; job: IngestJob; target: PlacementTarget }) => parentPort!.postMessage(runJob(id, job, target)));
