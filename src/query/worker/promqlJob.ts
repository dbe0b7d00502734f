import * as path from 'node:path';
import type { DuckDBConnection, DuckDBMaterializedResult } from '@duckdb/node-api';
import { DomainError, type ErrorKind } from '../../errors.ts';
import type { FromWorker, PromqlFileSet, PromqlGrant, PromqlGrantMessage, PromqlJob, RunJob } from './protocol.ts';
import { HeldSets } from '../promql/grantSets.ts';
import { promqlEngine } from '../promql/engine.ts';
import { encodeSeries, seriesSql, type SeriesRequest } from '../promql/storage.ts';
import { SampleCache, type CachedFile } from '../promql/sampleCache.ts';
import { selectCached } from '../promql/cachedSelect.ts';
import { MergedRuns } from '../promql/mergedRuns.ts';
import { projectionOf, selectProjected, type Projection } from '../promql/labelProjection.ts';
import type { LinkDir } from './linkDir.ts';
import { readWholeError } from './session.ts';

/*
 * The PromQL side of a query worker (worker.ts runs it): the Go engine's jobs, the grants of files they
 * ask for, and the series of each selector from the sample cache and the grant's view.
 */

/** What a PromQL job uses of its worker process (worker.ts). */
export interface WorkerSide {
  /** The directory of links its DuckDB may open. */
  dir: string;
  send: (m: FromWorker) => void;
  links: LinkDir;
  syncViews: (conn: DuckDBConnection, wanted: RunJob['views']) => Promise<void>;
  cleanMessage: (message: string) => string;
  errorKind: (message: string) => ErrorKind;
}

let side: WorkerSide;

/** Sets the worker process's side (once, at its start). */
export function useWorkerSide(w: WorkerSide): void {
  side = w;
}

/** A grant the service sent: to the job that waits for it. */
export function deliverGrant(m: PromqlGrantMessage): void {
  if (promqlCurrent?.id === m.id) promqlCurrent.waiting?.(m);
}

/** The PromQL job under way: the files it was granted, and the grant it waits for. */
let promqlCurrent: { id: number; grant?: PromqlGrant; waiting?: (g: PromqlGrantMessage) => void; projection?: Projection } | undefined;

/** The file-set parts of grants this worker was sent lately (grantSets.ts): a grant may name one by id. */
const heldSets = new HeldSets<PromqlFileSet>();

/**
 * A PromQL job: the engine (Go, a child process of this one, promqlEngine.ts) evaluates it and calls back
 * for each selector's series.
 * The files come from the service on demand (`need` → `grant`) for the time range the engine asks for,
 * so a query over the last hour links only that hour's files. Fetches run one at a time on the one
 * connection.
 */
export async function runPromql(conn: DuckDBConnection, job: PromqlJob): Promise<void> {
  const state: NonNullable<typeof promqlCurrent> = (promqlCurrent = { id: job.id, projection: projectionOf(job.request) });
  try {
    // The pool counts the engine's memory with this process's, and kills it with this process.
    const evaluate = promqlEngine((pid) => side.send({ type: 'engine', pid }));
    let chain: Promise<unknown> = Promise.resolve();
    const fetch = (reqText: string): Promise<Uint8Array[]> => {
      const next = chain.then(() => selectSeries(conn, state, JSON.parse(reqText) as SeriesRequest));
      chain = next.catch(() => undefined);
      return next;
    };
    const json = await evaluate(job.request, fetch);
    side.send({ type: 'promql', id: job.id, json });
  } catch (err) {
    if (err instanceof DomainError) side.send({ type: 'error', id: job.id, kind: err.kind, message: err.message });
    else {
      const message = side.cleanMessage((err as Error).message);
      side.send({ type: 'error', id: job.id, kind: side.errorKind(message), message });
    }
  } finally {
    promqlCurrent = undefined;
  }
}

/** Asks the service for the files and view of [minMs, maxMs] (label sets only, or rows), and installs them. */
async function regrant(conn: DuckDBConnection, state: NonNullable<typeof promqlCurrent>, minMs: number, maxMs: number, labelsOnly: boolean, damaged?: string[]): Promise<PromqlGrant> {
  const granted = new Promise<PromqlGrantMessage>((resolve) => (state.waiting = resolve));
  side.send({ type: 'need', id: state.id, minMs, maxMs, labelsOnly, have: heldSets.ids(), ...(damaged ? { damaged } : {}) });
  const { set: sent, setId, ...range } = await granted;
  // Named by id only when this worker said it holds it, and nothing is dropped between need and grant.
  const set = heldSets.resolve({ setId, set: sent });
  if (!set) throw new DomainError('unavailable', 'the query worker lost the files of its grant; retry the query', 1);
  const grant = (state.grant = { ...range, ...set });
  await side.links.sync(grant.links, { setId, dataset: grant.dataset, held: heldSets.entries() });
  await side.syncViews(conn, grant.views);
  return grant;
}

