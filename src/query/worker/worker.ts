/**
 * A query worker process: runs user SQL in a DuckDB instance of its own, so that a query can be
 * stopped for good (the service kills the process), cannot use the service's memory, event loop or
 * libuv thread pool, and cannot reach any file but the ones its datasets were granted.
 *
 * The second line of the sandbox (the first is `sandbox.ts`): this DuckDB may open files only in the
 * worker's own directory, which holds, during a query, hard links to exactly the Parquet files and WAL
 * segments of the datasets that query was allowed to read (kept for the next query only while it
 * needs them; a PromQL job, whose DuckDB runs only the service's SQL, also keeps the links of the other
 * file sets the worker holds: linkDir.ts). External access (other files, URLs, extensions) is off and the configuration locked
 * before any user SQL.
 *
 * One query at a time, on one long-lived connection: a dataset's temporary view is created only when
 * its SQL (files, and which of them straddle the range's bounds) differs from the previous query's, and
 * views the query was not granted are dropped before it runs. An SQL job's range is not in its views'
 * text but in two session variables set before the statement (RANGE_VARIABLES; in the statement's
 * own native call when it runs whole over unchanged views, session.ts), so "the last 15
 * minutes" asked again keeps the view. (Creating a view binds its Parquet scan, on top of the user
 * query's own bind: a fresh range's setup took 1.4–1.7 ms over 15 minute files, 0.8–1 ms with the
 * variables, docs/performance.md.) Only SELECT reaches here (sandbox.ts), so no query leaves anything
 * else behind.
 *
 * Environment: QW_DIR (file directory), QW_SPILL (spill directory), QW_THREADS, QW_MEMORY, QW_NICE.
 */
import * as fs from 'node:fs/promises';
import { classifyFailure } from '../../failures.ts';
import * as os from 'node:os';
import * as path from 'node:path';
import { DuckDBInstance, quotedString, type DuckDBConnection, type DuckDBMaterializedResult } from '@duckdb/node-api';
import { DomainError, type ErrorKind } from '../../errors.ts';
import { DIALECT_SQL } from '../sql/dialect.ts';
import { STREAM_WINDOW, type FromWorker, type RunJob, type ToWorker } from './protocol.ts';
import { deliverGrant, runPromql, useWorkerSide } from './promqlJob.ts';
import { clientColumnName, rowWriter, valueConverter } from '../results/json.ts';
import { dataRowEncoder, RowWriter } from '../results/pg.ts';
import { pgTypeOf } from '../results/pgTypes.ts';
import { leaveWorkerCgroup } from './cgroup.ts';
import { LinkDir } from './linkDir.ts';
import { RangeSession, readWholeError, runBounded, runWholeBound, streamOne } from './session.ts';
import { runCatalog } from '../catalog/inWorker.ts';
import { FileTables } from './fileTables.ts';

const dir = process.env.QW_DIR!;
const spill = process.env.QW_SPILL!;
const send = (m: FromWorker) => process.send!(m);

async function openSandboxed(): Promise<DuckDBInstance> {
  await fs.mkdir(dir, { recursive: true });
  await fs.mkdir(spill, { recursive: true });
  const instance = await DuckDBInstance.create(':memory:', { threads: process.env.QW_THREADS ?? '1' });
  const conn = await instance.connect();
  try {
    for (const stmt of DIALECT_SQL) await conn.run(stmt);
    await conn.run(`SET memory_limit = ${quotedString(process.env.QW_MEMORY ?? '1GB')}`);
    await conn.run(`SET temp_directory = ${quotedString(spill)}`);
    await conn.run(`SET allowed_directories = [${quotedString(`${dir}/`)}]`);
    await conn.run('SET enable_external_access = false');
    await conn.run('SET autoinstall_known_extensions = false');
    await conn.run('SET autoload_known_extensions = false');
    // The same link name always points at the same immutable file, so footers may be cached.
    await conn.run('SET parquet_metadata_cache = true');
    // Memory goes back after a job, as in the storage DuckDB (src/duckdb.ts): DuckDB hands its
    // allocator's free memory to the OS after any task that peaked over 16 MiB (default 128 MiB). A
    // PromQL job's sample-cache load kept ~20 MB of freed memory in the allocator otherwise, held until
    // the worker exited (docs/memory.md, issue 18's workload).
    await conn.run(`SET allocator_flush_threshold = '16MiB'`);
    await conn.run(`SET allocator_bulk_deallocation_flush_threshold = '16MiB'`);
    await conn.run('SET allocator_background_threads = true');
    await conn.run('SET lock_configuration = true');
  } finally {
    conn.closeSync();
  }
  return instance;
}

