/**
 * Worker thread for ingestion: decode, flatten, type and serialise request bodies off the event loop,
 * so the main thread only does HTTP, the schema and the WAL. The main thread decides the schema from
 * the type summary this returns.
 */
import { parentPort } from 'node:worker_threads';
import { serializeJob, type IngestInfo, type IngestJob } from './pipeline.ts';
import type { ColumnType } from '../model.ts';
import { DomainError, type ErrorKind } from '../errors.ts';

export type JobResult =
  | { id: number; ok: true; lines: string; rows: number; types: [string, ColumnType[]][]; info: IngestInfo }
  | { id: number; ok: false; kind: ErrorKind; message: string; retryAfterSec?: number };

export function runJob(id: number, job: IngestJob): JobResult {
  try {
    const r = serializeJob(job);
    return { id, ok: true, lines: r.lines, rows: r.rows, types: [...r.types], info: r.info };
  } catch (err) {
    if (err instanceof DomainError) return { id, ok: false, kind: err.kind, message: err.message, retryAfterSec: err.retryAfterSec };
    return { id, ok: false, kind: 'storage', message: (err as Error).message };
  }
}

parentPort?.on('message', ({ id, job }: { id: number; job: IngestJob }) => parentPort!.postMessage(runJob(id, job)));
