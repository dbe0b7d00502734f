/**
 * Small SQL on an idle worker (issue 37): the answers a console asks for most, over a dataset with
 * recent per-minute files, beside DuckDB running the same statement on the same files in this process.
 *
 * - `count, last 15 min`: `SELECT count(*)` with the range of the last 15 minutes, taken afresh for
 *   every query (as a client asking "the last 15 minutes" does, so no two ranges are equal);
 * - `histogram, last 15 min`: the console's Explore histogram (console/src/lib/sql.ts `histogramSql`
 *   around its default query, 15 s buckets as autoBucketSeconds picks for 15 minutes), same ranges;
 * - `count, fixed range`: the count with one range repeated, for reference.
 *
 * Client time is a keep-alive HTTP POST (bench/lib.ts `post`); `p-time-elapsed` is the service's own
 * time. DuckDB direct reads the dataset's files (all of them: events span the last 20 minutes) with the
 * range as a WHERE, one connection, default threads. Median of BENCH_SMALL_SQL_QUERIES after a warm-up.
 * Alone: `npx tsx bench/smallSql.ts` (prints the load average before and after).
 */
import * as os from 'node:os';
import * as path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { defaultQuery, histogramSql } from '../console/src/lib/sql.ts';
import { BENCH_KEY, fmt, listFiles, median, post, runIfMain, sendAll, settle, startService, waitFlushed } from './lib.ts';

const QUERIES = Number(process.env.BENCH_SMALL_SQL_QUERIES ?? 200);
const WARMUP = 20;
const MINUTES = 20;
const PER_MINUTE = 2000;
const DATASET = 'small_sql';

/** Events of the last MINUTES minutes, one body per minute (so the flush writes a file per minute). */
function bodies(now: number): string[] {
  const out: string[] = [];
  for (let m = MINUTES; m >= 1; m--) {
    const base = now - m * 60_000;
    const events = Array.from({ length: PER_MINUTE }, (_, i) => ({
      time: new Date(base + Math.floor((i * 60_000) / PER_MINUTE)).toISOString(),
      level: i % 7 ? 'info' : 'error',
      service: `svc-${i % 13}`,
      latency_ms: (i * 7919) % 1000,
      message: `request ${m * PER_MINUTE + i}`,
    }));
    out.push(JSON.stringify(events));
  }
  return out;
}

interface Case {
  name: string;
  sql: string;
  /** The range of one query: [startMs, endMs). */
  range: () => [number, number];
}

const last15 = (): [number, number] => [Date.now() - 15 * 60_000, Date.now()];

/** Median client ms and service ms of QUERIES queries (after WARMUP), and the rows of the last one. */
async function timeService(port: number, c: Case): Promise<{ client: number; service: number; body: string }> {
  const client: number[] = [];
  const service: number[] = [];
  let body = '';
  for (let i = 0; i < WARMUP + QUERIES; i++) {
    const [s, e] = c.range();
    const req = JSON.stringify({ query: c.sql, startTime: new Date(s).toISOString(), endTime: new Date(e).toISOString() });
    const t = performance.now();
    const res = await post(port, '/api/v1/query', req);
    const ms = performance.now() - t;
    if (res.status !== 200) throw new Error(`${c.name}: ${res.status} ${res.body.slice(0, 300)}`);
    body = res.body;
    if (i < WARMUP) continue;
    client.push(ms);
    service.push(Number(res.headers['p-time-elapsed']) * 1000);
  }
  return { client: median(client), service: median(service), body };
}

/** The same statement on DuckDB directly over the files, the range as a WHERE on the time column. */
async function timeDirect(files: string[], c: Case): Promise<{ ms: number; rows: unknown }> {
  const conn = await (await DuckDBInstance.create(':memory:')).connect();
  try {
    const scan = `read_parquet([${files.map((f) => `'${f}'`).join(', ')}], hive_partitioning = false)`;
    const ms: number[] = [];
    let rows: unknown;
    for (let i = 0; i < WARMUP + QUERIES; i++) {
      const [s, e] = c.range();
      const from = `(SELECT * FROM ${scan} WHERE "time" >= '${new Date(s).toISOString()}'::TIMESTAMP AND "time" < '${new Date(e).toISOString()}'::TIMESTAMP)`;
      const sql = c.sql.replaceAll(DATASET, from);
      const t = performance.now();
      rows = (await conn.runAndReadAll(sql)).getRowObjectsJson();
      if (i >= WARMUP) ms.push(performance.now() - t);
    }
    return { ms: median(ms), rows };
  } finally {
    conn.closeSync();
  }
}

export async function benchSmallSql(): Promise<string[][]> {
  const server = await startService({ P_FLUSH_INTERVAL: '1s' });
  try {
    const res = await fetch(`http://127.0.0.1:${server.port}/api/v1/logstream/${DATASET}`, { method: 'PUT', headers: { 'x-api-key': BENCH_KEY, 'x-p-time-partition': 'time' } });
    if (!res.ok) throw new Error(`create ${DATASET}: ${res.status} ${await res.text()}`);
    const now = Date.now();
    await sendAll(server.port, `/api/v1/logstream/${DATASET}`, bodies(now), 1);
    await waitFlushed(server.port, DATASET);
    await settle(server.pid);
    const files = await listFiles(path.join(server.dataDir, 'store', DATASET), '.parquet');
    const fixedStart = now - 15 * 60_000;
    const cases: Case[] = [
      { name: 'count, last 15 min', sql: `SELECT count(*) AS n FROM ${DATASET}`, range: last15 },
      { name: 'histogram, last 15 min', sql: histogramSql({ query: defaultQuery(DATASET, 'time') }, 'time', 15), range: last15 },
      { name: 'count, fixed range', sql: `SELECT count(*) AS n FROM ${DATASET}`, range: () => [fixedStart, now] },
    ];
    const rows = [['query', 'client ms', 'service ms (p-time-elapsed)', `DuckDB direct ms (${files.length} files)`, 'client / DuckDB']];
    for (const c of cases) {
      const svc = await timeService(server.port, c);
      const direct = await timeDirect(files, c);
      // The fixed range's answer is the same at any time: the service's must equal DuckDB's.
      if (c.name.includes('fixed') && JSON.stringify(JSON.parse(svc.body)) !== JSON.stringify(JSON.parse(JSON.stringify(direct.rows), (_k, v: unknown) => (typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v)))) {
        throw new Error(`${c.name}: the service answered ${svc.body}, DuckDB ${JSON.stringify(direct.rows)}`);
      }
      rows.push([c.name, fmt(svc.client, 2), fmt(svc.service, 2), fmt(direct.ms, 2), `${fmt(svc.client / direct.ms, 1)}×`]);
    }
    rows.push(['load average (1 min) after', fmt(os.loadavg()[0], 2), '', '', '']);
    return rows;
  } finally {
    await server.stop();
  }
}

runIfMain(import.meta.filename, async () => {
  console.log(`load average before: ${os.loadavg().map((l) => fmt(l, 2)).join(' ')}`);
  return benchSmallSql();
});
