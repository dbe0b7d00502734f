/**
 * PromQL on a realistic small install (issue 37): ~3,000 node-exporter-like and Prometheus-self-like
 * series (counters, gauges, classic histograms) of 30 + 2 targets over BENCH_DASH_HOURS (default 6) at
 * 15 s, the older hours flushed in big files and the last hour in per-minute files (one flush each, no
 * compaction: as the issue's install had them). The dashboard set — 50 instant and range queries of a
 * typical node/Prometheus dashboard and its alert rules, the last 1 h and 6 h at a 15 s step — and the
 * series/labels/label values calls are each asked of the service and of Debian's Prometheus 2.42 holding
 * the same samples, in turn, median of BENCH_DASH_RUNS after a warm-up. Each answer's series count is
 * compared with Prometheus' (a mismatch fails the bench). Then the issue's own install, 6 targets
 * (BENCH_DASH_SMALL_NODES node + 2 Prometheus, BENCH_DASH_SMALL_HOURS), in a service and a Prometheus of
 * its own: only its 20-panel refresh. BENCH_DASH_NODES sizes the full set (default 30).
 * Run alone: `npx tsx bench/dashboard.ts`.
 */
import snappy from 'snappy';
import { WriteRequestV1 } from '../src/ingest/prometheus/decode.ts';
import { BENCH_KEY, fmt, median, post, runIfMain, startService, waitFlushed } from './lib.ts';
import { buildPromql } from '../scripts/build-promql.ts';
import { compare, startPrometheus, timed } from './promql.ts';

const HOURS = Number(process.env.BENCH_DASH_HOURS ?? 6);
const RUNS = Number(process.env.BENCH_DASH_RUNS ?? 7);
/**
 * `meta`: only the series, labels and label values calls (profiling them without the 50 queries);
 * `small`: only the 6-target install and its 20-panel refresh (profiling the fixed cost per panel).
 */
const ONLY = process.env.BENCH_DASH_ONLY ?? '';
const SCRAPE_MS = 15_000;
/** Node-exporter targets of the full set (88 series each); 2 Prometheus targets beside them (133 each). */
const NODES = Number(process.env.BENCH_DASH_NODES ?? 30);
const PROMS = 2;
/**
 * The issue's own install, 6 targets (BENCH_DASH_SMALL_NODES node + 2 Prometheus), over
 * BENCH_DASH_SMALL_HOURS: only its 20-panel refresh is timed (0 nodes: not run).
 */
const SMALL_NODES = Number(process.env.BENCH_DASH_SMALL_NODES ?? 4);
const SMALL_HOURS = Number(process.env.BENCH_DASH_SMALL_HOURS ?? 2);

interface Series {
  labels: Record<string, string>;
  /** The value at scrape i (counters grow, gauges wander, deterministic). */
  value: (i: number) => number;
}

/** A deterministic wander in [0, 1) for gauge `k` at scrape i. */
const wander = (k: number, i: number) => 0.5 + 0.25 * Math.sin(i / 37 + k) + 0.2 * Math.sin(i / 5.3 + 2 * k) + 0.04 * (((i * 7919 + k * 104729) % 1000) / 1000);

