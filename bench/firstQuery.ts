/**
 * What starting query workers on first use costs (issue 18: an idle service holds no query process).
 * The first query after a quiet period waits for a worker process to start (and a PromQL query also
 * for the PromQL engine's WebAssembly to load in it); the reference, measured in the same run, is the
 * same query on a worker that is already up. Run alone: `npx tsx bench/firstQuery.ts`.
 */
import snappy from 'snappy';
import { WriteRequestV1 } from '../src/ingest/prometheus/decode.ts';
import { BENCH_KEY, api, fmt, median, post, runIfMain, sendAll, settle, startService, waitFlushed } from './lib.ts';

const ROUNDS = Number(process.env.BENCH_FIRST_QUERY_ROUNDS ?? 5);

/** Query worker processes the service runs now, from its /metrics. */
async function queryWorkers(port: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { 'X-API-Key': BENCH_KEY } })).text();
  let n = 0;
  for (const m of text.matchAll(/^lakehouse_query_workers\{state="\w+"\} (\d+)/gm)) n += Number(m[1]);
  return n;
}

async function untilNoWorkers(port: number): Promise<void> {
  for (let i = 0; (await queryWorkers(port)) > 0; i++) {
    if (i > 600) throw new Error('query workers were not let go');
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function timed(run: () => Promise<{ status: number; body: string }>): Promise<number> {
  const t = performance.now();
  const res = await run();
  if (res.status !== 200) throw new Error(`query failed ${res.status}: ${res.body.slice(0, 300)}`);
  return performance.now() - t;
}

/** Rows: SQL and PromQL, first query on no worker (cold) vs on a running one (warm), median ms of ROUNDS. */
export async function benchFirstQuery(): Promise<string[][]> {
  // A short quiet period so each round starts cold soon; what a first query costs does not depend on it.
  const server = await startService({ P_QUERY_WORKER_IDLE: '1s', P_FLUSH_INTERVAL: '1s' });
  try {
    await settle(server.pid);
    await api(server.port, 'PUT', '/api/v1/logstream/fq');
    const bodies = Array.from({ length: 20 }, (_, b) => JSON.stringify(Array.from({ length: 1000 }, (_, i) => ({ level: i % 7 ? 'info' : 'error', service: `svc-${i % 13}`, latency_ms: (i * 7919) % 1000, message: `request ${b * 1000 + i}` }))));
    await sendAll(server.port, '/api/v1/logstream/fq', bodies, 4);
    // 100 counters × 1 h at 15 s by remote write, for a PromQL range query.
    const end = Math.floor(Date.now() / 60_000) * 60_000 - 60_000;
    const start = end - 3_600_000;
    const timeseries = Array.from({ length: 100 }, (_, s) => ({
      labels: [{ name: '__name__', value: 'fq_requests_total' }, { name: 'instance', value: `i${s}` }, { name: 'service', value: `svc${s % 10}` }],
      samples: Array.from({ length: 241 }, (_, k) => ({ timestamp: start + k * 15_000, value: k * (s + 1) })),
    }));
    const write = snappy.compressSync(Buffer.from(WriteRequestV1.encode(WriteRequestV1.fromObject({ timeseries })).finish()));
    const w = await post(server.port, '/v1/prometheus/write?stream=fqm', write, { 'content-encoding': 'snappy', 'content-type': 'application/x-protobuf' });
    if (w.status !== 200) throw new Error(`remote write: ${w.status} ${w.body}`);
    await waitFlushed(server.port, 'fq');
    await waitFlushed(server.port, 'fqm');

    const range = { startTime: new Date(Date.now() - 3_600_000).toISOString(), endTime: new Date(Date.now() + 60_000).toISOString() };
    const sql = () => post(server.port, '/api/v1/query', JSON.stringify({ query: 'SELECT service, count(*) AS n FROM fq GROUP BY 1 ORDER BY 1', ...range }));
    const promPath = `/prometheus/fqm/api/v1/query_range?query=${encodeURIComponent('sum by (service) (rate(fq_requests_total[5m]))')}&start=${start / 1000}&end=${end / 1000}&step=60`;
    const promql = async () => {
      const res = await fetch(`http://127.0.0.1:${server.port}${promPath}`, { headers: { 'X-API-Key': BENCH_KEY } });
      return { status: res.status, body: await res.text() };
    };
    const t: Record<string, number[]> = { sqlCold: [], sqlWarm: [], promCold: [], promFirstOnWarm: [], promWarm: [] };
    for (let r = 0; r < ROUNDS; r++) {
      await untilNoWorkers(server.port);
      await settle(server.pid, 5_000);
      t.sqlCold.push(await timed(sql));
      // The spare worker the first query starts beside it has settled before the warm figures.
      await settle(server.pid, 5_000);
      t.sqlWarm.push(await timed(sql));
      t.promFirstOnWarm.push(await timed(promql));
      t.promWarm.push(await timed(promql));
      await untilNoWorkers(server.port);
      await settle(server.pid, 5_000);
      t.promCold.push(await timed(promql));
    }
    const ms = (xs: number[]) => fmt(median(xs), 1);
    return [
      [`first query after a quiet period (median of ${ROUNDS})`, 'cold: no worker, ms', 'warm: worker up, ms', 'cold − warm'],
      ['SQL: GROUP BY over 20,000 events', ms(t.sqlCold), ms(t.sqlWarm), `+${fmt(median(t.sqlCold) - median(t.sqlWarm), 0)} ms`],
      ['PromQL query_range: sum by rate, 100 series × 1 h', ms(t.promCold), ms(t.promWarm), `+${fmt(median(t.promCold) - median(t.promWarm), 0)} ms`],
      ['PromQL, first on a running worker (engine load only)', ms(t.promFirstOnWarm), ms(t.promWarm), `+${fmt(median(t.promFirstOnWarm) - median(t.promWarm), 0)} ms`],
    ];
  } finally {
    await server.stop();
  }
}

runIfMain(import.meta.filename, benchFirstQuery);