/**
 * Queries yield the cores to ingestion: every thread of this process (the event loop, libuv's pool
 * that DuckDB's calls run on, DuckDB's own threads) gets a lower priority, and threads started later
 * inherit it. Done only once started, so that starting a worker while queries run is quick. (On Linux
 * a priority is per thread, hence the walk over /proc/self/task.)
 */
async function lowerPriority(nice: number): Promise<void> {
  const tids = await fs.readdir('/proc/self/task').catch(() => [String(process.pid)]);
  for (const tid of tids) {
    try {
      os.setPriority(Number(tid), nice);
    } catch {
      /* not permitted, or the thread ended: it keeps the service's priority */
    }
  }
}

/** The files this worker's DuckDB may open (linkDir.ts). */
const links = new LinkDir(dir);

/** The connection's temporary views, by quoted name → the SQL they were created with. */
const views = new Map<string, string>();

/** Whether the connection's temporary views are exactly these already. */
function viewsAre(wanted: RunJob['views']): boolean {
  return wanted.length === views.size && wanted.every((v) => views.get(v.name) === v.sql);
}

/** Makes the connection's temporary views exactly the job's: dropped, created or kept as they are. */
async function syncViews(conn: DuckDBConnection, wanted: RunJob['views']): Promise<void> {
  const want = new Map(wanted.map((v) => [v.name, v.sql]));
  for (const name of [...views.keys()]) {
    if (want.has(name)) continue;
    views.delete(name);
    await conn.run(`DROP VIEW IF EXISTS ${name}`);
  }
  for (const [name, sql] of want) {
    if (views.get(name) === sql) continue;
    views.delete(name);
    await conn.run(`CREATE OR REPLACE TEMP VIEW ${name} AS ${sql}`);
    views.set(name, sql);
  }
}

/** The connection's range variables (one connection per worker). */
const session = new RangeSession();

/** Small files' rows kept between queries (fileTables.ts). */
const fileTables = new FileTables();

/** DuckDB messages name files by their link path: show neither the data directory nor link names. */
function cleanMessage(message: string): string {
  return message.replaceAll(`${dir}/`, '').replaceAll(dir, '').replaceAll(spill, '');
}

/** Errors of a stored file that cannot be read: the service's fault, not the query's. */
const FILE_ERROR = /^IO Error|not a parquet file|No magic bytes|Corrupt|Malformed JSON in file|Failed to read file|TProtocolException|Decompression|decompress|Page sizes|Invalid Error/i;

function errorKind(message: string): ErrorKind {
  // A lack of descriptors or disk is not a damaged file: it passes (503). (Only DuckDB's own error
  // types are read: a message may quote the user's SQL.)
  if (/^IO Error/.test(message) && ['files', 'disk', 'io'].includes(classifyFailure(new Error(message)))) return 'unavailable';
  if (FILE_ERROR.test(message)) return 'storage';
  return 'invalid';
}

/**
 * Parquet files of the job DuckDB cannot read, after an error that looks like a file's: each file the
 * message names, else every linked Parquet file, read whole on its own (every column decoded). Only a
 * file that fails that read is reported, so the service sets exactly the damaged ones aside and serves
 * the rest; a message alone (a query can raise any text with error()) never sets a sound file aside.
 */
async function damagedFiles(conn: DuckDBConnection, job: RunJob, message: string): Promise<{ name: string; reason: string }[]> {
  if (!FILE_ERROR.test(message)) return [];
  const parquet = job.links.filter((l) => l.name.endsWith('.parquet'));
  const named = parquet.filter((l) => message.includes(`${dir}/${l.name}`));
  const out: { name: string; reason: string }[] = [];
  for (const l of named.length ? named : parquet) {
    const err = await readWholeError(conn, path.join(dir, l.name));
    if (err) out.push({ name: l.name, reason: cleanMessage(err.message) });
  }
  return out;
}

/**
 * Flow control of the streamed query under way. (A query is never cancelled in here: the service
 * kills the whole process, the only way to stop DuckDB's optimiser.)
 */