function nodeSeries(n: number, nodes: number, hours: number): Series[] {
  const instance = `node-${n}:9100`;
  const base = { job: 'node', instance };
  const out: Series[] = [];
  const counter = (name: string, extra: Record<string, string>, rate: number) => out.push({ labels: { __name__: name, ...base, ...extra }, value: (i) => i * 15 * rate });
  const gauge = (name: string, extra: Record<string, string>, lo: number, hi: number) => {
    const k = out.length + n * 131;
    out.push({ labels: { __name__: name, ...base, ...extra }, value: (i) => lo + (hi - lo) * wander(k, i) });
  };
  // The last target goes down for the last 20 minutes (alerts, absent, up == 0).
  const downFrom = n === nodes - 1 ? Math.floor((hours * 3600 - 1200) / 15) : Infinity;
  out.push({ labels: { __name__: 'up', ...base }, value: (i) => (i >= downFrom ? 0 : 1) });
  const modes = ['idle', 'user', 'system', 'iowait', 'irq', 'softirq', 'steal', 'nice'];
  for (let cpu = 0; cpu < 4; cpu++) modes.forEach((mode, m) => counter('node_cpu_seconds_total', { cpu: String(cpu), mode }, m === 0 ? 0.6 + n / 100 : (0.4 - n / 200) / (m + 1)));
  for (const m of ['MemTotal', 'MemAvailable', 'MemFree', 'Cached', 'Buffers']) gauge(`node_memory_${m}_bytes`, {}, m === 'MemTotal' ? 16e9 : 1e9, m === 'MemTotal' ? 16e9 : 8e9);
  for (const [mountpoint, device, fstype] of [['/', '/dev/sda1', 'ext4'], ['/boot', '/dev/sda2', 'ext4'], ['/data', '/dev/sdb1', 'xfs'], ['/run', 'tmpfs', 'tmpfs']]) {
    gauge('node_filesystem_size_bytes', { mountpoint, device, fstype }, 100e9, 100e9);
    const k = out.length;
    out.push({ labels: { __name__: 'node_filesystem_avail_bytes', ...base, mountpoint, device, fstype }, value: (i) => 60e9 - i * (1e5 + k * 1e3) + 1e8 * wander(k, i) });
  }
  for (const device of ['eth0', 'eth1', 'lo']) {
    counter('node_network_receive_bytes_total', { device }, 1e5 * (n + 1));
    counter('node_network_transmit_bytes_total', { device }, 5e4 * (n + 1));
  }
  for (const device of ['sda', 'sdb']) {
    counter('node_disk_read_bytes_total', { device }, 2e5 + n * 1e3);
    counter('node_disk_written_bytes_total', { device }, 3e5 + n * 1e3);
    counter('node_disk_io_time_seconds_total', { device }, 0.05 + n / 1000);
  }
  for (const l of ['1', '5', '15']) gauge(`node_load${l}`, {}, 0.1, 4);
  gauge('node_boot_time_seconds', {}, 1.7e9, 1.7e9);
  gauge('node_filefd_allocated', {}, 1000, 3000);
  counter('node_context_switches_total', {}, 3000 + n * 10);
  counter('node_intr_total', {}, 2000 + n * 10);
  for (let c = 0; c < 20; c++) gauge('node_scrape_collector_duration_seconds', { collector: `c${c}` }, 0.001, 0.01);
  gauge('go_goroutines', {}, 8, 12);
  gauge('process_resident_memory_bytes', {}, 2e7, 3e7);
  counter('process_cpu_seconds_total', {}, 0.01);
  return out;
}

