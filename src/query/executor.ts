import { createHash } from 'node:crypto';
import * as path from 'node:path';
import type { DuckDBInstance } from '@duckdb/node-api';
import { quotedIdentifier } from '@duckdb/node-api';
import { DomainError, forbidden, notFound, timedOut } from '../errors.ts';
import { withConnection } from '../duckdb.ts';
import { planCacheLookups } from '../metrics.ts';
import { scanSql, type Snapshot, type TableSource } from '../storage/scan.ts';
import type { QueryPool } from './pool.ts';
import type { RunJob, TimeFormat } from './protocol.ts';
import { PlanCache, planStatement, type QueryPlan, type SandboxLimits } from './sandbox.ts';

export interface QueryLimits extends SandboxLimits {
  timeoutMs: number;
  maxRows: number;
  maxBytes: number;
}

export interface QueryRequest {
  sql: string;
  startMs: number;
  endMs: number;
  sendNull: boolean;
  timeFormat: TimeFormat;
  streaming: boolean;
  /** Who asks (admission control counts per key). */
  principalId: string;
  /** May this caller read the dataset? Decided by name alone, so the answer never reveals existence. */
  canRead: (dataset: string) => boolean;
  /** Aborted when the client goes away. */
  signal?: AbortSignal;
}

/** A query under way: its columns, then its rows as JSON text chunks (objects joined by commas). */
export interface QueryAnswer {
  fields: string[];
  /** Throws a DomainError if the query fails or is cut off after the columns were known. */
  chunks: AsyncIterable<string>;
}

/**
 * Most rows a statement may return to be run whole in the worker (see worker.ts): DuckDB holds such a
 * result outside its memory limit, before the worker can apply P_QUERY_MAX_RESULT_BYTES, so only
 * small ones (a LIMIT of a page, an aggregate) go that way.
 */
const MATERIALIZE_MAX_ROWS = 10_000;

/** Link names by file path: a hash per file per query was most of the cost of a job over many files. */
const linkNames = new Map<string, string>();

/** A file's link name in a worker's directory: the same for every query, so DuckDB's footer cache hits. */
export function linkName(file: string): string {
  let name = linkNames.get(file);
  if (name === undefined) {
    name = `${createHash('sha1').update(file).digest('hex').slice(0, 24)}${path.extname(file)}`;
    // Paths of files long gone would otherwise pile up; starting over costs one hash per file.
    if (linkNames.size >= 100_000) linkNames.clear();
    linkNames.set(file, name);
  }
  return name;
}

/**
 * Runs user SQL: plan and check it (sandbox), authorise every dataset it names, take a consistent
 * snapshot of each (storage's scan seam), and hand the statement with one view per dataset to a query
 * worker process, under the time limit. The snapshot is held until the answer ends.
 */
export class QueryExecutor {
  private readonly plans: PlanCache;

  constructor(
    private readonly duck: DuckDBInstance,
    private readonly source: TableSource,
    private readonly pool: QueryPool,
    private readonly limits: QueryLimits,
    planCacheBytes: number,
  ) {
    this.plans = new PlanCache(planCacheBytes);
  }

  async plan(sql: string): Promise<QueryPlan> {
    const cached = this.plans.get(sql);
    planCacheLookups.inc({ result: cached ? 'hit' : 'miss' });
    if (cached) return cached;
    const plan = await withConnection(this.duck, (conn) => planStatement(conn, sql, this.limits));
    this.plans.set(sql, plan);
    return plan;
  }

  async execute(req: QueryRequest): Promise<QueryAnswer> {
    const plan = await this.plan(req.sql);
    // Permission before existence: a key that may not read a name gets the same answer whether a
    // dataset of that name exists or not.
    const names: string[] = [];
    for (const table of plan.tables) {
      const meta = await this.source.resolve(table, true);
      if (!req.canRead(table) && !(meta && req.canRead(meta.name))) throw forbidden(`this API key may not read dataset "${table}"`);
      if (!meta) throw notFound(`dataset "${table}" does not exist`);
      names.push(meta.name);
    }

    const releases: (() => void)[] = [];
    const releaseAll = () => {
      for (const r of releases.splice(0)) r();
    };
    try {
      const snapshots: Snapshot[] = [];
      for (const name of new Set(names)) {
        const snap = await this.source.snapshot(name, req.startMs, req.endMs);
        releases.push(snap.release);
        snapshots.push(snap);
      }
      const build = (filesDir: string): Omit<RunJob, 'id'> => {
        const links = new Map<string, string>();
        const pathFor = (file: string) => {
          const name = linkName(file);
          links.set(name, file);
          return `${filesDir}/${name}`;
        };
        const views = snapshots.map((snap) => ({ name: quotedIdentifier(snap.meta.name), sql: scanSql(snap, req.startMs, req.endMs, pathFor) }));
        return {
          type: 'run',
          links: [...links].map(([name, src]) => ({ name, src })),
          views,
          sql: req.sql,
          sendNull: req.sendNull,
          timeFormat: req.timeFormat,
          maxRows: this.limits.maxRows,
          maxBytes: this.limits.maxBytes,
          streaming: req.streaming,
          materialize: !req.streaming && plan.rowBound !== undefined && plan.rowBound <= Math.min(this.limits.maxRows, MATERIALIZE_MAX_ROWS),
        };
      };
      const exec = await this.pool.run(req.principalId, build);
      const timer = setTimeout(() => exec.cancel(timedOut(`query exceeded the time limit of ${this.limits.timeoutMs} ms (P_QUERY_TIMEOUT)`)), this.limits.timeoutMs);
      const onAbort = () => exec.cancel(new DomainError('invalid', 'the client closed the connection'));
      req.signal?.addEventListener('abort', onAbort);
      const cleanup = () => {
        clearTimeout(timer);
        req.signal?.removeEventListener('abort', onAbort);
        releaseAll();
      };
      const iterator = exec.events[Symbol.asyncIterator]();
      try {
        const first = await iterator.next();
        const m = first.value;
        if (first.done || !m) throw new DomainError('unavailable', 'the query worker ended without an answer', 1);
        if (m.type === 'error') throw new DomainError(m.kind, m.message);
        if (m.type === 'answer') {
          // The whole answer in one message: the worker is already free.
          await iterator.return?.();
          cleanup();
          const text = m.text;
          return { fields: m.fields, chunks: (async function* () { if (text) yield text; })() };
        }
        if (m.type !== 'fields') throw new DomainError('storage', `unexpected message from the query worker: ${m.type}`);
        const fields = m.fields;
        const chunks: AsyncIterable<string> = {
          [Symbol.asyncIterator]: async function* () {
            try {
              for (;;) {
                const next = await iterator.next();
                if (next.done) return;
                const e = next.value;
                if (e.type === 'chunk') {
                  yield e.text;
                  exec.ack();
                } else if (e.type === 'done') return;
                else if (e.type === 'error') throw new DomainError(e.kind, e.message);
              }
            } finally {
              await iterator.return?.();
              cleanup();
            }
          },
        };
        return { fields, chunks };
      } catch (err) {
        await iterator.return?.();
        cleanup();
        throw err;
      }
    } catch (err) {
      releaseAll();
      throw err;
    }
  }
}
