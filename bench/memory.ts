import { buildPromql } from '../scripts/build-promql.ts';
import { requestClass } from '../src/ingest/otlp/generated.ts';
import { api, BENCH_KEY, fmt, post, rng, sendAll, settle, startService, treeUsage, waitFlushed, watchTree } from './lib.ts';
import { logsRequest, remoteWriteRequest, spansRequest, toProtobuf } from './otel.ts';

/** Peak PSS and RSS of the service's process tree in one phase, MB; with the main process's part and the query workers'. */
export interface PhaseMemory {
  pssMb: number;
  rssMb: number;
  /** Peak RSS of the main process alone (Node, ingest threads, the storage DuckDB). */
  mainRssMb: number;
}

/** OTLP/JSON for `count` data points: half gauges, half cumulative sums, over 50 metric names. */
export function metricsRequest(count: number, seed: number, baseMs: number): Record<string, unknown> {
  const r = rng(seed);
  const points = (n: number, offset: number) =>
    Array.from({ length: n }, (_, i) => ({
      timeUnixNano: String(BigInt(baseMs + offset + i) * 1_000_000n),
      startTimeUnixNano: String(BigInt(baseMs) * 1_000_000n),
      asDouble: r() * 1000,
      attributes: [
        { key: 'host.name', value: { stringValue: `host-${i % 16}` } },
        { key: 'mode', value: { stringValue: ['user', 'system', 'idle', 'iowait'][i % 4] } },
      ],
    }));
  const half = Math.floor(count / 2);
  const metrics = [
    ...Array.from({ length: 25 }, (_, m) => ({ name: `bench_gauge_${m}`, unit: 'By', gauge: { dataPoints: points(Math.floor(half / 25) + (m < half % 25 ? 1 : 0), m * 1000) } })),
    ...Array.from({ length: 25 }, (_, m) => ({
      name: `bench_sum_${m}_total`,
      sum: { aggregationTemporality: 2, isMonotonic: true, dataPoints: points(Math.floor((count - half) / 25) + (m < (count - half) % 25 ? 1 : 0), m * 1000) },
    })),
  ];
  return { resourceMetrics: [{ resource: { attributes: [{ key: 'service.name', value: { stringValue: `svc-${seed % 4}` } }] }, scopeMetrics: [{ scope: { name: 'bench' }, metrics }] }] };
}

const metricsProtobuf = (json: Record<string, unknown>) => Buffer.from(requestClass.metrics.encode(requestClass.metrics.fromObject(json)).finish());

/**
 * Memory of the whole process tree per phase (issue 18's workload), with default settings: idle; ingest
 * of each kind — JSON events, OTLP logs, metrics and traces (protobuf and JSON, as bench/otel.ts sends
 * them) and Prometheus remote write, 8 clients each; the flush of what is left in the WAL; compaction;
 * the queries (SQL over the JSON events and the OTLP logs, a PromQL query_range over the remote-write
 * data); and a minute after the last request. Peak PSS and RSS per phase, MB. `events`: JSON events
 * (1,000 a request); `otlpRecords`: records (or data points, or samples) of each OTLP and remote-write kind.
 */