function prometheusSeries(n: number): Series[] {
  const base = { job: 'prometheus', instance: `prom-${n}:9090` };
  const out: Series[] = [{ labels: { __name__: 'up', ...base }, value: () => 1 }];
  const les = ['0.005', '0.01', '0.025', '0.05', '0.1', '0.25', '0.5', '1', '2.5', '+Inf'];
  const handlers = ['/api/v1/query', '/api/v1/query_range', '/api/v1/series', '/api/v1/labels', '/api/v1/write', '/metrics', '/-/ready', '/federate'];
  handlers.forEach((handler, h) => {
    const per = (h + 1) * (n + 1);
    les.forEach((le, k) => out.push({ labels: { __name__: 'prometheus_http_request_duration_seconds_bucket', ...base, handler, le }, value: (i) => Math.floor(i * per * Math.min(1, (k + 1) / 8)) }));
    out.push({ labels: { __name__: 'prometheus_http_request_duration_seconds_count', ...base, handler }, value: (i) => i * per });
    out.push({ labels: { __name__: 'prometheus_http_request_duration_seconds_sum', ...base, handler }, value: (i) => i * per * 0.07 });
    for (const code of ['200', '503']) out.push({ labels: { __name__: 'prometheus_http_requests_total', ...base, handler, code }, value: (i) => i * (code === '200' ? per : 1) });
  });
  out.push({ labels: { __name__: 'prometheus_tsdb_head_series', ...base }, value: (i) => 3000 + (i % 100) });
  out.push({ labels: { __name__: 'prometheus_tsdb_head_samples_appended_total', ...base }, value: (i) => i * 3000 });
  for (const slice of ['inner_eval', 'prepare_time', 'queue_time', 'result_sort'])
    for (const quantile of ['0.5', '0.9', '0.99']) out.push({ labels: { __name__: 'prometheus_engine_query_duration_seconds', ...base, slice, quantile }, value: (i) => 0.001 * Number(quantile) * (1 + wander(i, 3)) });
  for (const rule_group of ['node', 'prometheus', 'slo']) out.push({ labels: { __name__: 'prometheus_rule_evaluation_failures_total', ...base, rule_group }, value: (i) => (rule_group === 'slo' ? Math.floor(i / 200) : 0) });
  out.push({ labels: { __name__: 'process_cpu_seconds_total', ...base }, value: (i) => i * 0.3 });
  out.push({ labels: { __name__: 'process_resident_memory_bytes', ...base }, value: (i) => 4e8 + 1e7 * wander(7, i) });
  out.push({ labels: { __name__: 'go_goroutines', ...base }, value: (i) => 200 + 20 * wander(9, i) });
  return out;
}

export const dashboardSeries = (nodes = NODES, hours = HOURS): Series[] => [
  ...Array.from({ length: nodes }, (_, n) => nodeSeries(n, nodes, hours)).flat(),
  ...Array.from({ length: PROMS }, (_, n) => prometheusSeries(n)).flat(),
];

/** The remote-write body of scrapes [first, first + n) of every series. */
export function body(set: Series[], startMs: number, first: number, n: number): Buffer {
  const timeseries = set.map((s) => ({
    labels: Object.entries(s.labels).map(([name, value]) => ({ name, value })),
    samples: Array.from({ length: n }, (_, k) => ({ timestamp: startMs + (first + k) * SCRAPE_MS, value: s.value(first + k) })),
  }));
  return snappy.compressSync(Buffer.from(WriteRequestV1.encode(WriteRequestV1.fromObject({ timeseries })).finish()));
}

/** Instant queries: stat panels and alert rules, at the end of the data. */
export const INSTANT: string[] = [
  'up',
  'count(up)',
  'count by (job) (up)',
  'up == 0',
  'sum(up) / count(up)',
  'absent(up{job="node"})',
  'absent(nonexistent_metric_total)',
  '100 - (avg by (instance) (rate(node_cpu_seconds_total{mode="idle"}[5m])) * 100) > 50',
  'node_memory_MemAvailable_bytes / node_memory_MemTotal_bytes < 0.3',
  'predict_linear(node_filesystem_avail_bytes{fstype!="tmpfs"}[1h], 4 * 3600) < 0',
  'node_filesystem_avail_bytes{fstype!="tmpfs"} / node_filesystem_size_bytes < 0.6',
  'time() - node_boot_time_seconds',
  'topk(5, rate(node_network_receive_bytes_total[5m]))',
  'histogram_quantile(0.99, sum by (le, handler) (rate(prometheus_http_request_duration_seconds_bucket[5m])))',
  'sum(rate(prometheus_http_requests_total{code=~"5.."}[5m])) / sum(rate(prometheus_http_requests_total[5m]))',
  'increase(prometheus_rule_evaluation_failures_total[1h]) > 0',
  'count(count by (cpu) (node_cpu_seconds_total{instance="node-0:9100"}))',
  'node_load1 offset 1h',
  'label_replace(up, "host", "$1", "instance", "(.*):.*")',
  'max_over_time(node_load1[1h:1m])',
  'delta(node_filefd_allocated[1h])',
  'avg_over_time(prometheus_tsdb_head_series[1h])',
];

