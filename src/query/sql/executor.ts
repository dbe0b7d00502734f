import { holdToLimits, timeLimitMessage } from '../worker/deadline.ts';
import { DomainError, forbidden, isDomainError, notFound, unavailable } from '../../errors.ts';
import { classifyFailure } from '../../failures.ts';
import { withConnection, type DuckDBSource } from '../../duckdb.ts';
import { planCacheLookups, sqlParses } from '../../metrics.ts';
import type { Snapshot, TableSource } from '../../storage/scan.ts';
import type { QueryPool } from '../worker/pool.ts';
import { timeRangeOf, WHOLE_RANGE, type TimeRange } from './timeRange.ts';
import type { FromWorker } from '../worker/protocol.ts';
import { checkSqlText, PlanCache, planStatement, type QueryPlan } from './sandbox.ts';
import type { PgAnswer, PgQueries, QueryAnswer, QueryLimits, QueryRequest, SqlQueries } from './queries.ts';
import { linkName, preAggregatedSql, runJob } from './runJob.ts';
import { countParses, countParsesWith, parseTree, serializeSql } from './parseTree.ts';
import { ParsedTrees } from './parsedTrees.ts';
import { CatalogQueries } from '../catalog/client.ts';
import type { BoundParam } from './boundParams.ts';

// Every parse in the service's process shows in lakehouse_sql_parses_total (issue 35: one per statement).
countParsesWith((site, n = 1) => sqlParses.inc({ site }, n));

/**
 * Most rows a statement may return to be run whole in the worker (see worker.ts): DuckDB holds such a
 * result outside its memory limit, before the worker can apply P_QUERY_MAX_RESULT_BYTES, so only
 * small ones (a LIMIT of a page, an aggregate) go that way.
 */
const MATERIALIZE_MAX_ROWS = 10_000;

/** Times a query runs again after damaged files were set aside. */
const MAX_DAMAGE_RETRIES = 3;

/** A query failed on data files it could not decode, now set aside: run it again. */
class DamagedFilesFound extends Error {
  constructor(readonly error: DomainError) {
    super(error.message);
  }
}

/**
 * The snapshot, or `unavailable` (503, retry later) when it is not ready by the deadline: on S3 a
 * bucket that stopped answering would otherwise hold the query for as long as the SDK's retries last.
 * A snapshot that arrives late is released at once.
 */
function withinDeadline(pending: Promise<Snapshot>, deadline: number, dataset: string): Promise<Snapshot> {
  return new Promise<Snapshot>((resolve, reject) => {
    let late = false;
    const timer = setTimeout(() => {
      late = true;
      reject(unavailable(`the files of dataset "${dataset}" could not be fetched from the object store within the query time limit (P_QUERY_TIMEOUT); retry later`, 5));
    }, Math.max(0, deadline - Date.now()));
    pending.then(
      (snap) => {
        clearTimeout(timer);
        if (late) snap.release();
        else resolve(snap);
      },
      (err: unknown) => {
        clearTimeout(timer);
        if (!late) reject(err);
      },
    );
  });
}

/**
 * Runs user SQL: plan and check it (sandbox), authorise every dataset it names, take a consistent
 * snapshot of each (storage's scan seam), and hand the statement with one view per dataset to a query
 * worker process, under the time limit. The snapshot is held until the answer ends.
 */
/** What reading a worker's messages after the first needs (see `start` and `rest`). */
interface Started {
  iterator: AsyncIterator<FromWorker>;
  exec: { ack: () => void };
  cleanup: () => void;
  setAside: (damaged: { name: string; reason: string }[] | undefined) => Promise<boolean>;
}

/** Parsing shares the storage DuckDB: under memory or descriptor pressure a query is retried later (503), not a 500. */
function shortOf(err: unknown): never {
  const message = err instanceof Error && !isDomainError(err) ? err.message : '';
  const lack = /^(Out of Memory Error|IO Error)/.test(message) ? classifyFailure(err) : 'other';
  if (lack === 'memory' || lack === 'files') throw unavailable(`the service is short of ${lack === 'memory' ? 'memory' : 'file descriptors'} to plan this query; retry later`, 2);
  throw err;
}

export class QueryExecutor implements SqlQueries, PgQueries {
  private readonly plans: PlanCache;
  /** PostgreSQL statements' trees (parsePg), which plan() uses rather than parse the text again. */
  private readonly trees: ParsedTrees;
  /** PostgreSQL catalog statements, on the same workers under the same admission and limits. */
  readonly catalog: CatalogQueries;

  constructor(
    private readonly duck: DuckDBSource,
    private readonly source: TableSource,
    private readonly pool: QueryPool,
    private readonly limits: QueryLimits,
    planCacheBytes: number,
  ) {
    this.plans = new PlanCache(planCacheBytes);
    this.trees = new ParsedTrees(Math.max(1 << 20, planCacheBytes / 4));
    this.catalog = new CatalogQueries(pool, limits, (sql) => this.parsePg(sql));
  }

