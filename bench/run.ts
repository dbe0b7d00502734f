/**
 * `npm run bench`: starts the service and measures it through HTTP, next to the physical limit
 * measured in the same run (DuckDB reading the very same Parquet files directly).
 */
import * as path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import * as os from 'node:os';
import { api, fmt, listFiles, median, post, sendAll, settle, startService, threadCpu, waitFlushed, watchTree } from './lib.ts';
import { bareHttpRate, duckdbParquetRate, fsyncRate, isolatedHttpRoundTripMs, jsonParseRate } from './limits.ts';
import { makeLogEvents } from './logs.ts';
import { benchOtel } from './otel.ts';
import { benchOtlpLogs } from './otlpLogs.ts';
import { benchOtlpGrpc } from './otlpGrpc.ts';
import { benchS3 } from './s3.ts';
import { benchPgWire } from './pgwire.ts';
import { benchTimeField } from './timeField.ts';
import { benchIceberg } from './iceberg.ts';
import { benchMemory } from './memory.ts';
import { benchPromql } from './promql.ts';
import { benchDashboard } from './dashboard.ts';
import { benchTraces } from './traces.ts';
import { benchFirstQuery } from './firstQuery.ts';
import { benchSmallSql } from './smallSql.ts';
import { benchShippers } from './shippers.ts';
import { benchTraceql } from './traceql.ts';
import { benchContainer } from './container.ts';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 1_000_000);
const BATCH = 1000;
const CLIENTS = Number(process.env.BENCH_CLIENTS ?? 8);
const SINGLE_EVENTS = Number(process.env.BENCH_SINGLE_EVENTS ?? 20_000);
const SINGLE_CLIENTS = 32;

const QUERIES: [string, string][] = [
  ['count', 'SELECT count(*) AS n FROM {t}'],
  ['by level', 'SELECT level, count(*) AS n FROM {t} GROUP BY level ORDER BY n DESC'],
  ['top error paths', 'SELECT http_path, count(*) AS errors FROM {t} WHERE http_status >= 500 GROUP BY http_path ORDER BY errors DESC LIMIT 5'],
  ['p95 latency/service', 'SELECT service, quantile_cont(http_latency_ms, 0.95) AS p95 FROM {t} GROUP BY service ORDER BY service'],
  ['search + limit', "SELECT time, service, message FROM {t} WHERE message LIKE '%timeout%' AND service = 'checkout' ORDER BY time DESC LIMIT 100"],
  ['per-minute histogram', "SELECT date_trunc('minute', p_timestamp) AS minute, count(*) AS n FROM {t} GROUP BY 1 ORDER BY 1"],
];

/**
 * The JSON bodies of `count` events in batches of `batch`. The events themselves are dropped once
 * serialised: kept alive, a million objects made every full GC of the load generator — which shares
 * the cores with the service — mark them again.
 */
function batchBodies(count: number, batch: number): string[] {
  const events = makeLogEvents(count, 42);
  const bodies: string[] = [];
  for (let i = 0; i < events.length; i += batch) bodies.push(JSON.stringify(events.slice(i, i + batch)));
  return bodies;
}

/** CPU seconds (user + system) this process used since `start` (a `process.cpuUsage()`). */
function cpuSecSince(start: NodeJS.CpuUsage): number {
  const u = process.cpuUsage(start);
  return (u.user + u.system) / 1e6;
}

function table(rows: string[][]): void {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  for (const r of rows) console.log(`  ${r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ')}`);
}