/** Range queries: graph panels (the first 20 are the dashboard whose refresh is totalled). */
export const RANGE: string[] = [
  'sum by (instance) (rate(node_cpu_seconds_total{mode!="idle"}[5m]))',
  'avg by (mode) (irate(node_cpu_seconds_total[1m]))',
  'node_memory_MemTotal_bytes - node_memory_MemAvailable_bytes',
  'node_load1',
  'rate(node_network_receive_bytes_total{device!="lo"}[5m]) * 8',
  'rate(node_network_transmit_bytes_total{device!="lo"}[5m]) * 8',
  'rate(node_disk_read_bytes_total[5m])',
  'rate(node_disk_io_time_seconds_total[5m])',
  '1 - node_filesystem_avail_bytes{fstype!="tmpfs"} / node_filesystem_size_bytes',
  'rate(node_context_switches_total[5m])',
  'histogram_quantile(0.9, sum by (le) (rate(prometheus_http_request_duration_seconds_bucket[5m])))',
  'sum by (code) (rate(prometheus_http_requests_total[5m]))',
  'rate(prometheus_tsdb_head_samples_appended_total[5m])',
  'prometheus_tsdb_head_series',
  'sum(up) by (job)',
  'topk(5, sum by (instance) (rate(node_cpu_seconds_total{mode="user"}[5m])))',
  'rate(process_cpu_seconds_total[5m])',
  'process_resident_memory_bytes',
  'rate(node_cpu_seconds_total{mode="idle", instance="node-3:9100"}[5m] offset 30m)',
  'deriv(node_filefd_allocated[10m])',
  'max_over_time(rate(node_context_switches_total[5m])[30m:1m])',
  'sum(rate(prometheus_http_request_duration_seconds_sum[5m])) / sum(rate(prometheus_http_request_duration_seconds_count[5m]))',
];

/** Range queries over the last 6 hours (the same 15 s step). */
export const RANGE_6H: string[] = [
  'sum by (instance) (rate(node_cpu_seconds_total{mode!="idle"}[5m]))',
  'node_memory_MemAvailable_bytes',
  'histogram_quantile(0.99, sum by (le) (rate(prometheus_http_request_duration_seconds_bucket[5m])))',
  'sum(rate(node_network_receive_bytes_total[5m]))',
  'avg(node_load1)',
  'count(up == 1)',
];

/** Loads the same samples into both: the older hours in big bodies, then the last hour a minute at a time, each flushed. */
async function load(port: number, promUrl: string, set: Series[], startMs: number, scrapes: number): Promise<number> {
  const send = async (b: Buffer) => {
    const res = await post(port, '/v1/prometheus/write?stream=dash', b, { 'content-encoding': 'snappy', 'content-type': 'application/x-protobuf' });
    if (res.status !== 200) throw new Error(`remote write to the service: ${res.status} ${res.body}`);
    const p = await fetch(`${promUrl}/api/v1/write`, { method: 'POST', body: new Uint8Array(b), headers: { 'content-encoding': 'snappy', 'content-type': 'application/x-protobuf' } });
    if (p.status >= 300) throw new Error(`remote write to Prometheus: ${p.status} ${await p.text()}`);
  };
  const recent = Math.min(scrapes, 240);
  for (let first = 0; first < scrapes - recent; first += 20) await send(body(set, startMs, first, Math.min(20, scrapes - recent - first)));
  await waitFlushed(port, 'dash', 600_000);
  for (let first = scrapes - recent; first < scrapes; first += 4) {
    await send(body(set, startMs, first, Math.min(4, scrapes - first)));
    await waitFlushed(port, 'dash', 60_000);
  }
  return set.length;
}

