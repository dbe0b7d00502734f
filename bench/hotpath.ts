/**
 * The ingest workers' hot path without HTTP: request bodies → WAL lines through `serializeJob`, on one
 * thread, as an ingest worker runs it. Light enough for a shared machine (a few seconds), so changes to
 * decoding, sanitising or schema handling can be measured before/after:
 *
 *   npx tsx bench/hotpath.ts            # HOTPATH_EVENTS (100,000) per format, median of HOTPATH_RUNS (5)
 */
import { serializeJob, type IngestJob } from '../src/ingest/worker/pipeline.ts';
import { makeLogEvents } from './logs.ts';
import { logsRequest, remoteWriteRequest, toProtobuf } from './otel.ts';

const EVENTS = Number(process.env.HOTPATH_EVENTS ?? 100_000);
const RUNS = Number(process.env.HOTPATH_RUNS ?? 5);
const BATCH = 1000;
const received = new Date().toISOString();
// The job shape of this revision; a copy of this script run against an older revision (to compare)
// passes the same objects, whose extra fields that revision ignores.
const common = { maxDecompressedBytes: 64 * 1024 * 1024, limits: { maxEvents: 100_000, maxValues: 4_000_000, maxNames: 8000 } };
const target = { schema: {}, maxColumns: 2000 };
const asJob = (j: Record<string, unknown>) => j as unknown as IngestJob;

function jobs(): [string, IngestJob[], number][] {
  const json: IngestJob[] = [];
  const otlpJson: IngestJob[] = [];
  const otlpProto: IngestJob[] = [];
  const prom: IngestJob[] = [];
  const events = makeLogEvents(EVENTS, 1);
  const stamp = { received, meta: null, tags: null, srcIp: '10.1.2.3', userAgent: 'Vector/0.40.0', fields: [] as [string, string][] };
  for (let i = 0; i < EVENTS; i += BATCH) {
    const body = Buffer.from(JSON.stringify(events.slice(i, i + BATCH)));
    json.push(asJob({ kind: 'json', body, stamp, maxDepth: 10, ...common }));
    const logs = logsRequest(BATCH, i, Date.now());
    otlpJson.push(asJob({ kind: 'otlp', body: Buffer.from(JSON.stringify(logs)), signal: 'logs', format: 'json', received, ...common }));
    otlpProto.push(asJob({ kind: 'otlp', body: toProtobuf('logs', logs), signal: 'logs', format: 'protobuf', received, ...common }));
  }
  for (let i = 0; i < EVENTS; i += 2000) {
    prom.push(asJob({ kind: 'prometheus', body: remoteWriteRequest(200, 10, i, Date.now()), contentEncoding: 'snappy', received, ...common }));
  }
  return [
    ['JSON events, batches of 1000', json, EVENTS],
    ['OTLP logs JSON, 1000/request', otlpJson, EVENTS],
    ['OTLP logs protobuf, 1000/request', otlpProto, EVENTS],
    ['remote write 1.0, 2000 samples/request', prom, Math.ceil(EVENTS / 2000) * 2000],
  ];
}

for (const [label, list, events] of jobs()) {
  // CPU time (user + system of the process) rather than wall time: on a shared machine the wall clock
  // mostly measures the neighbours.
  const times: number[] = [];
  for (let run = 0; run < RUNS + 1; run++) {
    const started = process.cpuUsage();
    let rows = 0;
    for (const job of list) {
      const r = serializeJob(job, target);
      // Posting the lines to the main thread flattens the string built by concatenation; do it here
      // too, so that a revision that flattens earlier (e.g. to search it) is not charged twice.
      if (typeof r.lines === 'string') r.lines.charCodeAt(r.lines.length >> 1);
      rows += r.rows;
    }
    if (rows !== events) throw new Error(`${label}: ${rows} rows, expected ${events}`);
    const used = process.cpuUsage(started);
    if (run > 0) times.push((used.user + used.system) / 1000); // the first run warms the JIT
  }
  times.sort((a, b) => a - b);
  const ms = times[Math.floor(times.length / 2)];
  console.log(`${label.padEnd(42)} ${String(Math.round((events / ms) * 1000)).padStart(9)} events per CPU-second  (median ${ms.toFixed(0)} ms, min ${times[0].toFixed(0)} ms CPU)`);
}
