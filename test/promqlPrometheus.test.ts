import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPrometheus, type RunningPrometheus } from './helpers/prometheus.ts';
import { startServer, type TestServer } from './helpers/server.ts';

/**
 * Side by side with a real Prometheus (Debian's 2.42): it scrapes itself every second and remote-writes
 * every sample to the service, so both hold the same samples. The same instant and range queries,
 * asked of both at a time both have complete data, must give the same series and values.
 *
 * The evaluation time sits half a second after a scrape: Prometheus 3 (the service's engine) selects
 * ranges as left-open intervals where 2.42 selects closed ones, which differs only for a sample exactly
 * on a range's left edge; no sample is there.
 */

type Answer = { status: string; data: { resultType: string; result: unknown } };
type Sample = { metric: Record<string, string>; value?: [number, string]; values?: [number, string][] };

const QUERIES = [
  'rate(prometheus_http_requests_total[10s])',
  'sum by (job) (rate(prometheus_tsdb_head_samples_appended_total[10s]))',
  'histogram_quantile(0.9, sum by (le) (rate(prometheus_http_request_duration_seconds_bucket[20s])))',
  'process_resident_memory_bytes / on(instance, job) process_virtual_memory_bytes',
  'prometheus_tsdb_head_series - on(job) group_left prometheus_tsdb_head_chunks',
  'topk(3, prometheus_http_requests_total)',
  'max_over_time(rate(prometheus_tsdb_head_samples_appended_total[5s])[20s:2s])',
  'prometheus_tsdb_head_samples_appended_total offset 10s',
  'label_replace(up, "where", "$1", "instance", "(.*):.*")',
  'absent(nonexistent_metric{job="x"})',
  'absent(up)',
  'time()',
  'count by (__name__) ({__name__=~"prometheus_tsdb_head_.*"})',
];

/** Floats as the two engines print them may differ in the last bits (summation order): compared relatively. */
function close(a: string, b: string): boolean {
  if (a === b) return true;
  const x = Number(a);
  const y = Number(b);
  return Math.abs(x - y) <= 1e-9 * Math.max(Math.abs(x), Math.abs(y));
}

function normalise(answer: Answer): { type: string; series: Map<string, [number, string][]> } {
  const { resultType, result } = answer.data;
  const series = new Map<string, [number, string][]>();
  if (resultType === 'scalar' || resultType === 'string') series.set('', [result as [number, string]]);
  else for (const s of result as Sample[]) series.set(JSON.stringify(Object.entries(s.metric).sort()), s.values ?? [s.value!]);
  return { type: resultType, series };
}