let current: { id: number; acked: number; sent: number; wake?: () => void } | undefined;

async function run(conn: DuckDBConnection, job: RunJob): Promise<void> {
  const state: NonNullable<typeof current> = (current = { id: job.id, acked: 0, sent: 0 });
  try {
    await links.sync(job.links);
    await fileTables.sync(conn, job.fileTables);
    // A statement run whole with its views as they are sets its range in its own call (runWhole).
    const rangeLater = (job.materialize || job.wholeUpTo !== undefined) && viewsAre(job.views);
    if (!rangeLater) await session.set(conn, job.range);
    await syncViews(conn, job.views);
    if (job.pgFormats) await runPgRows(conn, job, job.pgFormats, state);
    else if (job.materialize) sendWhole(job, await session.runWhole(conn, job.sql, job.range));
    else {
      const whole = job.wholeUpTo === undefined ? undefined : await runBounded(session, conn, job.sql, job.range, job.wholeUpTo);
      if (whole) sendWhole(job, whole);
      else {
        await session.set(conn, job.range);
        await runStreamed(conn, job, state);
      }
    }
  } catch (err) {
    if (err instanceof DomainError) send({ type: 'error', id: job.id, kind: err.kind, message: err.message });
    else {
      const raw = (err as Error).message;
      const message = cleanMessage(raw);
      const damaged = await damagedFiles(conn, job, raw).catch(() => []);
      send({ type: 'error', id: job.id, kind: errorKind(message), message, ...(damaged.length ? { damaged } : {}) });
    }
  } finally {
    current = undefined;
  }
}

const tooManyRows = (job: RunJob) => new DomainError('too_large', `the result has more than ${job.maxRows} rows (P_QUERY_MAX_ROWS): add a LIMIT, aggregate, or ask for streaming=true`);
const tooManyBytes = (job: RunJob) =>
  new DomainError('too_large', `the result is larger than ${job.maxBytes} bytes (P_QUERY_MAX_RESULT_BYTES): add a LIMIT, select fewer columns, or ask for streaming=true`);

/**
 * A result run whole in one call: a statement the parse tree proves small (see `rowBound` in
 * sandbox.ts), or one that turned out small under `wholeUpTo` (runBounded, session.ts). A streamed
 * result costs a second bind of the statement (DuckDB rebinds a prepared Parquet scan when it executes
 * it; measured ~0.7 ms) and a native call per chunk. Materialised results are outside DuckDB's memory
 * limit, hence only for bounded ones. One message carries the whole answer.
 */
function sendWhole(job: RunJob, result: DuckDBMaterializedResult): void {
  if (result.rowCount > job.maxRows) throw tooManyRows(job);
  const fields = result.columnNames().map(clientColumnName);
  const write = rowWriter(fields, job.sendNull);
  const convert = valueConverter(job.timeFormat);
  let text = '';
  for (let c = 0; c < result.chunkCount; c++) {
    const chunk = result.getChunk(c);
    for (let i = 0; i < chunk.rowCount; i++) {
      text += (text ? ',' : '') + write(chunk.convertRowValues(i, convert));
      if (text.length > job.maxBytes) throw tooManyBytes(job);
    }
  }
  send({ type: 'answer', id: job.id, fields, types: result.columnTypes().map((t) => t.toString()), text, rows: result.rowCount });
}

/**
 * Any other statement, streamed out of DuckDB chunk by chunk. A buffered answer (not `streaming`) still
 * goes back as one message at the end: the HTTP side answers only then anyway, and a message per chunk
 * cost a wake-up of both processes each (measured ~0.3 ms per small query).
 */