  /**
   * A PostgreSQL statement's one parse by DuckDB's parser, in the service (issue 35): the worker
   * classifies and checks it from this tree instead of parsing it again, and the sandbox plans a data
   * statement of the same text from it (its own parser made it). After the same size checks as plan().
   */
  async parsePg(sql: string): Promise<string> {
    const known = this.trees.get(sql);
    if (known !== undefined) return known;
    checkSqlText(sql, this.limits);
    const tree = await withConnection(this.duck, (conn) => serializeSql(conn, sql, 'pg')).catch(shortOf);
    this.trees.set(sql, tree);
    return tree;
  }

  async plan(sql: string): Promise<QueryPlan> {
    const cached = this.plans.get(sql);
    planCacheLookups.inc({ result: cached ? 'hit' : 'miss' });
    if (cached) return cached;
    const plan = await withConnection(this.duck, (conn) => planStatement(conn, sql, this.limits, this.trees.get(sql))).catch(shortOf);
    this.plans.set(sql, plan);
    return plan;
  }

  /**
   * The time range a statement's own WHERE gives its dataset (see timeRange.ts), for callers with no
   * range of their own; the whole range when it gives none. Checked by the sandbox first. `params`:
   * the values bound to its `$n` (a bound comes from them, so file pruning follows the values).
   */
  async timeRange(sql: string, params?: readonly BoundParam[]): Promise<TimeRange> {
    const plan = await this.plan(sql);
    const tree = plan.rangeTree;
    if (tree === undefined) return WHOLE_RANGE;
    const columns = new Map<string, string>();
    const lower = sql.toLowerCase();
    for (const table of plan.tables) {
      const meta = await this.source.resolve(table, true);
      // A statement that never names the time column has no condition on it: nothing to evaluate.
      if (meta && lower.includes(meta.timeColumn.toLowerCase())) columns.set(table.toLowerCase(), meta.timeColumn);
    }
    if (!columns.size) return WHOLE_RANGE;
    // The sandbox's parse (kept with the plan): the statement is not parsed again here.
    return withConnection(this.duck, (conn) => timeRangeOf(conn, parseTree(tree), columns, params));
  }

  /**
   * Runs the query; when DuckDB finds data files it cannot decode before any row is answered, they are
   * set aside (storage decides how: on S3 a cached copy is first downloaded again) and the query runs
   * again without them, so the good rows stay readable. A few times at most.
   */
  async execute(req: QueryRequest): Promise<QueryAnswer> {
    return this.retryDamaged(() => this.executeOnce(req));
  }