/** The series count of a Prometheus API answer (a vector or matrix's entries, a list's length, 1 for a scalar). */
function seriesCount(text: string): number {
  const data = (JSON.parse(text) as { data: unknown }).data;
  if (Array.isArray(data)) return data.length;
  const result = (data as { result: unknown }).result;
  return Array.isArray(result) && typeof result[0] !== 'number' ? result.length : 1;
}

/** Median ms of both for one API path (service path, Prometheus path), after a warm-up; answers compared by series count. */
function compareCounted(port: number, promUrl: string, servicePath: string, promPath: string): Promise<[number, number]> {
  return compare(servicePath, promPath, port, promUrl, RUNS, (service, prometheus) => {
    if (seriesCount(service) !== seriesCount(prometheus)) throw new Error(`${servicePath}: ${seriesCount(service)} series, Prometheus ${seriesCount(prometheus)}`);
  });
}

const ratioText = (r: number) => `${fmt(r, 1)}×`;

interface Install {
  nodes: number;
  hours: number;
  /** Only the 20-panel refresh (the small install), not the whole set and the label calls. */
  panelsOnly: boolean;
}

/** The full set on NODES + 2 targets, then the 20-panel refresh on the 6 targets, each beside Prometheus. */
export async function benchDashboard(): Promise<string[][]> {
  buildPromql();
  const rows = ONLY === 'small' ? [] : await benchInstall({ nodes: NODES, hours: HOURS, panelsOnly: false });
  if (SMALL_NODES > 0 && ONLY !== 'meta') rows.push(...(await benchInstall({ nodes: SMALL_NODES, hours: SMALL_HOURS, panelsOnly: true })));
  return rows;
}

/** One install in a service and a Prometheus of its own: loaded alike, then asked the same queries in turn. */
async function benchInstall(install: Install): Promise<string[][]> {
  const end = Math.floor(Date.now() / 60_000) * 60_000 - 60_000;
  const start = end - install.hours * 3_600_000;
  const scrapes = Math.floor((end - start) / SCRAPE_MS) + 1;
  // No compaction: the recent hour stays in the per-minute files flushes wrote (the install).
  const service = await startService({ P_FLUSH_INTERVAL: '1s', P_COMPACTION_INTERVAL: '24h' });
  const prom = await startPrometheus();
  try {
    const series = await load(service.port, prom.url, dashboardSeries(install.nodes, install.hours), start, scrapes);
    const files = ((await (await fetch(`http://127.0.0.1:${service.port}/api/v1/logstream/dash/stats`, { headers: { 'X-API-Key': BENCH_KEY } })).json()) as { storage: { files: number } }).storage.files;
    const what = `${install.nodes} node + ${PROMS} Prometheus targets, ${fmt(series)} series × ${install.hours} h at 15 s, ${fmt(files)} files, median of ${RUNS}`;
    const rows: string[][] = [[`${install.panelsOnly ? 'small install' : 'dashboard set'} (${what})`, 'service ms', 'Prometheus 2.42 ms', 'ratio']];
    const ratios: number[] = [];
    let panels = [0, 0];
    const ask = async (name: string, params: string, panel: boolean) => {
      const [a, b] = await compareCounted(service.port, prom.url, `/prometheus/dash/api/v1/${params}`, `/api/v1/${params}`);
      ratios.push(a / b);
      if (panel) panels = [panels[0] + a, panels[1] + b];
      rows.push([name, fmt(a, 1), fmt(b, 2), ratioText(a / b)]);
    };
    if (ONLY !== 'meta') await askQueries(ask, end, install.panelsOnly);
    const sorted = [...ratios].sort((x, y) => x - y);
    if (sorted.length && !install.panelsOnly) {
      rows.push([`median ratio over ${ratios.length} queries`, '', '', ratioText(median(sorted))]);
      rows.push([`max ratio`, '', '', ratioText(sorted[sorted.length - 1])]);
    }
    const targets = install.nodes + PROMS;
    if (sorted.length) rows.push([`20-panel dashboard refresh, ${targets} targets (the first 20 1 h panels, total)`, fmt(panels[0], 1), fmt(panels[1], 1), ratioText(panels[0] / panels[1])]);
    if (!install.panelsOnly) rows.push(...(await askMeta(service.port, prom.url, end)));
    return rows;
  } finally {
    await prom.stop();
    await service.stop();
  }
}

