/**
 * OTLP logs and spans over gRPC beside OTLP/HTTP protobuf, in the same run on the same service: the
 * same protobuf bodies, 8 in flight at once (8 keep-alive HTTP connections; 8 concurrent calls on one
 * HTTP/2 connection, as a Collector's exporter sends), records/s and the service's CPU per record.
 */
import { RawOtlpClient } from '../test/helpers/otlpGrpc.ts';
import { api, BENCH_KEY, fmt, sendAll, settle, startService, waitFlushed, watchTree } from './lib.ts';
import { logsRequest, spansRequest, toProtobuf } from './otel.ts';

const CLIENTS = 8;

/** Sends every body as one Export call, `CLIENTS` at a time; returns elapsed seconds. */
async function grpcSendAll(target: string, signal: 'logs' | 'traces', dataset: string, bodies: Buffer[]): Promise<number> {
  const client = new RawOtlpClient(target);
  try {
    // One call first, so the connection is up before the clock starts (as HTTP's connections are).
    const warm = await client.call('health', Buffer.alloc(0));
    if (warm.code !== 0) throw new Error(`gRPC health: ${warm.code} ${warm.details}`);
    let next = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        while (next < bodies.length) {
          const answer = await client.call(signal, bodies[next++], { 'x-api-key': BENCH_KEY, 'x-p-stream': dataset });
          if (answer.code !== 0) throw new Error(`gRPC export failed ${answer.code}: ${answer.details}`);
        }
      }),
    );
    return (performance.now() - started) / 1000;
  } finally {
    client.close();
  }
}

export async function benchOtlpGrpc(): Promise<string[][]> {
  const PER_REQUEST = 1000;
  const REQUESTS = Number(process.env.BENCH_OTLP_REQUESTS ?? 200);
  const base = Date.now() - 3_600_000;
  const server = await startService({ P_FLUSH_INTERVAL: '5s', P_LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn', P_OTLP_GRPC_ADDR: '127.0.0.1:0' });
  const target = `127.0.0.1:${server.grpcPort!}`;
  const rows: string[][] = [['case', 'records', 'seconds', 'records/s', 'CPU s/1M records']];
  try {
    await settle(server.pid);
    const run = async (label: string, dataset: string, records: number, send: () => Promise<number>) => {
      const watch = watchTree(server.pid);
      const secs = await send();
      await waitFlushed(server.port, dataset);
      const use = await watch.stop();
      const stats = (await api(server.port, 'GET', `/api/v1/logstream/${dataset}/stats`)) as { ingestion: { count: number } };
      if (stats.ingestion.count !== records) throw new Error(`${label}: stored ${stats.ingestion.count} of ${records}`);
      rows.push([label, fmt(records), fmt(secs, 2), fmt(records / secs), fmt((use.cpuSec / records) * 1e6, 1)]);
    };
    const records = REQUESTS * PER_REQUEST;
    const logs = Array.from({ length: REQUESTS }, (_, i) => toProtobuf('logs', logsRequest(PER_REQUEST, i, base + i * PER_REQUEST)));
    const spans = Array.from({ length: REQUESTS }, (_, i) => toProtobuf('traces', spansRequest(PER_REQUEST, i, base + i * PER_REQUEST)));
    const pb = { 'content-type': 'application/x-protobuf' };
    // HTTP and gRPC for each signal, twice (the second pair in the other order), so neither is always first.
    for (const round of [1, 2]) {
      const cases: [string, string, () => Promise<number>][] = [
        ['OTLP/HTTP protobuf logs', `h_logs_${round}`, () => sendAll(server.port, `/v1/logs?stream=h_logs_${round}`, logs, CLIENTS, pb)],
        ['OTLP/gRPC logs', `g_logs_${round}`, () => grpcSendAll(target, 'logs', `g_logs_${round}`, logs)],
        ['OTLP/HTTP protobuf spans', `h_spans_${round}`, () => sendAll(server.port, `/v1/traces?stream=h_spans_${round}`, spans, CLIENTS, pb)],
        ['OTLP/gRPC spans', `g_spans_${round}`, () => grpcSendAll(target, 'traces', `g_spans_${round}`, spans)],
      ];
      for (const i of round === 1 ? [0, 1, 2, 3] : [1, 0, 3, 2]) await run(`${cases[i][0]} (${round})`, cases[i][1], records, cases[i][2]);
    }
  } finally {
    await server.stop();
  }
  return rows;
}
