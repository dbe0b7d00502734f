/**
 * Trace by id over many spans: the service's Jaeger API (trace-id index + time window) beside the same
 * lookup as plain SQL through the service without the index, DuckDB reading the very same Parquet files
 * directly, and Jaeger v1.76's in-memory store fed the same spans. Also how many files a lookup reads
 * with the index and without it (the index's selectivity, computed with the service's own filter code).
 * Then one search (a service and a span tag, the last hour, 20 traces) asked of Jaeger's API on both, of
 * the Tempo API as TraceQL, and of DuckDB as SQL on the same files.
 *
 * `npx tsx bench/traces.ts` (default 200,000 spans, a few minutes on 2 cores); `--spans 1000000` or
 * BENCH_TRACE_SPANS=1000000 for 1M.
 */
import { DuckDBInstance } from '@duckdb/node-api';
import { startJaeger } from '../test/helpers/jaeger.ts';
import { bloomMayHold, buildTraceBloom } from '../src/storage/files/traceIndex.ts';
import { BENCH_KEY, fmt, listFiles, median, post, rng, runIfMain, startService, waitFlushed } from './lib.ts';

const argSpans = process.argv.indexOf('--spans');
const SPANS = Number(argSpans > 0 ? process.argv[argSpans + 1] : (process.env.BENCH_TRACE_SPANS ?? 200_000));
const SPANS_PER_TRACE = 10;
const TRACES_PER_REQUEST = 200;
const SERVICES = ['frontend', 'checkout', 'billing', 'inventory', 'shipping'];
const LOOKUPS = 15;

const hex = (r: () => number, bytes: number) => Array.from({ length: bytes }, () => Math.floor(r() * 256).toString(16).padStart(2, '0')).join('');
const kv = (key: string, v: string) => ({ key, value: { stringValue: v } });

/** OTLP/JSON requests of `traces` traces of SPANS_PER_TRACE spans over five services, spread over the last hour. */
function requests(traces: number, r: () => number): { bodies: string[]; ids: string[] } {
  const now = BigInt(Date.now()) * 1_000_000n;
  const bodies: string[] = [];
  const ids: string[] = [];
  for (let t0 = 0; t0 < traces; t0 += TRACES_PER_REQUEST) {
    const byService = new Map<string, unknown[]>(SERVICES.map((s) => [s, []]));
    for (let t = t0; t < Math.min(traces, t0 + TRACES_PER_REQUEST); t++) {
      const traceId = hex(r, 16);
      ids.push(traceId);
      // The hour before now, in the order sent (as a live system's spans arrive).
      const start = now - 3_600_000_000_000n + (BigInt(t) * 3_600_000_000_000n) / BigInt(traces);
      let parent: string | undefined;
      for (let i = 0; i < SPANS_PER_TRACE; i++) {
        const spanId = hex(r, 8);
        const s = start + BigInt(i) * 1_000_000n;
        byService.get(SERVICES[i % SERVICES.length])!.push({
          traceId, spanId, ...(parent ? { parentSpanId: parent } : {}), name: `op-${i % 4}`, kind: i === 0 ? 2 : 3,
          startTimeUnixNano: String(s), endTimeUnixNano: String(s + BigInt(Math.floor(r() * 5e6))), attributes: [kv('http.route', `/r/${i}`)],
        });
        parent = spanId;
      }
    }
    bodies.push(JSON.stringify({ resourceSpans: [...byService].map(([service, spans]) => ({ resource: { attributes: [kv('service.name', service), kv('host.name', `${service}-1`)] }, scopeSpans: [{ scope: { name: 'bench' }, spans }] })) }));
  }
  return { bodies, ids };
}

async function timed(run: () => Promise<void>): Promise<number> {
  const t = performance.now();
  await run();
  return performance.now() - t;
}

async function ok(res: Response, what: string): Promise<void> {
  if (!res.ok) throw new Error(`${what}: ${res.status} ${await res.text()}`);
  await res.arrayBuffer();
}