/** Uncounted calls of each meta path before its median (see askMeta). */
const META_WARMUP = 20;

/**
 * `labels`, `label values` and `series` of the last hour, asked of both. The first `labels` call is
 * timed on its own: the service's label index holds no file of this dataset yet (labelIndex.ts), so it
 * reads the hour's files before it answers (a query worker answers, and the files are read in the
 * background, past 360 missing files). The medians are taken a second later, with the index warm, as it
 * stays while the service runs, each after
 * META_WARMUP uncounted calls: the index's code runs 1–3 ms a call until V8 has compiled it (~10 calls,
 * measured), 1.0–1.2 ms after.
 */
async function askMeta(port: number, promUrl: string, end: number): Promise<string[][]> {
  const rows: string[][] = [];
  const last = `start=${(end - 3_600_000) / 1000}&end=${end / 1000}`;
  const first = await timed(`http://127.0.0.1:${port}/prometheus/dash/api/v1/labels?${last}`, { 'X-API-Key': BENCH_KEY });
  const firstRef = await timed(`${promUrl}/api/v1/labels?${last}`, {});
  rows.push(['labels (last hour), the first call: the label index cold', fmt(first.ms, 1), fmt(firstRef.ms, 2), ratioText(first.ms / firstRef.ms)]);
  await new Promise((r) => setTimeout(r, 1000));
  for (const p of [`labels?${last}`, `label/__name__/values?${last}`, `label/instance/values?${last}`, `series?match[]=up&${last}`, `series?match[]=node_cpu_seconds_total{mode="idle"}&${last}`]) {
    for (let i = 0; i < META_WARMUP; i++) await timed(`http://127.0.0.1:${port}/prometheus/dash/api/v1/${p}`, { 'X-API-Key': BENCH_KEY });
    const [a, b] = await compareCounted(port, promUrl, `/prometheus/dash/api/v1/${p}`, `/api/v1/${p}`);
    rows.push([`${p.split('?')[0]} ${p.includes('match') ? decodeURIComponent(p.split('match[]=')[1].split('&')[0]) : ''} (last hour)`, fmt(a, 1), fmt(b, 2), ratioText(a / b)]);
  }
  return rows;
}

/** The 50 dashboard queries, instant then 1 h then 6 h panels, each asked of both (`panelsOnly`: the first 20 1 h panels). */
async function askQueries(ask: (name: string, params: string, panel: boolean) => Promise<void>, end: number, panelsOnly: boolean): Promise<void> {
  const q = (s: string) => encodeURIComponent(s);
  const lastHour = `start=${(end - 3_600_000) / 1000}&end=${end / 1000}&step=15`;
  if (panelsOnly) {
    for (const e of RANGE.slice(0, 20)) await ask(`1 h: ${e}`, `query_range?query=${q(e)}&${lastHour}`, true);
    return;
  }
  for (const e of INSTANT) await ask(`instant: ${e}`, `query?query=${q(e)}&time=${end / 1000}`, false);
  for (const [i, e] of RANGE.entries()) await ask(`1 h: ${e}`, `query_range?query=${q(e)}&${lastHour}`, i < 20);
  const sixHours = `start=${(end - 6 * 3_600_000) / 1000}&end=${end / 1000}&step=15`;
  for (const e of RANGE_6H) await ask(`6 h: ${e}`, `query_range?query=${q(e)}&${sixHours}`, false);
}

runIfMain(import.meta.filename, benchDashboard);