export async function benchMemory(events = 500_000, env: Record<string, string> = {}, otlpRecords = 100_000): Promise<Record<string, PhaseMemory & { perSec?: number }>> {
  buildPromql();
  // Compaction every 10 s so that it runs within the benchmark; every other setting is the default.
  const server = await startService({ P_COMPACTION_INTERVAL: '10s', ...env });
  const out: Record<string, PhaseMemory & { perSec?: number }> = {};
  const mb = (b: number) => Math.round(b / 1e6);
  const phase = async (name: string, work: () => Promise<number | void>) => {
    const w = watchTree(server.pid);
    const rate = await work();
    const r = await w.stop();
    out[name] = { pssMb: mb(r.peakTreePss), rssMb: mb(r.peakTreeRss), mainRssMb: mb(r.peakMainRss), ...(rate ? { perSec: Math.round(rate) } : {}) };
  };
  const PER = 1000;
  const requests = Math.max(1, Math.round(otlpRecords / PER));
  const base = Date.now() - 3_600_000;
  // Remote write: a request a minute, ending a minute ago.
  const rwBase = Date.now() - (requests + 1) * 60_000;
  const datasets = ['mem', 'mem_logs_pb', 'mem_logs_json', 'mem_metrics_pb', 'mem_metrics_json', 'mem_spans_pb', 'mem_spans_json', 'mem_rw'];
  try {
    await settle(server.pid);
    const idle = await treeUsage(server.pid);
    out.idle = { pssMb: mb(idle.pssBytes), rssMb: mb(idle.rssBytes), mainRssMb: mb(idle.mainRssBytes) };
    await api(server.port, 'PUT', '/api/v1/logstream/mem');
    const bodies = Array.from({ length: events / 1000 }, (_, b) =>
      JSON.stringify(Array.from({ length: 1000 }, (_, i) => ({ level: i % 7 ? 'info' : 'error', service: `svc-${i % 13}`, host: `host-${b % 17}`, latency_ms: (i * 7919) % 1000, message: `request ${b * 1000 + i} served`, user: { id: i % 5000, tier: i % 3 ? 'free' : 'paid' } }))),
    );
    await phase('ingest JSON events', async () => events / (await sendAll(server.port, '/api/v1/logstream/mem', bodies, 8)));

    // Bodies are built before each phase's clock and watcher start, and dropped after it.
    const pb = { 'content-type': 'application/x-protobuf' };
    const json = { 'content-type': 'application/json' };
    const kinds: [string, string, string, () => Buffer[], Record<string, string>, number][] = [
      ['ingest OTLP logs, protobuf', '/v1/logs', 'mem_logs_pb', () => Array.from({ length: requests }, (_, i) => toProtobuf('logs', logsRequest(PER, i, base + i * PER))), pb, PER],
      ['ingest OTLP logs, JSON', '/v1/logs', 'mem_logs_json', () => Array.from({ length: requests }, (_, i) => Buffer.from(JSON.stringify(logsRequest(PER, i, base + i * PER)))), json, PER],
      ['ingest OTLP metrics, protobuf', '/v1/metrics', 'mem_metrics_pb', () => Array.from({ length: requests }, (_, i) => metricsProtobuf(metricsRequest(PER, i, base + i * PER))), pb, PER],
      ['ingest OTLP metrics, JSON', '/v1/metrics', 'mem_metrics_json', () => Array.from({ length: requests }, (_, i) => Buffer.from(JSON.stringify(metricsRequest(PER, i, base + i * PER)))), json, PER],
      ['ingest OTLP traces, protobuf', '/v1/traces', 'mem_spans_pb', () => Array.from({ length: requests }, (_, i) => toProtobuf('traces', spansRequest(PER, i, base + i * PER))), pb, PER],
      ['ingest OTLP traces, JSON', '/v1/traces', 'mem_spans_json', () => Array.from({ length: requests }, (_, i) => Buffer.from(JSON.stringify(spansRequest(PER, i, base + i * PER)))), json, PER],
      // 500 series × 4 samples at 15 s a request, each request a minute after the one before.
      ['ingest remote write', '/v1/prometheus/write', 'mem_rw', () => Array.from({ length: requests }, (_, i) => remoteWriteRequest(500, 4, i, rwBase + i * 60_000)), { ...pb, 'content-encoding': 'snappy' }, 2000],
    ];
    for (const [name, path, dataset, make, headers, perBody] of kinds) {
      const kindBodies = make();
      await phase(name, async () => (kindBodies.length * perBody) / (await sendAll(server.port, `${path}?stream=${dataset}`, kindBodies, 8, headers)));
    }

    await phase('flush', async () => {
      for (const d of datasets) await waitFlushed(server.port, d);
    });
    // Compaction (every 10 s here) merges the flushed files of each hour.
    const files = async () => {
      let n = 0;
      for (const d of datasets) n += ((await api(server.port, 'GET', `/api/v1/logstream/${d}/stats`)) as { storage: { files: number } }).storage.files;
      return n;
    };
    await phase('compaction', async () => {
      const before = await files();
      for (let i = 0; i < 120 && (await files()) >= before && before > datasets.length; i++) await new Promise((r) => setTimeout(r, 500));
      await settle(server.pid, 30_000);
    });
    await phase('queries', async () => {
      const range = { startTime: new Date(Math.min(base, rwBase) - 60_000).toISOString(), endTime: new Date(Date.now() + 60_000).toISOString() };
      for (const query of [
        'SELECT count(*) FROM mem',
        "SELECT date_trunc('minute', p_timestamp) AS m, count(*) FROM mem GROUP BY 1 ORDER BY 1",
        'SELECT service, level, count(*), avg(latency_ms) FROM mem GROUP BY ALL ORDER BY 3 DESC',
        "SELECT * FROM mem WHERE message LIKE '%request 4242%'",
        'SELECT severity_text, count(*) FROM mem_logs_json GROUP BY 1',
      ]) {
        const res = await post(server.port, '/api/v1/query', JSON.stringify({ query, ...range }));
        if (res.status !== 200) throw new Error(`query failed ${res.status}: ${res.body}`);
      }
      // PromQL over the remote-write data: its whole span, a point a minute.
      const params = new URLSearchParams({ query: 'sum by (mode) (rate(bench_metric_7[5m]))', start: String(Math.floor(rwBase / 1000)), end: String(Math.ceil((rwBase + requests * 60_000) / 1000)), step: '60' });
      const res = await fetch(`http://127.0.0.1:${server.port}/prometheus/mem_rw/api/v1/query_range?${params}`, { headers: { 'X-API-Key': BENCH_KEY } });
      const body = (await res.json()) as { status: string; data?: { result: unknown[] } };
      if (!res.ok || body.status !== 'success' || !body.data?.result.length) throw new Error(`PromQL query_range failed ${res.status}: ${JSON.stringify(body).slice(0, 300)}`);
    });
    await new Promise((r) => setTimeout(r, 60_000));
    const after = await treeUsage(server.pid);
    out['a minute after'] = { pssMb: mb(after.pssBytes), rssMb: mb(after.rssBytes), mainRssMb: mb(after.mainRssBytes) };
    const peak = Math.max(...Object.values(out).map((v) => v.pssMb));
    console.log(`memory (MB, process tree, ${fmt(events)} JSON events, ${fmt(requests * PER)} records of each OTLP kind, ${fmt(requests * 2000)} remote-write samples; peak PSS ${peak} MB):`);
    for (const [k, v] of Object.entries(out)) console.log(`  ${k.padEnd(30)} PSS ${String(v.pssMb).padStart(4)}  RSS ${String(v.rssMb).padStart(4)}  (main RSS ${String(v.mainRssMb).padStart(4)})${v.perSec ? `  ${fmt(v.perSec)}/s` : ''}`);
    return out;
  } finally {
    await server.stop();
  }
}
