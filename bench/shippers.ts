/**
 * The log shippers' doors beside our own JSON endpoint on the same events: Elasticsearch `_bulk`
 * (NDJSON, `create` actions) and the JSON endpoint (`POST /api/v1/ingest`, a JSON array) store the very
 * same documents into datasets whose time field is `@timestamp`; Loki push (JSON) sends the same events
 * as log lines (each event's JSON text) in one stream per service. Events/s with 8 clients and CPU
 * seconds of the service's process tree per million events from the first request until the WAL is in
 * Parquet, in interleaved rounds (medians), so a machine busy with something else weighs on all alike.
 *
 * `npx tsx bench/shippers.ts` runs it alone; BENCH_SHIPPER_EVENTS (200,000), BENCH_SHIPPER_ROUNDS (3).
 */
import { fmt, median, runIfMain, sendAll, settle, startService, waitFlushed, watchTree, BENCH_KEY } from './lib.ts';
import { makeLogEvents } from './logs.ts';

const BATCH = 1000;
const CLIENTS = 8;

interface Case {
  label: string;
  path: (dataset: string) => string;
  headers: (dataset: string) => Record<string, string>;
  bodies: (dataset: string) => Buffer[];
  /** Created before the round (the JSON endpoint's dataset, with the same time field as _bulk's). */
  prepare?: (port: number, dataset: string) => Promise<void>;
}

function documents(count: number): Record<string, unknown>[] {
  const base = Date.now() - 3_600_000;
  return makeLogEvents(count, 42).map((e, i) => ({ '@timestamp': new Date(base + i).toISOString(), ...e }));
}

function cases(docs: Record<string, unknown>[]): Case[] {
  const batches: Record<string, unknown>[][] = [];
  for (let i = 0; i < docs.length; i += BATCH) batches.push(docs.slice(i, i + BATCH));
  const docLines = batches.map((b) => b.map((d) => JSON.stringify(d)));
  return [
    {
      label: 'JSON endpoint (POST /api/v1/ingest)',
      path: () => '/api/v1/ingest',
      headers: (dataset) => ({ 'x-p-stream': dataset }),
      bodies: () => docLines.map((lines) => Buffer.from(`[${lines.join(',')}]`)),
      prepare: async (port, dataset) => {
        const res = await fetch(`http://127.0.0.1:${port}/api/v1/logstream/${dataset}`, { method: 'PUT', headers: { 'x-api-key': BENCH_KEY, 'x-p-time-partition': '@timestamp' } });
        if (!res.ok) throw new Error(`create ${dataset}: ${res.status} ${await res.text()}`);
      },
    },
    {
      label: 'Elasticsearch _bulk (NDJSON)',
      path: () => '/es/_bulk',
      headers: () => ({ 'content-type': 'application/x-ndjson' }),
      bodies: (dataset) => docLines.map((lines) => Buffer.from(lines.map((l) => `{"create":{"_index":"${dataset}"}}\n${l}\n`).join(''))),
    },
    {
      label: 'Loki push (JSON, lines)',
      path: (dataset) => `/loki/api/v1/push?stream=${dataset}`,
      headers: () => ({}),
      bodies: () =>
        batches.map((b) => {
          const streams = new Map<string, [string, string][]>();
          for (const d of b) {
            const values = streams.get(d.service as string) ?? [];
            values.push([`${Date.parse(d['@timestamp'] as string)}000000`, JSON.stringify(d)]);
            streams.set(d.service as string, values);
          }
          return Buffer.from(JSON.stringify({ streams: [...streams].map(([service, values]) => ({ stream: { service }, values })) }));
        }),
    },
  ];
}

export async function benchShippers(): Promise<string[][]> {
  const events = Number(process.env.BENCH_SHIPPER_EVENTS ?? 200_000);
  const rounds = Number(process.env.BENCH_SHIPPER_ROUNDS ?? 3);
  const all = cases(documents(events));
  const rates = all.map(() => [] as number[]);
  const cpu = all.map(() => [] as number[]);
  const server = await startService({ P_FLUSH_INTERVAL: '5s' });
  try {
    await settle(server.pid);
    for (let round = 1; round <= rounds; round++) {
      for (const [i, c] of all.entries()) {
        const dataset = `ship_${i}_${round}`;
        await c.prepare?.(server.port, dataset);
        const bodies = c.bodies(dataset);
        const watch = watchTree(server.pid);
        const secs = await sendAll(server.port, c.path(dataset), bodies, CLIENTS, c.headers(dataset));
        await waitFlushed(server.port, dataset);
        const use = await watch.stop();
        rates[i].push(events / secs);
        cpu[i].push((use.cpuSec / events) * 1e6);
      }
    }
  } finally {
    await server.stop();
  }
  const rows: string[][] = [['case', 'events/s (median)', 'CPU s/1M events (median, range)', 'CPU vs JSON endpoint']];
  for (const [i, c] of all.entries()) {
    const m = median(cpu[i]);
    rows.push([c.label, fmt(median(rates[i])), `${fmt(m, 1)} (${fmt(Math.min(...cpu[i]), 1)}–${fmt(Math.max(...cpu[i]), 1)})`, `${fmt(m / median(cpu[0]), 2)}×`]);
  }
  return rows;
}

runIfMain(import.meta.filename, benchShippers);