async function main(): Promise<void> {
  console.log(`# telemetry lakehouse benchmark (${new Date().toISOString()})`);
  console.log(`machine: ${(await import('node:os')).cpus().length} cores, node ${process.version}\n`);

  console.log(`generating ${fmt(EVENTS)} log events…`);
  const bodies = batchBodies(EVENTS, BATCH);
  const rawBytes = bodies.reduce((s, b) => s + Buffer.byteLength(b), 0);
  const singles = makeLogEvents(SINGLE_EVENTS, 7).map((e) => JSON.stringify(e));

  // The load generator sends prepared bytes, so that it spends its CPU on HTTP, not on encoding.
  const bodyBytes = bodies.map((b) => Buffer.from(b));

  console.log('\n## Limits of this machine (measured now, for the ratios below)');
  const parse = jsonParseRate(bodyBytes, BATCH);
  const fsyncLarge = await fsyncRate(os.tmpdir(), 1024 * 1024, 2);
  const fsyncSmall = await fsyncRate(os.tmpdir(), 4096, 2);
  const bare = await bareHttpRate(singles, SINGLE_CLIENTS);
  const duckEvents = Math.min(EVENTS, 200_000);
  const duck = await duckdbParquetRate(bodies.slice(0, duckEvents / BATCH), duckEvents);
  const hop = await isolatedHttpRoundTripMs();
  // The least CPU any design that validates each body (JSON.parse) and has DuckDB write the Parquet can
  // spend per event; with every core doing nothing else (no load generator, no HTTP, no WAL), the rate
  // that leaves.
  const cores = os.cpus().length;
  const floorCpu = 1e6 / parse.eventsPerSec + duck.cpuSecPerMillion;
  table([
    ['limit', 'value'],
    ['JSON.parse of the batch bodies, 1 core', `${fmt(parse.eventsPerSec)} events/s (${fmt(parse.mbPerSec)} MB/s)`],
    ['sequential write + fdatasync, 1 MiB each', `${fmt(fsyncLarge.mbPerSec)} MB/s`],
    ['sequential write + fdatasync, 4 KiB each', `${fmt(fsyncSmall.commitsPerSec)} commits/s`],
    [`bare node:http server, single events, ${SINGLE_CLIENTS} clients`, `${fmt(bare)} requests/s`],
    ['DuckDB alone: NDJSON → ZSTD Parquet', `${fmt(duck.eventsPerSec)} events/s (${fmt(duck.cpuSecPerMillion, 1)} CPU s/1M events)`],
    [`JSON.parse + DuckDB's Parquet CPU: ingest ceiling on ${cores} cores`, `${fmt(floorCpu, 1)} CPU s/1M events → ${fmt((cores / floorCpu) * 1e6)} events/s`],
    ['HTTP POST + one process round trip (IPC), bare', `${fmt(hop, 2)} ms`],
  ]);

  const server = await startService({ P_FLUSH_INTERVAL: '5s' });
  try {
    await api(server.port, 'PUT', '/api/v1/logstream/bench_logs');
    await api(server.port, 'PUT', '/api/v1/logstream/bench_single');
    await settle(server.pid);

    console.log('\n## JSON ingestion through HTTP (acknowledged = fsynced in the WAL)');
    // Peak RSS and CPU of the service's whole process tree (main thread, ingest worker threads, DuckDB
    // threads, and the query worker processes), from the first request until the WAL is in Parquet.
    let watch = watchTree(server.pid);
    // The load generator's CPU (this process: sending, and sampling the service's tree) shares the
    // machine's cores with the service, so it is part of what limits the rates below.
    let clientCpu = process.cpuUsage();
    const secs = await sendAll(server.port, '/api/v1/logstream/bench_logs', bodyBytes, CLIENTS);
    const batchClient = cpuSecSince(clientCpu);
    const flushStart = performance.now();
    await waitFlushed(server.port, 'bench_logs');
    const flushSecs = (performance.now() - flushStart) / 1000;
    const batchUse = await watch.stop();
    watch = watchTree(server.pid);
    clientCpu = process.cpuUsage();
    const single = await sendAll(server.port, '/api/v1/logstream/bench_single', singles, SINGLE_CLIENTS);
    const singleClient = cpuSecSince(clientCpu);
    await waitFlushed(server.port, 'bench_single');
    const singleUse = await watch.stop();
    const mb = (n: number) => `${fmt(n / 1e6)} MB`;
    table([
      ['case', 'events', 'seconds', 'events/s', 'MB/s', 'vs limit', 'CPU s/1M events', 'peak RSS: tree (main) PSS tree'],
      [
        `batches of ${BATCH}, ${CLIENTS} clients`,
        fmt(EVENTS),
        fmt(secs, 2),
        fmt(EVENTS / secs),
        fmt(rawBytes / secs / 1e6, 1),
        `${fmt(EVENTS / secs / parse.eventsPerSec, 2)} × JSON.parse`,
        fmt((batchUse.cpuSec / EVENTS) * 1e6, 1),
        `${mb(batchUse.peakTreeRss)} (${mb(batchUse.peakMainRss)}) ${mb(batchUse.peakTreePss)}`,
      ],
      [
        `batches of 1, ${SINGLE_CLIENTS} clients`,
        fmt(SINGLE_EVENTS),
        fmt(single, 2),
        fmt(SINGLE_EVENTS / single),
        fmt(singles.reduce((s, b) => s + b.length, 0) / single / 1e6, 1),
        `${fmt(SINGLE_EVENTS / single / bare, 2)} × bare HTTP`,
        fmt((singleUse.cpuSec / SINGLE_EVENTS) * 1e6, 1),
        `${mb(singleUse.peakTreeRss)} (${mb(singleUse.peakMainRss)}) ${mb(singleUse.peakTreePss)}`,
      ],
    ]);
    if (process.env.BENCH_THREADS === '1') {
      // Where the CPU went, per thread of the service (and per query worker process), for profiling.
      for (const [label, use] of [['batches', batchUse], ['single', singleUse]] as const) {
        console.log(`  ${label} CPU by thread: ${threadCpu(use.byThread)}`);
      }
    }
    console.log(
      `  CPU: the service's process tree from the first request until the WAL is in Parquet (flush included); JSON.parse alone costs ` +
        `${fmt(1e6 / parse.eventsPerSec, 1)} s/1M events. RSS: main process (with ingest and DuckDB threads) plus query worker processes; PSS counts the pages they share (node, DuckDB's library) once.`,
    );
    const clientPerMillion = (batchClient / EVENTS) * 1e6;
    console.log(
      `  load generator (same cores): ${fmt(clientPerMillion, 1)} CPU s/1M events in batches, ${fmt((singleClient / SINGLE_EVENTS) * 1e6, 1)} µs per single-event request. ` +
        `With it, the ingest ceiling above (JSON.parse + DuckDB) on ${cores} cores is ${fmt((cores / (floorCpu + clientPerMillion)) * 1e6)} events/s.`,
    );
    console.log(`\nall WAL data in Parquet ${fmt(flushSecs, 1)} s after the last acknowledgement`);
    const stats = (await api(server.port, 'GET', '/api/v1/logstream/bench_logs/stats')) as { ingestion: { count: number; size: number }; storage: { size: number; files: number } };
    console.log(
      `stored: ${fmt(stats.storage.size / 1e6, 1)} MB in ${stats.storage.files} Parquet files for ${fmt(rawBytes / 1e6, 1)} MB of raw JSON → ` +
        `stored/raw = 1/${fmt(rawBytes / stats.storage.size, 1)} (${fmt(stats.storage.size / stats.ingestion.count, 1)} bytes/event)`,
    );

    // Medians of interleaved runs (service, then direct), so a machine busy with something else
    // weighs on both sides alike; more runs than the ingest figures, since one query takes milliseconds.
    const queryRuns = Number(process.env.BENCH_QUERY_RUNS ?? 11);
    console.log(`\n## Query latency over ${fmt(EVENTS)} events (median of ${queryRuns}; HTTP vs DuckDB direct on the same files)`);
    const files = await listFiles(path.join(server.dataDir, 'store', 'bench_logs'), '.parquet');
    const direct = await DuckDBInstance.create(':memory:', { threads: '2' });
    const conn = await direct.connect();
    const fileList = `read_parquet([${files.map((f) => `'${f}'`).join(', ')}], hive_partitioning = false)`;
    const measure = async (sql: string): Promise<{ service: number; direct: number }> => {
      const body = { query: sql.replaceAll('{t}', 'bench_logs'), startTime: '2000-01-01T00:00:00Z', endTime: '2100-01-01T00:00:00Z' };
      const viaHttp: number[] = [];
      const viaDirect: number[] = [];
      for (let i = 0; i <= queryRuns; i++) {
        let t = performance.now();
        const res = await post(server.port, '/api/v1/query', JSON.stringify(body));
        if (res.status !== 200) throw new Error(`query failed: ${res.body}`);
        if (i > 0) viaHttp.push(performance.now() - t);
        t = performance.now();
        const reader = await conn.runAndReadAll(sql.replaceAll('{t}', fileList));
        reader.getRowObjectsJson();
        if (i > 0) viaDirect.push(performance.now() - t);
      }
      return { service: median(viaHttp), direct: median(viaDirect) };
    };
    // The fixed cost of a query through the service (HTTP, sandbox check, snapshot, worker process,
    // result conversion): a query that reads one row, minus the same query on DuckDB directly.
    const fixed = await measure('SELECT 1 AS one FROM {t} LIMIT 1');
    const rows: string[][] = [['query', 'service ms', 'direct ms', 'ratio']];
    rows.push(['(fixed cost: one row)', fmt(fixed.service, 1), fmt(fixed.direct, 1), `+${fmt(fixed.service - fixed.direct, 1)} ms`]);
    // What the service adds beyond the isolation floor (HTTP + a process hop, measured above).
    rows.push(['(… beyond HTTP + process hop)', '', '', `+${fmt(fixed.service - fixed.direct - hop, 1)} ms`]);
    const ratios: number[] = [];
    for (const [label, sql] of QUERIES) {
      const m = await measure(sql);
      const ratio = m.service / m.direct;
      ratios.push(ratio);
      rows.push([label, fmt(m.service, 1), fmt(m.direct, 1), `${fmt(ratio, 2)}×`]);
    }
    table(rows);
    console.log(`  geometric mean ratio: ${fmt(Math.exp(ratios.reduce((s, r) => s + Math.log(r), 0) / ratios.length), 2)}×  (files: ${files.length})`);
    conn.closeSync();
  } finally {
    await server.stop();
  }

  await runPhases(bodies);
}