describe('PromQL side by side with Prometheus 2.42', () => {
  let server: TestServer;
  let prom: RunningPrometheus;
  beforeAll(async () => {
    server = await startServer();
    // Created up front, so that queries before the first remote write find an empty dataset.
    expect((await server.request('/api/v1/logstream/prom', { method: 'PUT', headers: { 'X-P-Log-Source': 'otel-metrics' } })).status).toBe(200);
    prom = await startPrometheus({ remoteWriteUrl: `${server.url}/v1/prometheus/write?stream=prom`, bearer: server.apiKey });
  }, 120_000);
  afterAll(async () => {
    await prom?.stop();
    await server?.stop();
  });

  const ask = async (base: string, path: string, params: Record<string, string>, key?: string): Promise<Answer> => {
    const res = await fetch(`${base}${path}?${new URLSearchParams(params)}`, { headers: key ? { 'X-API-Key': key } : {} });
    const body = (await res.json()) as Answer;
    expect(res.status, JSON.stringify(body)).toBe(200);
    return body;
  };
  const both = (path: string, params: Record<string, string>) =>
    Promise.all([ask(prom.url, `/api/v1/${path}`, params), ask(server.url, `/prometheus/prom/api/v1/${path}`, params, server.apiKey)]);

  /** The evaluation time the first test found (both hold complete data around it). */
  let at = 0;

  it('gives the same series and values for instant and range queries', async () => {
    // 40 s of scrapes in both, and the service caught up with a sample after the evaluation time.
    const deadline = Date.now() + 300_000;
    for (;;) {
      const [p, s] = await both('query', { query: 'timestamp(up)', time: String(Date.now() / 1000) });
      const pt = Number((p.data.result as Sample[])[0]?.value?.[1] ?? 0);
      const st = Number((s.data.result as Sample[])[0]?.value?.[1] ?? 0);
      const first = await ask(prom.url, '/api/v1/query', { query: 'min_over_time(timestamp(up)[10m:1s])' });
      const firstT = Number((first.data.result as Sample[])[0]?.value?.[1] ?? Infinity);
      // Half a second after a scrape 3 s back: both hold it and the samples around it.
      if (pt && st >= pt - 1 && pt - firstT >= 45) {
        at = Math.round((pt - 3) * 1000) / 1000 + 0.5;
        // Scrapes are a second apart: pt - 3 is a scrape time when the interval held.
        break;
      }
      expect(Date.now(), 'Prometheus did not scrape and remote-write 45 s of samples in time').toBeLessThan(deadline);
      await new Promise((r) => setTimeout(r, 2000));
    }
    const mismatches: string[] = [];
    for (const query of QUERIES) {
      const cases: Record<string, string>[] = [
        { query, time: String(at) },
        { query, start: String(at - 20), end: String(at), step: '5' },
      ];
      for (const params of cases) {
        const [p, s] = await both('start' in params ? 'query_range' : 'query', params);
        const a = normalise(p);
        const b = normalise(s);
        const where = `${query} (${'start' in params ? 'range' : 'instant'})`;
        if (a.type !== b.type) mismatches.push(`${where}: ${a.type} vs ${b.type}`);
        // Only absent(up) is empty (up exists); every other query must compare something.
        if (query !== 'absent(up)') expect(a.series.size, `${where} selected nothing in Prometheus: the comparison would be empty`).toBeGreaterThan(0);
        if ([...a.series.keys()].sort().join() !== [...b.series.keys()].sort().join()) {
          mismatches.push(`${where}: series ${[...a.series.keys()].join(' ')} vs ${[...b.series.keys()].join(' ')}`);
          continue;
        }
        for (const [k, pts] of a.series) {
          const other = b.series.get(k)!;
          const same = pts.length === other.length && pts.every(([t, v], i) => t === other[i][0] && close(v, other[i][1]));
          if (!same) mismatches.push(`${where} ${k}: ${JSON.stringify(pts)} vs ${JSON.stringify(other)}`);
        }
      }
    }
    expect(mismatches).toEqual([]);
  }, 600_000);

  // The service answers these from its series index and each worker's cached label sets (labels and
  // label values from reduced sets, docs/promql.md); Prometheus from its head. Only calls whose answer
  // cannot change while the test runs (a series Prometheus makes later, such as a new handler's
  // counter, is in its head for any range, as a block is read whole there).
  it('gives the same series, labels and label values, with match[] and start/end', async () => {
    expect(at, 'the first test found no evaluation time').toBeGreaterThan(0);
    const range = { start: String(at - 20), end: String(at) };
    const calls: [string, Record<string, string>][] = [
      ['labels', range],
      ['labels', { ...range, 'match[]': 'up' }],
      ['labels', { ...range, 'match[]': '{__name__=~"prometheus_tsdb_head_.*"}' }],
      ['label/job/values', range],
      ['label/__name__/values', { ...range, 'match[]': '{__name__=~"prometheus_tsdb_head_.*"}' }],
      ['label/quantile/values', { ...range, 'match[]': 'prometheus_engine_query_duration_seconds' }],
      ['series', { ...range, 'match[]': 'up' }],
      ['series', { ...range, 'match[]': '{__name__=~"prometheus_tsdb_head_.*", job!="nope"}' }],
      // Answered in process by the label index (labelIndex.ts; its match[] subset), over recent WAL rows
      // and files alike; a narrow range too.
      ['series', { ...range, 'match[]': '{__name__=~"up|prometheus_build_info", job="prometheus"}' }],
      ['label/instance/values', { ...range, 'match[]': '{__name__=~"up|go_goroutines", job="prometheus"}' }],
      ['label/__name__/values', { start: String(at - 2), end: String(at), 'match[]': '{__name__=~"prometheus_tsdb_head_series|up", job!=""}' }],
      ['labels', { start: String(at - 2), end: String(at) }],
    ];
    const sorted = (data: unknown) => (data as unknown[]).map((x) => JSON.stringify(x)).sort();
    for (const [path, params] of calls) {
      const [p, s] = await both(path, params);
      const where = `${path} ${JSON.stringify(params)}`;
      expect((p.data as unknown as unknown[]).length, `${where}: Prometheus answered nothing`).toBeGreaterThan(0);
      expect(sorted(s.data), where).toEqual(sorted(p.data));
    }
    // The calls above in its subset were answered by the in-process label index, which now holds label sets.
    const metrics = await (await server.request('/metrics')).text();
    expect(Number(/^lakehouse_promql_label_index_bytes (\S+)$/m.exec(metrics)?.[1] ?? 0)).toBeGreaterThan(0);
  });
});
