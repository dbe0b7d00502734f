/**
 * JSON ingestion with event time (docs/time.md) against the same events without it, in one run on one
 * service: CPU seconds of the service's process tree per million events, from the first request until
 * the WAL is in Parquet (flush included), as the main JSON figure is measured.
 *
 * - `reference`: the events' time under a name that is not time-like (`when`): stored as text;
 * - `inferred`: the same bodies as the time field's, in a dataset without a time field: `time` is
 *   typed TIMESTAMP by inference;
 * - `time field`: a dataset created with `X-P-Time-Partition: time`: every event's time checked and
 *   its files partitioned by it.
 *
 * Event times follow one another as closely as the receive times do (the whole set spans about as
 * long as it takes to send), so all three flush into as many minute partitions: a backfill spread
 * over hours writes more, smaller files per flush, which this does not measure.
 *
 * Other load on the machine moves the figures from round to round: the cases alternate within every
 * round (each round starting with the next case, so none always runs first), after an uncounted
 * warm-up of each, and each figure is the median of its rounds; "paired" is the median of the
 * per-round ratios, which cancels load that lasts a round. CPU seconds (not wall time) are counted,
 * split by thread: the ingest workers (named `ingest-worker`), the event loop, and the rest (DuckDB's
 * threads, V8's GC and compiler threads, libuv's pool).
 *
 * Alone: `npx tsx bench/timeField.ts` (BENCH_TIME_EVENTS, BENCH_TIME_ROUNDS), which also prints the
 * load average before and after.
 */
import * as os from 'node:os';
import * as path from 'node:path';
import { stampFromRequest } from '../src/ingest/json/jsonEvents.ts';
import { serializeJob, type IngestJob, type PlacementTarget } from '../src/ingest/worker/pipeline.ts';
import { emptySchema } from '../src/storage/dataset/schema.ts';
import { api, BENCH_KEY, fmt, median, sendAll, settle, startService, waitFlushed, watchTree, type BenchServer } from './lib.ts';
import { makeLogEvents } from './logs.ts';

const BATCH = 1000;
const CLIENTS = 8;

const CASES = ['reference', 'inferred', 'time field'] as const;
type Case = (typeof CASES)[number];

/** CPU seconds per million events of one round, by where they went. */
interface Round {
  total: number;
  workers: number;
  loop: number;
}

function bodies(count: number, key: string, startMs: number): Buffer[] {
  const events = makeLogEvents(count, 42).map((e, i) => {
    const { time: _t, ...rest } = e;
    // 10 µs apart: a million events span 10 s.
    return { [key]: new Date(startMs + Math.floor(i / 100)).toISOString(), ...rest };
  });
  const out: Buffer[] = [];
  for (let i = 0; i < events.length; i += BATCH) out.push(Buffer.from(JSON.stringify(events.slice(i, i + BATCH))));
  return out;
}

/**
 * The ingest worker's part alone (decode, flatten, type, check the time, write WAL lines), on this
 * thread: CPU seconds per million events, the least of `reps` passes over the bodies. What the time
 * field and inference add where they run, without the noise of HTTP, the WAL, flushes and other load.
 */
function workerCpu(bodies: Buffer[], time: PlacementTarget['time'], reps = 5): number {
  const stamp = stampFromRequest(new Headers({ 'user-agent': 'bench' }), '127.0.0.1');
  const job = (body: Buffer): IngestJob => ({
    kind: 'json',
    body,
    maxDecompressedBytes: 64 << 20,
    limits: { maxEvents: 1e6, maxValues: 1e8, maxNames: 1000 },
    stamp,
    maxDepth: 10,
  });
  // The schema as the first batch makes it, so every batch is placed as a steady stream's would be.
  const first = serializeJob(job(bodies[0]), { schema: emptySchema(), maxColumns: 1000, time });
  const target: PlacementTarget = { schema: Object.assign(emptySchema(), Object.fromEntries([...first.types].map(([n, t]) => [n, t[0]]))), maxColumns: 1000, time };
  let best = Infinity;
  let events = 0;
  for (let r = 0; r < reps; r++) {
    const start = process.cpuUsage();
    events = 0;
    for (const b of bodies) events += serializeJob(job(b), target).rows;
    const u = process.cpuUsage(start);
    best = Math.min(best, (u.user + u.system) / 1e6);
  }
  return (best / events) * 1e6;
}

