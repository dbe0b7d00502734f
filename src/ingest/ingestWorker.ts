/**
 * Worker thread for ingestion: decode, flatten, type and serialise request bodies off the event loop,
 * so the main thread only does HTTP, the schema and the WAL. The main thread decides the schema from
 * the type summary this returns.
 */
import { parentPort } from 'node:worker_threads';
import { HttpError } from '../http/errors.ts';
import { serializeJob, type IngestInfo, type IngestJob } from './pipeline.ts';
import type { ColumnType } from './types.ts';

export type JobResult =
  | { id: number; ok: true; lines: string; rows: number; types: [string, ColumnType[]][]; info: IngestInfo }
  | { id: number; ok: false; status: number; message: string };

export function runJob(id: number, job: IngestJob): JobResult {
  try {
    const r = serializeJob(job);
    return { id, ok: true, lines: r.lines, rows: r.rows, types: [...r.types], info: r.info };
  } catch (err) {
    if (err instanceof HttpError) return { id, ok: false, status: err.status, message: err.message };
    return { id, ok: false, status: 500, message: (err as Error).message };
  }
}

parentPort?.on('message', ({ id, job }: { id: number; job: IngestJob }) => parentPort!.postMessage(runJob(id, job)));
