/**
 * Fixed-cost probe for profiling (not part of `npm run bench`): ingests PROBE_EVENTS events, waits for
 * Parquet, then sends PROBE_QUERIES sequential one-row queries and prints the median client time and the
 * median of the service's own `p-time-elapsed` (the rest is HTTP on both sides).
 */
import * as path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { api, fmt, listFiles, median, post, sendAll, startService, waitFlushed } from './lib.ts';
import { makeLogEvents } from './logs.ts';

const EVENTS = Number(process.env.PROBE_EVENTS ?? 100_000);
const QUERIES = Number(process.env.PROBE_QUERIES ?? 300);
const SQL = process.env.PROBE_SQL ?? 'SELECT 1 AS one FROM bench_logs LIMIT 1';
const events = makeLogEvents(EVENTS, 42);
const bodies: string[] = [];
for (let i = 0; i < events.length; i += 1000) bodies.push(JSON.stringify(events.slice(i, i + 1000)));
const server = await startService({ P_FLUSH_INTERVAL: '1s', ...(process.env.PROBE_ENV ? JSON.parse(process.env.PROBE_ENV) : {}) });
/** One query through the lean bench client: client time and the service's own `p-time-elapsed`. */
const query = async (body: string) => {
  const t = performance.now();
  const res = await post(server.port, '/api/v1/query', body);
  if (res.status !== 200) throw new Error(`query failed ${res.status}: ${res.body}`);
  return { ms: performance.now() - t, elapsed: Number(res.headers['p-time-elapsed']) * 1000 };
};
try {
  await api(server.port, 'PUT', '/api/v1/logstream/bench_logs');
  await sendAll(server.port, '/api/v1/logstream/bench_logs', bodies, 4);
  await waitFlushed(server.port, 'bench_logs');
  const body = JSON.stringify({ query: SQL, startTime: '2000-01-01T00:00:00Z', endTime: '2100-01-01T00:00:00Z' });
  const ms: number[] = [];
  const elapsed: number[] = [];
  for (let i = 0; i < QUERIES; i++) {
    const r = await query(body);
    if (i >= 20) {
      ms.push(r.ms);
      elapsed.push(r.elapsed);
    }
  }
  // The same statement on DuckDB directly (default threads), over the same files.
  const files = await listFiles(path.join(server.dataDir, 'store', 'bench_logs'), '.parquet');
  const conn = await (await DuckDBInstance.create(':memory:')).connect();
  const direct: number[] = [];
  const directSql = SQL.replace('bench_logs', `read_parquet([${files.map((f) => `'${f}'`).join(', ')}], hive_partitioning = false)`);
  for (let i = 0; i < QUERIES; i++) {
    const t = performance.now();
    (await conn.runAndReadAll(directSql)).getRowObjectsJson();
    if (i >= 20) direct.push(performance.now() - t);
  }
  conn.closeSync();
  console.log(`direct DuckDB ${fmt(median(direct), 2)} ms over ${files.length} files`);
  console.log(`one-row query: client ${fmt(median(ms), 2)} ms, service p-time-elapsed ${fmt(median(elapsed), 2)} ms (median of ${ms.length})`);
} finally {
  await server.stop();
}