  /** Runs `run` again while it finds damaged files (set aside each time), a few times at most. */
  private async retryDamaged<T>(run: () => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await run();
      } catch (err) {
        if (!(err instanceof DamagedFilesFound)) throw err;
        if (attempt >= MAX_DAMAGE_RETRIES) throw err.error;
      }
    }
  }

  private async executeOnce(req: QueryRequest): Promise<QueryAnswer> {
    const run = await this.start(req);
    const { first: m, iterator, cleanup } = run;
    try {
      if (m.type === 'answer') {
        // The whole answer in one message: the worker is already free.
        await iterator.return?.();
        cleanup();
        const text = m.text;
        return { fields: m.fields, chunks: (async function* () { if (text) yield text; })() };
      }
      if (m.type !== 'fields') throw new DomainError('storage', `unexpected message from the query worker: ${m.type}`);
      return { fields: m.fields, chunks: this.rest(run, (e) => (e.type === 'chunk' ? e.text : undefined)) };
    } catch (err) {
      await iterator.return?.();
      cleanup();
      throw err;
    }
  }

  /**
   * The same statement path for the PostgreSQL front door: rows come as DataRow messages, each result
   * column in the format code the client asked for. Always streamed (as `streaming=true` over HTTP: no
   * row or byte limit, only the time limit); a batch is acknowledged to the worker when the consumer
   * asks for the next, so a slow reader holds the worker, not memory.
   */
  async executePg(req: Omit<QueryRequest, 'sendNull' | 'timeFormat' | 'streaming'>, formats: number[]): Promise<PgAnswer> {
    const run = await this.retryDamaged(() => this.start({ ...req, sendNull: true, timeFormat: 'iso', streaming: true }, formats));
    const { first: m, iterator, exec, cleanup } = run;
    if (m.type === 'answer' && m.pgTypes && m.data) {
      // A small result run whole: the worker is already free.
      await iterator.return?.();
      cleanup();
      const data = Buffer.from(m.data.buffer, m.data.byteOffset, m.data.byteLength);
      const rows = m.rows;
      return { fields: m.fields, types: m.pgTypes, batches: (async function* () { if (rows) yield { data, rows }; })(), cancel: () => undefined };
    }
    if (m.type !== 'fields' || !m.pgTypes) {
      await iterator.return?.();
      cleanup();
      throw new DomainError('storage', `unexpected message from the query worker: ${m.type}`);
    }
    const batches = this.rest(run, (e) => (e.type === 'rows' ? { data: Buffer.from(e.data.buffer, e.data.byteOffset, e.data.byteLength), rows: e.rows } : undefined));
    return { fields: m.fields, types: m.pgTypes, batches, cancel: (reason) => exec.cancel(reason) };
  }

  /**
   * The worker's messages after the first, as the items `pick` makes of its data messages (JSON chunks
   * or DataRow batches), each acknowledged when the consumer asks for the next, so a slow reader holds
   * the worker, not memory. A damaged file found once rows were answered is set aside for the next
   * query and fails this one.
   */
  private rest<T>({ iterator, exec, cleanup, setAside }: Started, pick: (e: FromWorker) => T | undefined): AsyncIterable<T> {
    return {
      [Symbol.asyncIterator]: async function* () {
        try {
          for (;;) {
            const next = await iterator.next();
            if (next.done) return;
            const e = next.value;
            if (e.type === 'done') return;
            if (e.type === 'error') {
              await setAside(e.damaged);
              throw new DomainError(e.kind, e.message);
            }
            const item = pick(e);
            if (item === undefined) continue;
            yield item;
            exec.ack();
          }
        } finally {
          await iterator.return?.();
          cleanup();
        }
      },
    };
  }

  /**
   * The datasets' own names; permission before existence: a key that may not read a name gets the same
   * answer whether a dataset of that name exists or not.
   */
  private async readable(tables: string[], canRead: (name: string) => boolean): Promise<string[]> {
    const names: string[] = [];
    for (const table of tables) {
      const meta = await this.source.resolve(table, true);
      if (!canRead(table) && !(meta && canRead(meta.name))) throw forbidden(`this API key may not read dataset "${table}"`);
      if (!meta) throw notFound(`dataset "${table}" does not exist`);
      names.push(meta.name);
    }
    return names;
  }

  /** Plans, authorises, snapshots and hands the statement to a worker; resolves with its first message. */
  private async start(req: QueryRequest, pgFormats?: number[]) {
    const plan = await this.plan(req.sql);
    const names = await this.readable(plan.tables, req.canRead);

    const releases: (() => void)[] = [];
    const releaseAll = () => {
      for (const r of releases.splice(0)) r();
    };
    // The time limit covers the whole query: taking the snapshots (on S3, downloading the files) too.
    // Waiting for a query slot is bounded on its own (the pool's queue wait) and not counted.
    const started = Date.now();
    try {
      const snapshots: Snapshot[] = [];
      for (const name of new Set(names)) {
        const snap = await withinDeadline(this.source.snapshot(name, req.startMs, req.endMs), started + this.limits.timeoutMs, name);
        releases.push(snap.release);
        snapshots.push(req.files ? { ...snap, files: snap.files.filter(req.files) } : snap);
      }
      const preparedMs = Date.now() - started;
      const sql = preAggregatedSql(plan.preAggregated, snapshots) ?? req.sql;
      /** Sets aside the files a worker named as damaged; true when there were any. */
      const setAside = async (damaged: { name: string; reason: string }[] | undefined): Promise<boolean> => {
        if (!damaged?.length) return false;
        for (const snap of snapshots) {
          for (const f of snap.files) {
            const d = damaged.find((x) => x.name === linkName(f.path));
            if (d) await this.source.setAsideDamaged(snap.meta.name, f.key, d.reason);
          }
        }
        return true;
      };
      const wholeRows = Math.min(this.limits.maxRows, MATERIALIZE_MAX_ROWS);
      const materialize = (!req.streaming || pgFormats !== undefined) && plan.rowBound !== undefined && plan.rowBound <= wholeRows;
      // A buffered answer the parse tree does not bound is still run whole when it turns out that small.
      const wholeUpTo = !materialize && !req.streaming && pgFormats === undefined ? wholeRows : undefined;
      const build = (filesDir: string) => {
        // The worker's DuckDB parses the text it runs (the executor's own prepare): counted as handed over.
        countParses('execute');
        return runJob(req, snapshots, sql, filesDir, { ...this.limits, materialize, wholeUpTo, pgFormats });
      };
      const exec = await this.pool.run(req.principalId, build);
      const release = holdToLimits(exec, { timeoutMs: this.limits.timeoutMs - preparedMs, timeoutMessage: timeLimitMessage(this.limits.timeoutMs), signal: req.signal });
      const cleanup = () => {
        release();
        releaseAll();
      };
      const iterator = exec.events[Symbol.asyncIterator]();
      try {
        const first = await iterator.next();
        const m = first.value;
        if (first.done || !m) throw new DomainError('unavailable', 'the query worker ended without an answer', 1);
        if (m.type === 'error') {
          const error = new DomainError(m.kind, m.message);
          throw (await setAside(m.damaged)) ? new DamagedFilesFound(error) : error;
        }
        return { first: m, iterator, exec, cleanup, setAside };
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
