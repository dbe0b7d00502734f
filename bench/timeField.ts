/**
 * JSON ingestion with event time (docs/time.md) against the same events without it, in one run on one
 * service: CPU seconds of the service's process tree per million events, from the first request until
 * the WAL is in Parquet (flush included), as the main JSON figure is measured.
 *
 * - `reference`: the events' time under a name that is not time-like (`when`): stored as text;
 * - `inferred`: the same values under `time`, in a dataset without a time field: typed TIMESTAMP;
 * - `time field`: a dataset created with `X-P-Time-Partition: time`: every event's time checked and
 *   its files partitioned by it.
 *
 * Event times follow one another as closely as the receive times do (the whole set spans about as
 * long as it takes to send), so all three flush into as many minute partitions: a backfill spread
 * over hours writes more, smaller files per flush, which this does not measure. The cases alternate
 * over `rounds`, and each figure is the median of its rounds.
 */
import { stampFromRequest } from '../src/ingest/jsonEvents.ts';
import { serializeJob, type IngestJob, type PlacementTarget } from '../src/ingest/pipeline.ts';
import { emptySchema } from '../src/storage/schema.ts';
import { api, BENCH_KEY, fmt, median, sendAll, settle, startService, waitFlushed, watchTree } from './lib.ts';
import { makeLogEvents } from './logs.ts';

const BATCH = 1000;
const CLIENTS = 8;

type Case = 'reference' | 'inferred' | 'time field';

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

/** Table rows: case, events, CPU s per 1M events (median), vs the reference. */
export async function benchTimeField(events = Number(process.env.BENCH_TIME_EVENTS ?? 200_000), rounds = Number(process.env.BENCH_TIME_ROUNDS ?? 3)): Promise<string[][]> {
  const server = await startService({ P_FLUSH_INTERVAL: '2s' });
  const cpu: Record<Case, number[]> = { reference: [], inferred: [], 'time field': [] };
  try {
    const now = Date.now();
    const byCase: Record<Case, Buffer[]> = { reference: bodies(events, 'when', now), inferred: bodies(events, 'time', now), 'time field': bodies(events, 'time', now) };
    for (let round = 0; round < rounds; round++) {
      for (const c of Object.keys(byCase) as Case[]) {
        const name = `bench_time_${c.replace(' ', '_')}_${round}`;
        const headers: Record<string, string> = c === 'time field' ? { 'x-p-time-partition': 'time' } : {};
        await fetch(`http://127.0.0.1:${server.port}/api/v1/logstream/${name}`, { method: 'PUT', headers: { 'x-api-key': BENCH_KEY, ...headers } });
        await settle(server.pid);
        const watch = watchTree(server.pid);
        await sendAll(server.port, `/api/v1/logstream/${name}`, byCase[c], CLIENTS);
        await waitFlushed(server.port, name);
        cpu[c].push(((await watch.stop()).cpuSec / events) * 1e6);
        // The rows are all there, each once (a check, not a figure).
        const [row] = (await api(server.port, 'POST', '/api/v1/query', { query: `SELECT count(*) AS n FROM ${name}`, startTime: new Date(now - 3_600_000).toISOString(), endTime: new Date(now + 3_600_000).toISOString() })) as { n: number }[];
        if (row.n !== events) throw new Error(`${name}: ${row.n} rows, ${events} sent`);
      }
    }
  } finally {
    await server.stop();
  }
  const now = Date.now();
  const worker: Record<Case, number> = {
    reference: workerCpu(bodies(events, 'when', now), undefined),
    inferred: workerCpu(bodies(events, 'time', now), undefined),
    'time field': workerCpu(bodies(events, 'time', now), { field: 'time' }),
  };
  const ref = median(cpu.reference);
  const pct = (x: number, of: number) => `${x >= of ? '+' : ''}${fmt((x / of - 1) * 100, 1)}%`;
  return [
    ['case', 'events', 'service CPU s/1M (median)', 'vs reference', 'rounds', 'ingest worker alone CPU s/1M', 'vs reference'],
    ...(Object.keys(cpu) as Case[]).map((c) => [
      c,
      fmt(events),
      fmt(median(cpu[c]), 2),
      pct(median(cpu[c]), ref),
      cpu[c].map((x) => fmt(x, 2)).join(' '),
      fmt(worker[c], 2),
      pct(worker[c], worker.reference),
    ]),
  ];
}