/** Prints a bench's rows: several tables when separated by empty rows. */
function tables(rows: string[][]): void {
  while (rows.length) {
    const cut = rows.findIndex((r) => r.length === 0);
    table(cut < 0 ? rows : rows.slice(0, cut));
    rows = cut < 0 ? [] : rows.slice(cut + 1);
    if (rows.length) console.log('');
  }
}

/**
 * The phases after the JSON ones, each skippable with BENCH_SKIP_<name>=1: [name, title (printed
 * before; none when the phase prints its own), run]. A phase that fails is reported and the others
 * still run, so that one run gives every figure it can; the run then exits 1.
 */
function phases(bodies: string[]): [string, string, () => Promise<string[][] | void>][] {
  return [
    ['OTEL', 'OTLP and Prometheus remote write through HTTP (8 clients, 1,000 records per request)', benchOtel],
    ['OTEL', 'OTLP over gRPC beside OTLP/HTTP protobuf (8 in flight, 1,000 records per request)', benchOtlpGrpc],
    ['OTEL', 'OTLP/JSON logs: CPU per record (flush included), in rounds, beside JSON.parse and DuckDB on the same data', benchOtlpLogs],
    ['SHIPPERS', "Log shippers' doors beside the JSON endpoint on the same events (8 clients, 1,000 events per request)", benchShippers],
    ['TIME', 'JSON ingestion with event time: a time field, times inferred in strings, against neither (docs/time.md)', benchTimeField],
    ['ICEBERG', 'Iceberg lake (docs/lake.md): publish cost on vs off, lake files per commit, ack → pyiceberg; Spark local beside our SQL', benchIceberg],
    ['S3', '', () => benchS3(bodies, EVENTS, QUERIES)],
    ['PG', 'PostgreSQL wire protocol vs HTTP streaming vs DuckDB on the same files', benchPgWire],
    ['MEMORY', '', async () => void (await benchMemory())],
    ['CONTAINER', 'JSON ingestion inside a 512 MiB memory cgroup (the whole process tree; defaults sized from it), beside JSON.parse of the same bodies; three runs', benchContainer],
    ['FIRST_QUERY', 'The first query after a quiet period (query workers start on first use) vs a running worker', benchFirstQuery],
    ['SMALL_SQL', 'Small SQL on an idle worker (issue 37): a count and the console histogram over the last 15 minutes, beside DuckDB on the same files', benchSmallSql],
    ['PROMQL', 'PromQL query_range and labels/series, beside Prometheus 2.42 holding the same samples', benchPromql],
    ['TRACEQL', 'TraceQL search and trace by id through the Tempo API, beside DuckDB running the same SQL on the same files (BENCH_TRACEQL_SPANS)', benchTraceql],
    ['DASHBOARD', 'PromQL dashboards on a small install (issue 37), beside Prometheus 2.42 holding the same samples', benchDashboard],
    ['TRACES', 'Trace by id (Jaeger API) beside SQL without the index, DuckDB on the same files, and Jaeger v1.76 in memory', benchTraces],
  ];
}

async function runPhases(bodies: string[]): Promise<void> {
  const failed: string[] = [];
  for (const [name, title, run] of phases(bodies)) {
    if (process.env[`BENCH_SKIP_${name}`] === '1') continue;
    if (title) console.log(`\n## ${title}`);
    try {
      const rows = await run();
      if (rows) tables(rows);
    } catch (err) {
      console.error(`phase ${name} failed:`, err);
      failed.push(`${name}${title ? ` (${title.split(':')[0]})` : ''}`);
    }
  }
  if (failed.length) {
    console.error(`\n${failed.length} phase(s) failed: ${failed.join('; ')}`);
    process.exitCode = 1;
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