/** Creates `name` (with the time field for its case), sends `data` and waits for the flush: the CPU it took. */
async function round(server: BenchServer, c: Case, name: string, data: Buffer[], since: number): Promise<Round> {
  const headers: Record<string, string> = c === 'time field' ? { 'x-p-time-partition': 'time' } : {};
  const res = await fetch(`http://127.0.0.1:${server.port}/api/v1/logstream/${name}`, { method: 'PUT', headers: { 'x-api-key': BENCH_KEY, ...headers } });
  if (!res.ok) throw new Error(`create ${name}: ${res.status} ${await res.text()}`);
  await settle(server.pid);
  const watch = watchTree(server.pid);
  await sendAll(server.port, `/api/v1/logstream/${name}`, data, CLIENTS);
  await waitFlushed(server.port, name);
  const u = await watch.stop();
  const events = data.length * BATCH;
  // The rows are all there, each once (a check, not a figure).
  const [row] = (await api(server.port, 'POST', '/api/v1/query', { query: `SELECT count(*) AS n FROM ${name}`, startTime: new Date(since - 3_600_000).toISOString(), endTime: new Date(Date.now() + 3_600_000).toISOString() })) as { n: number }[];
  if (row.n !== events) throw new Error(`${name}: ${row.n} rows, ${events} sent`);
  let workers = 0;
  let loop = 0;
  for (const [thread, sec] of u.byThread) {
    if (thread.startsWith('ingest-worker/')) workers += sec;
    else if (thread.endsWith(`/${server.pid}`)) loop += sec;
  }
  const perM = (sec: number) => (sec / events) * 1e6;
  return { total: perM(u.cpuSec), workers: perM(workers), loop: perM(loop) };
}

/** Table rows: per case the medians of its rounds (CPU s per 1M events), by thread, and against the reference and the inferred case. */
export async function benchTimeField(events = Number(process.env.BENCH_TIME_EVENTS ?? 200_000), rounds = Number(process.env.BENCH_TIME_ROUNDS ?? 5)): Promise<string[][]> {
  const server = await startService({ P_FLUSH_INTERVAL: '2s' });
  const runs: Record<Case, Round[]> = { reference: [], inferred: [], 'time field': [] };
  const now = Date.now();
  const byCase: Record<Case, Buffer[]> = { reference: bodies(events, 'when', now), inferred: bodies(events, 'time', now), 'time field': bodies(events, 'time', now) };
  try {
    // Uncounted: every path compiled by the JIT and the service's first flushes behind it.
    for (const c of CASES) await round(server, c, `bench_time_warmup_${c.replace(' ', '_')}`, byCase[c].slice(0, Math.ceil(byCase[c].length / 4)), now);
    for (let r = 0; r < rounds; r++) {
      for (let k = 0; k < CASES.length; k++) {
        const c = CASES[(r + k) % CASES.length];
        runs[c].push(await round(server, c, `bench_time_${c.replace(' ', '_')}_${r}`, byCase[c], now));
      }
    }
  } finally {
    await server.stop();
  }
  const worker: Record<Case, number> = {
    reference: workerCpu(byCase.reference, undefined),
    inferred: workerCpu(byCase.inferred, undefined),
    'time field': workerCpu(byCase['time field'], { field: 'time' }),
  };
  const med = (c: Case, k: keyof Round) => median(runs[c].map((x) => x[k]));
  const pct = (ratio: number) => `${ratio >= 1 ? '+' : ''}${fmt((ratio - 1) * 100, 1)}%`;
  const paired = (c: Case, of: Case) => median(runs[c].map((x, i) => x.total / runs[of][i].total));
  const versus = (c: Case, of: Case) => (c === of ? '' : `${pct(med(c, 'total') / med(of, 'total'))} (paired ${pct(paired(c, of))})`);
  return [
    ['case', 'events', 'service CPU s/1M (median)', 'vs reference', 'vs inferred', 'rounds', 'ingest workers s/1M (share)', 'event loop', 'other threads', 'worker code alone s/1M', 'vs reference'],
    ...CASES.map((c) => [
      c,
      fmt(events),
      fmt(med(c, 'total'), 2),
      versus(c, 'reference'),
      c === 'reference' ? '' : versus(c, 'inferred'),
      runs[c].map((x) => fmt(x.total, 2)).join(' '),
      `${fmt(med(c, 'workers'), 2)} (${fmt((med(c, 'workers') / med(c, 'total')) * 100, 0)}%)`,
      fmt(med(c, 'loop'), 2),
      fmt(median(runs[c].map((x) => x.total - x.workers - x.loop)), 2),
      fmt(worker[c], 2),
      c === 'reference' ? '' : pct(worker[c] / worker.reference),
    ]),
  ];
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) {
  const load = () => os.loadavg().map((x) => x.toFixed(2)).join(' ');
  console.log(`load average before: ${load()} (${os.cpus().length} cores)`);
  benchTimeField().then(
    (rows) => {
      const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
      for (const r of rows) console.log(`  ${r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ')}`);
      console.log(`load average after: ${load()}`);
    },
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