/**
 * Stored files of a grant that DuckDB cannot read whole (each read on its own, every column decoded):
 * its series indexes, and (`data`) its Parquet files. Only a file's own error counts: a lack of
 * descriptors or disk while reading it says nothing of the file.
 */
async function unreadableFiles(conn: DuckDBConnection, grant: PromqlGrant, data: boolean): Promise<string[]> {
  const out: string[] = [];
  for (const l of grant.links.filter((x) => x.name.endsWith('.series') || (data && x.name.endsWith('.parquet')))) {
    const err = await readWholeError(conn, path.join(side.dir, l.name));
    if (err && side.errorKind(side.cleanMessage(err.message)) === 'storage') out.push(l.name);
  }
  return out;
}

/** This worker's decoded files, kept across PromQL jobs (sampleCache.ts). */
const sampleCache = new SampleCache();
/** Metric names' merged runs of the sets it holds (mergedRuns.ts), within a quarter of the cache's budget beside it. */
const mergedRuns = new MergedRuns();

/** A selector of one metric name over a grant's cached files: the name's merged run when it can have one. */
function mergedOr(grant: PromqlGrant, files: CachedFile[], req: SeriesRequest): CachedFile[] {
  const name = req.labelsOnly ? undefined : req.matchers.find((m) => m.type === '=' && m.name === '__name__');
  const merged = name && grant.cached ? mergedRuns.of(grant.cached, files, name.value, (grant.cacheBytes ?? 0) / 4) : undefined;
  return merged ? [merged] : files;
}

async function selectSeries(conn: DuckDBConnection, state: NonNullable<typeof promqlCurrent>, req: SeriesRequest): Promise<Uint8Array[]> {
  const read = async (g: PromqlGrant, withRegex: boolean) =>
    (await conn.run(seriesSql(g.views[0].name, g.timeColumn, g.stale, g.labels, req, withRegex, g.histogramColumns, g.hasValue ?? true))) as DuckDBMaterializedResult;
  const select = async (damaged?: string[]) => {
    let grant = state.grant;
    if (damaged || !grant || req.start < grant.minMs || req.end > grant.maxMs || (grant.labelsOnly === true) !== req.labelsOnly) {
      grant = await regrant(conn, state, Math.min(req.start, grant?.minMs ?? req.start), Math.max(req.end, grant?.maxMs ?? req.end), req.labelsOnly, damaged);
    }
    const g = grant;
    const cached = g.cached ? await sampleCache.get(conn, g.cached, side.dir, g, req.labelsOnly, g.cacheBytes ?? 0) : undefined;
    if (!g.views[0]) return { grant: g, cached };
    // A regular expression Go accepts but DuckDB's RE2 build does not: select without regex conditions
    // (the engine applies every matcher itself anyway).
    const result = await read(g, true).catch((err: Error) => {
      if (/regex|regular expression/i.test(err.message)) return read(g, false);
      throw err;
    });
    return { grant: g, result, cached };
  };
  const { grant, result, cached } = await select().catch(async (err: Error) => {
    // A stored file that cannot be read (when its view is made, read, or decoded into the cache): the
    // service sets it aside and grants again without it (a series index: its file is read instead).
    // The snapshot compared each file's size with the catalog's; this finds the rest (a file damaged
    // at the same size, or since the store last looked: src/storage/objects/recentSizes.ts).
    if (!state.grant || side.errorKind(side.cleanMessage(err.message)) !== 'storage') throw err;
    const damaged = await unreadableFiles(conn, state.grant, !req.labelsOnly);
    if (!damaged.length) throw err;
    return select(damaged);
  });
  const fromView = result ? encodeSeries(grant.labels.map((l) => l.label), result, req.labelsOnly) : undefined;
  if (!cached) return fromView ?? [new Uint8Array(4)]; // no series
  // The cache's series and the view's, in one answer (a label set in both is merged by the engine).
  const fromCache = state.projection && req.labelsOnly ? selectProjected(sampleCache, cached, req, state.projection) : selectCached(sampleCache, mergedOr(grant, cached, req), req);
  const viewCount = fromView ? new DataView(fromView[0].buffer, fromView[0].byteOffset, 4).getUint32(0, true) : 0;
  const count = new Uint8Array(4);
  new DataView(count.buffer).setUint32(0, fromCache.count + viewCount, true);
  return [count, ...fromCache.parts, ...(fromView?.slice(1) ?? [])];
}