export async function benchTraces(): Promise<string[][]> {
  const { bodies, ids } = requests(Math.ceil(SPANS / SPANS_PER_TRACE), rng(33));
  // Flushes every 2 s: many files, as a store holding an hour of spans from a live system has.
  const service = await startService({ P_FLUSH_INTERVAL: '2s', P_QUERY_TIMEOUT: '300s' });
  const jaeger = await startJaeger();
  try {
    for (const b of bodies) {
      const res = await post(service.port, '/v1/traces', b);
      if (res.status !== 200) throw new Error(`OTLP to the service: ${res.status} ${res.body}`);
      await ok(await fetch(`${jaeger.otlpUrl}/v1/traces`, { method: 'POST', body: b, headers: { 'content-type': 'application/json' } }), 'OTLP to Jaeger');
    }
    await waitFlushed(service.port, 'otel_traces', 600_000);
    const files = await listFiles(service.dataDir, '.parquet');
    const duck = await (await DuckDBInstance.create(':memory:')).connect();
    const list = `[${files.map((f) => `'${f}'`).join(', ')}]`;
    // The service's own filter, per file, from the file's ids: how many files a lookup reads with it.
    const blooms: string[] = [];
    for (const f of files) blooms.push(buildTraceBloom((await duck.runAndReadAll(`SELECT DISTINCT span_trace_id FROM read_parquet('${f}')`)).getRows().map(([id]) => String(id))));
    const picks = Array.from({ length: LOOKUPS }, (_, i) => ids[Math.floor(((i + 0.5) * ids.length) / LOOKUPS)]);
    const t = { ours: [] as number[], sql: [] as number[], duck: [] as number[], jaeger: [] as number[], filesRead: [] as number[] };
    const auth = { 'x-api-key': BENCH_KEY };
    for (const id of picks) {
      t.filesRead.push(blooms.filter((b) => bloomMayHold(b, [id])).length);
      t.ours.push(await timed(async () => ok(await fetch(`http://127.0.0.1:${service.port}/jaeger/api/traces/${id}`, { headers: auth }), 'service trace by id')));
      const sql = JSON.stringify({ query: `SELECT * FROM otel_traces WHERE span_trace_id = '${id}'`, startTime: '2d', endTime: 'now' });
      t.sql.push(await timed(async () => ok(await fetch(`http://127.0.0.1:${service.port}/api/v1/query`, { method: 'POST', body: sql, headers: { ...auth, 'content-type': 'application/json' } }), 'service SQL')));
      t.duck.push(await timed(async () => void (await duck.runAndReadAll(`SELECT * FROM read_parquet(${list}, union_by_name = true) WHERE span_trace_id = '${id}'`))));
      t.jaeger.push(await timed(async () => ok(await fetch(`${jaeger.queryUrl}/api/traces/${id}`), 'Jaeger trace by id')));
    }
    const search = await searches(service.port, jaeger.queryUrl, duck, list);
    return [
      [`trace by id, ${fmt(SPANS)} spans (${fmt(ids.length)} traces, ${files.length} Parquet files), median of ${LOOKUPS}`, 'ms'],
      ['service /jaeger/api/traces/{id} (trace-id index, lookback window)', fmt(median(t.ours), 1)],
      ['service SQL WHERE span_trace_id = … (no index: every file of the window)', fmt(median(t.sql), 1)],
      ['DuckDB on the same Parquet files directly (every file)', fmt(median(t.duck), 1)],
      ['Jaeger v1.76 in-memory store, same spans', fmt(median(t.jaeger), 1)],
      ['files read per lookup with the index (median; without: every file)', `${median(t.filesRead)} of ${files.length}`],
      ...search,
    ];
  } finally {
    await jaeger.stop();
    await service.stop();
  }
}

/** One search, service "checkout" and span tag http.route=/r/1 over the last hour, 20 traces: median of LOOKUPS each. */
async function searches(port: number, jaegerUrl: string, duck: Awaited<ReturnType<Awaited<ReturnType<typeof DuckDBInstance.create>>['connect']>>, list: string): Promise<string[][]> {
  const auth = { 'x-api-key': BENCH_KEY };
  const endUs = Date.now() * 1000;
  const jaegerQuery = `service=checkout&tags=${encodeURIComponent(JSON.stringify({ 'http.route': '/r/1' }))}&limit=20&start=${endUs - 3_600_000_000 - 60_000_000}&end=${endUs}`;
  const traceql = encodeURIComponent('{ resource.service.name = "checkout" && span.http.route = "/r/1" }');
  const tempoQuery = `q=${traceql}&limit=20&start=${Math.floor(endUs / 1e6) - 3660}&end=${Math.ceil(endUs / 1e6)}`;
  const sql = `SELECT DISTINCT span_trace_id FROM read_parquet(${list}, union_by_name = true) WHERE "service.name" = 'checkout' AND "http.route" = '/r/1' LIMIT 20`;
  const t = { ours: [] as number[], tempo: [] as number[], duck: [] as number[], jaeger: [] as number[] };
  for (let i = 0; i < LOOKUPS; i++) {
    t.ours.push(await timed(async () => ok(await fetch(`http://127.0.0.1:${port}/jaeger/api/traces?${jaegerQuery}`, { headers: auth }), 'service Jaeger search')));
    t.tempo.push(await timed(async () => ok(await fetch(`http://127.0.0.1:${port}/tempo/api/search?${tempoQuery}`, { headers: auth }), 'service TraceQL search')));
    t.duck.push(await timed(async () => void (await duck.runAndReadAll(sql))));
    t.jaeger.push(await timed(async () => ok(await fetch(`${jaegerUrl}/api/traces?${jaegerQuery}`), 'Jaeger search')));
  }
  // The same 20 traces found by each (not an empty answer timed fast).
  const count = async (url: string, headers: Record<string, string>, key: string) => ((await (await fetch(url, { headers })).json()) as Record<string, unknown[]>)[key]!.length;
  const found = [await count(`http://127.0.0.1:${port}/jaeger/api/traces?${jaegerQuery}`, auth, 'data'), await count(`http://127.0.0.1:${port}/tempo/api/search?${tempoQuery}`, auth, 'traces'), (await duck.runAndReadAll(sql)).getRows().length, await count(`${jaegerUrl}/api/traces?${jaegerQuery}`, {}, 'data')];
  if (found.some((n) => n !== 20)) throw new Error(`search: traces found by service Jaeger API, Tempo API, DuckDB, Jaeger: ${found.join(', ')} (expected 20 each)`);
  return [
    ['search: service checkout, span tag http.route=/r/1, last hour, 20 traces (median)', 'ms'],
    ['service /jaeger/api/traces?service=&tags= (whole traces)', fmt(median(t.ours), 1)],
    ['service /tempo/api/search, the same as TraceQL (trace summaries)', fmt(median(t.tempo), 1)],
    ['DuckDB on the same Parquet files, the trace ids by SQL', fmt(median(t.duck), 1)],
    ['Jaeger v1.76 in-memory store, /api/traces?service=&tags= (whole traces)', fmt(median(t.jaeger), 1)],
  ];
}

runIfMain(import.meta.filename, benchTraces);
