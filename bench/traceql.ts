/**
 * TraceQL search and trace by id through the Tempo API (`/tempo/api/…`), beside DuckDB running the
 * same SQL statement (the one src/query/traceql/search.ts writes) directly on the very same Parquet
 * files. Spans arrive as OTLP/JSON: traces of 1–16 spans over four services, 5% errors.
 * Size: BENCH_TRACEQL_SPANS (default 100,000; `npx tsx bench/traceql.ts --1m` for 1,000,000).
 */
import * as path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { searchSql } from '../src/query/traceql/search.ts';
import { parseTraceql } from '../src/query/traceql/parse.ts';
import type { TraceSchema } from '../src/query/traceql/conditions.ts';
import type { ColumnType } from '../src/model.ts';
import { BENCH_KEY, fmt, listFiles, median, rng, runIfMain, sendAll, startService, waitFlushed } from './lib.ts';

const SPANS = process.argv.includes('--1m') ? 1_000_000 : Number(process.env.BENCH_TRACEQL_SPANS ?? 100_000);
const PER_REQUEST = 2000;
const RUNS = 7;
const DATASET = 'otel_traces';

const QUERIES = [
  '{ resource.service.name = "checkout" && status = error }',
  '{ span.http.status_code >= 500 } && { .service.name = "auth" }',
  '{ name =~ "GET /api/(cart|search)" && duration > 40ms }',
  '{ traceDuration > 100ms && rootServiceName = "search" }',
];

const services = ['checkout', 'cart', 'auth', 'search'];
const routes = ['/api/cart', '/api/checkout', '/api/login', '/api/search'];
const hex = (r: () => number, bytes: number) => Array.from({ length: bytes }, () => Math.floor(r() * 256).toString(16).padStart(2, '0')).join('');

/** OTLP/JSON bodies of `total` spans in traces of 1–16 spans, one service per resource, times within the last half hour. */
function bodies(total: number, seed: number, baseMs: number): { bodies: string[]; traceIds: string[] } {
  const r = rng(seed);
  const out: string[] = [];
  const traceIds: string[] = [];
  let made = 0;
  while (made < total) {
    const bySvc = new Map<string, unknown[]>();
    for (let n = 0; n < PER_REQUEST && made < total; ) {
      const traceId = hex(r, 16);
      traceIds.push(traceId);
      const size = Math.min(1 + Math.floor(r() * 16), total - made);
      const t0 = BigInt(baseMs + Math.floor((made / total) * 1_800_000)) * 1_000_000n;
      const rootId = hex(r, 8);
      for (let i = 0; i < size; i++, n++, made++) {
        const service = services[i === 0 ? Math.floor(r() * 4) : Math.floor(r() * 4)];
        const start = t0 + BigInt(i * 1_000_000);
        const status = r() < 0.05 ? 2 : 1;
        (bySvc.get(service) ?? bySvc.set(service, []).get(service)!).push({
          traceId,
          spanId: i === 0 ? rootId : hex(r, 8),
          parentSpanId: i === 0 ? '' : rootId,
          name: `GET ${routes[Math.floor(r() * 4)]}`,
          kind: i === 0 ? 2 : 3,
          startTimeUnixNano: String(start),
          endTimeUnixNano: String(start + BigInt(Math.floor(r() * 80_000_000))),
          attributes: [
            { key: 'http.method', value: { stringValue: 'GET' } },
            { key: 'http.status_code', value: { intValue: String(status === 2 ? 500 : 200) } },
          ],
          status: { code: status },
        });
      }
    }
    out.push(
      JSON.stringify({
        resourceSpans: [...bySvc].map(([service, spans]) => ({ resource: { attributes: [{ key: 'service.name', value: { stringValue: service } }] }, scopeSpans: [{ scope: { name: 'bench' }, spans }] })),
      }),
    );
  }
  return { bodies: out, traceIds };
}

async function get(port: number, p: string): Promise<number> {
  const t = performance.now();
  const res = await fetch(`http://127.0.0.1:${port}${p}`, { headers: { 'x-api-key': BENCH_KEY } });
  const text = await res.text();
  if (!res.ok) throw new Error(`${p} → ${res.status}: ${text}`);
  return performance.now() - t;
}

export async function benchTraceql(): Promise<string[][]> {
  const server = await startService();
  try {
    const baseMs = Date.now() - 1_900_000;
    const data = bodies(SPANS, 33, baseMs);
    const secs = await sendAll(server.port, '/v1/traces', data.bodies, 4, { 'x-p-stream': DATASET });
    await waitFlushed(server.port, DATASET, 600_000);
    const files = await listFiles(path.join(server.dataDir, 'store', DATASET), '.parquet');
    const direct = await DuckDBInstance.create(':memory:', { threads: '2' });
    const conn = await direct.connect();
    await conn.run(`CREATE VIEW ${DATASET} AS FROM read_parquet([${files.map((f) => `'${f}'`).join(', ')}], hive_partitioning = false)`);
    const described = (await conn.runAndReadAll(`DESCRIBE ${DATASET}`)).getRowObjectsJson() as { column_name: string; column_type: string }[];
    const schema: TraceSchema = { columns: Object.fromEntries(described.map((d) => [d.column_name, d.column_type as ColumnType])) };
    const range = `start=${Math.floor(baseMs / 1000) - 60}&end=${Math.ceil(Date.now() / 1000) + 60}`;
    const rows: string[][] = [[`${fmt(SPANS)} spans (${fmt(data.traceIds.length)} traces, ${files.length} files; sent in ${fmt(secs, 1)} s)`, 'service ms', 'DuckDB ms', 'ratio']];
    const measure = async (label: string, viaService: () => Promise<number>, sql: string) => {
      const s: number[] = [];
      const d: number[] = [];
      for (let i = 0; i <= RUNS; i++) {
        const a = await viaService();
        const t = performance.now();
        (await conn.runAndReadAll(sql)).getRowObjectsJson();
        if (i > 0) {
          s.push(a);
          d.push(performance.now() - t);
        }
      }
      rows.push([label, fmt(median(s), 1), fmt(median(d), 1), `${fmt(median(s) / median(d), 2)}×`]);
    };
    for (const q of QUERIES) {
      const { sql } = searchSql(parseTraceql(q), schema, { dataset: DATASET, limit: 20, spss: 3 });
      await measure(q, () => get(server.port, `/tempo/api/search?q=${encodeURIComponent(q)}&limit=20&spss=3&${range}`), sql);
    }
    const id = data.traceIds[Math.floor(data.traceIds.length / 2)];
    await measure('trace by id (JSON)', () => get(server.port, `/tempo/api/traces/${id}`), `SELECT * FROM ${DATASET} WHERE span_trace_id = '${id}'`);
    conn.closeSync();
    return rows;
  } finally {
    await server.stop();
  }
}

runIfMain(import.meta.filename, benchTraceql);