async function runStreamed(conn: DuckDBConnection, job: RunJob, state: NonNullable<typeof current>): Promise<void> {
  const result = await streamOne(conn, job.sql);
  const fields = result.columnNames().map(clientColumnName);
  const types = result.columnTypes().map((t) => t.toString());
  if (job.streaming) send({ type: 'fields', id: job.id, fields, types });
  const write = rowWriter(fields, job.sendNull);
  const convert = valueConverter(job.timeFormat);
  const parts: string[] = [];
  let rows = 0;
  let bytes = 0;
  for await (const batch of result.yieldConvertedRows(convert)) {
    if (!batch.length) continue;
    rows += batch.length;
    if (!job.streaming && rows > job.maxRows) throw tooManyRows(job);
    let text = '';
    for (let i = 0; i < batch.length; i++) text += (i ? ',' : '') + write(batch[i]);
    bytes += text.length;
    if (!job.streaming) {
      if (bytes > job.maxBytes) throw tooManyBytes(job);
      parts.push(text);
      continue;
    }
    send({ type: 'chunk', id: job.id, text, rows: batch.length });
    state.sent++;
    // Streams wait for the HTTP side to catch up, so a slow client holds at most a window of chunks.
    while (state.sent - state.acked > STREAM_WINDOW) await new Promise<void>((r) => (state.wake = r));
  }
  if (job.streaming) send({ type: 'done', id: job.id, rows });
  else send({ type: 'answer', id: job.id, fields, types, text: parts.join(','), rows });
}

/**
 * A statement for the PostgreSQL front door: rows encoded as DataRow messages here, one message per
 * DuckDB chunk, under the same window of unacknowledged chunks as a streamed HTTP answer (the front
 * door acknowledges a chunk once the socket took it, so a slow reader holds the worker, not memory).
 */
async function runPgRows(conn: DuckDBConnection, job: RunJob, formats: number[], state: NonNullable<typeof current>): Promise<void> {
  if (job.materialize) {
    // A result the parse tree proves small (as for HTTP, see runMaterialized): run whole, one message.
    const whole = job.params ? await runWholeBound(session, conn, job.sql, job.range, job.params) : await session.runWhole(conn, job.sql, job.range);
    const wholeTypes = whole.columnTypes();
    const encodeAll = dataRowEncoder(wholeTypes, formats);
    const w = new RowWriter();
    for (let c = 0; c < whole.chunkCount; c++) for (const row of whole.getChunk(c).getRows()) encodeAll(w, row);
    send({ type: 'answer', id: job.id, fields: whole.columnNames(), types: wholeTypes.map((t) => t.toString()), pgTypes: wholeTypes.map(pgTypeOf), text: '', data: w.take(), rows: whole.rowCount });
    return;
  }
  const result = await streamOne(conn, job.sql, job.params);
  const columnTypes = result.columnTypes();
  send({ type: 'fields', id: job.id, fields: result.columnNames(), types: columnTypes.map((t) => t.toString()), pgTypes: columnTypes.map(pgTypeOf) });
  const encode = dataRowEncoder(columnTypes, formats);
  const out = new RowWriter();
  let rows = 0;
  for (;;) {
    const chunk = await result.fetchChunk();
    if (!chunk || chunk.rowCount === 0) break;
    const batch = chunk.getRows();
    for (const row of batch) encode(out, row);
    rows += batch.length;
    send({ type: 'rows', id: job.id, data: out.take(), rows: batch.length });
    state.sent++;
    while (state.sent - state.acked > STREAM_WINDOW) await new Promise<void>((r) => (state.wake = r));
  }
  send({ type: 'done', id: job.id, rows });
}

async function main(): Promise<void> {
  // Whenever it ends by itself (the service gone, even by kill -9, closes the channel, at any point of
  // the start too), a worker leaves its cgroup and removes it; a SIGKILL from the service or the kernel
  // leaves it to the service.
  process.on('exit', () => leaveWorkerCgroup());
  useWorkerSide({ dir, send, links, syncViews, cleanMessage, errorKind });
  const instance = await openSandboxed();
  const conn = await instance.connect();
  let queue = Promise.resolve();
  process.on('message', (m: ToWorker) => {
    if (m.type === 'run') queue = queue.then(() => run(conn, m));
    else if (m.type === 'promql') queue = queue.then(() => runPromql(conn, m));
    else if (m.type === 'catalog') queue = queue.then(() => runCatalog(m, send));
    else if (m.type === 'grant') deliverGrant(m);
    else if (current && current.id === m.id) {
      current.acked++;
      current.wake?.();
      current.wake = undefined;
    }
  });
  // The service going away (even by kill -9) closes the channel: never outlive it.
  process.on('disconnect', () => process.exit(0));
  await lowerPriority(Number(process.env.QW_NICE ?? 10));
  send({ type: 'ready' });
}

main().catch((err) => {
  process.stderr.write(`query worker failed to start: ${(err as Error).message}\n`);
  process.exit(1);
});
