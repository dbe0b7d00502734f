/**
 * PromQL: three dashboard-style query_range queries over 1,000 series × 24 h of samples at 15 s, timed
 * against Debian's Prometheus 2.42 holding the same samples (both fed by remote write in the same
 * run), and the cost of the labels/series calls. Run alone: `npx tsx bench/promql.ts`.
 */
import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import snappy from 'snappy';
import { WriteRequestV1 } from '../src/ingest/prometheus/decode.ts';
import { api, BENCH_KEY, fmt, median, post, root, runIfMain, startService, waitFlushed } from './lib.ts';
import { buildPromql } from '../scripts/build-promql.ts';

const HOURS = Number(process.env.BENCH_PROMQL_HOURS ?? 24);
const SCRAPE_MS = 15_000;
const RUNS = 5;

/** 1,000 series: 400 counters, 500 histogram buckets (50 histograms × 10 le), 100 gauges. */
function seriesSet(): { labels: Record<string, string>; value: (i: number) => number }[] {
  const out: { labels: Record<string, string>; value: (i: number) => number }[] = [];
  for (let s = 0; s < 10; s++)
    for (let inst = 0; inst < 20; inst++)
      for (const code of ['200', '500']) {
        const rate = (s + 1) * (code === '200' ? 10 : 1) + inst;
        out.push({ labels: { __name__: 'bench_requests_total', service: `svc${s}`, instance: `i${inst}`, code }, value: (i) => i * rate });
      }
  const les = ['0.005', '0.01', '0.025', '0.05', '0.1', '0.25', '0.5', '1', '2.5', '+Inf'];
  for (let s = 0; s < 10; s++)
    for (let inst = 0; inst < 5; inst++)
      les.forEach((le, k) => out.push({ labels: { __name__: 'bench_latency_seconds_bucket', service: `svc${s}`, instance: `i${inst}`, le }, value: (i) => i * (k + 1) * (s + 2) }));
  for (let inst = 0; inst < 100; inst++) out.push({ labels: { __name__: 'bench_memory_bytes', instance: `m${inst}` }, value: (i) => 1e8 + ((i * 7919 + inst * 104729) % 1e7) });
  return out;
}

const QUERIES: [string, string][] = [
  ['requests/s by service', 'sum by (service) (rate(bench_requests_total[5m]))'],
  ['p95 latency by service', 'histogram_quantile(0.95, sum by (le, service) (rate(bench_latency_seconds_bucket[5m])))'],
  ['top 5 memory', 'topk(5, avg by (instance) (bench_memory_bytes))'],
];

/** Remote-write bodies, each a block of consecutive scrapes of every series, in time order. */
function bodies(startMs: number, scrapes: number, perBody: number): Buffer[] {
  const set = seriesSet();
  const out: Buffer[] = [];
  for (let first = 0; first < scrapes; first += perBody) {
    const n = Math.min(perBody, scrapes - first);
    const timeseries = set.map((s) => ({
      labels: Object.entries(s.labels).map(([name, value]) => ({ name, value })),
      samples: Array.from({ length: n }, (_, k) => ({ timestamp: startMs + (first + k) * SCRAPE_MS, value: s.value(first + k) })),
    }));
    out.push(snappy.compressSync(Buffer.from(WriteRequestV1.encode(WriteRequestV1.fromObject({ timeseries })).finish())));
  }
  return out;
}

/** Prometheus' log line naming the address it bound (exporter-toolkit's `msg="Listening on" address=…`). */
const LISTENING = /msg="Listening on" address=(\S+)/;

/**
 * Debian's Prometheus on a port it picks itself (`--web.listen-address=127.0.0.1:0`), read back from its
 * log: a port picked here, released and bound later could be taken in between (test/README.md).
 */
export async function startPrometheus(): Promise<{ url: string; stop: () => Promise<void> }> {
  const binary = execFileSync('bash', [path.join(root, 'scripts/ensure-deb.sh'), 'prometheus', 'prometheus'], { encoding: 'utf8' }).trim();
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'bench-prometheus-'));
  await fs.writeFile(path.join(dir, 'prometheus.yml'), 'global:\n  scrape_interval: 1h\n');
  // At the query workers' priority (nice 10, src/query/worker/pool.ts), so that whatever else runs on the
  // machine weighs on both alike (at nice 0 it would get ~9× a worker's share of a busy core).
  const args = [`--config.file=${dir}/prometheus.yml`, `--storage.tsdb.path=${dir}/data`, '--web.listen-address=127.0.0.1:0', '--web.enable-remote-write-receiver'];
  const child = spawn('nice', ['-n', '10', binary, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const stop = async () => {
    child.kill('SIGKILL');
    await exited;
    await fs.rm(dir, { recursive: true, force: true });
  };
  try {
    const url = `http://${await listenAddress(child.stderr!, exited)}`;
    for (let i = 0; ; i++) {
      if (await fetch(`${url}/-/ready`).then((r) => r.ok, () => false)) break;
      if (i > 300) throw new Error('prometheus did not become ready');
      await new Promise((r) => setTimeout(r, 100));
    }
    return { url, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** The address in Prometheus' "Listening on" log line (its log is drained after, so that it never blocks). */
function listenAddress(log: NodeJS.ReadableStream, exited: Promise<void>): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    const onData = (b: Buffer) => {
      text = (text + b.toString('utf8')).slice(-65_536);
      const m = LISTENING.exec(text);
      if (!m) return;
      log.off('data', onData);
      log.resume();
      resolve(m[1]);
    };
    log.on('data', onData);
    void exited.then(() => reject(new Error(`prometheus exited before listening: ${text.slice(-2000)}`)));
    setTimeout(() => reject(new Error(`prometheus named no listen address in 30 s: ${text.slice(-2000)}`)), 30_000).unref();
  });
}

/** Waits until compaction has merged the dataset's files down to about one an hour. */
async function waitCompacted(port: number, files: number): Promise<void> {
  const deadline = Date.now() + 300_000;
  for (;;) {
    const stats = (await api(port, 'GET', '/api/v1/logstream/bench/stats')) as { storage: { files: number } };
    if (stats.storage.files <= files) return;
    if (Date.now() > deadline) throw new Error(`bench not compacted in time (${stats.storage.files} files)`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}

export async function timed(url: string, headers: Record<string, string>): Promise<{ ms: number; body: string }> {
  const started = performance.now();
  const res = await fetch(url, { headers });
  const body = await res.text();
  if (!res.ok) throw new Error(`${url} → ${res.status}: ${body.slice(0, 300)}`);
  return { ms: performance.now() - started, body };
}

/**
 * Median ms of both for one API path (service path, Prometheus path) over `runs`, each asked in turn after a
 * warm-up whose two answers go to `check` (which throws on a mismatch).
 */
export async function compare(
  servicePath: string,
  promPath: string,
  port: number,
  promUrl: string,
  runs = RUNS,
  check: (service: string, prometheus: string) => void = () => undefined,
): Promise<[number, number]> {
  const svc = `http://127.0.0.1:${port}${servicePath}`;
  const key = { 'X-API-Key': BENCH_KEY };
  const first = await timed(svc, key);
  const ref = await timed(`${promUrl}${promPath}`, {});
  check(first.body, ref.body);
  const a: number[] = [];
  const b: number[] = [];
  for (let i = 0; i < runs; i++) {
    a.push((await timed(svc, key)).ms);
    b.push((await timed(`${promUrl}${promPath}`, {})).ms);
  }
  return [median(a), median(b)];
}

export async function benchPromql(): Promise<string[][]> {
  const end = Math.floor(Date.now() / 60_000) * 60_000 - 60_000;
  const start = end - HOURS * 3_600_000;
  const scrapes = Math.floor((end - start) / SCRAPE_MS) + 1;
  const data = bodies(start, scrapes, 20);
  const samples = seriesSet().length * scrapes;
  buildPromql();
  // A day of 400 series is millions of samples per query: measured, not cut off at the default 30 s.
  // Compaction every 2 s: the day is read as a dashboard reads one in steady state, one file an hour
  // (not the minute files flushes write, which compaction merges within a minute or two).
  const service = await startService({ P_QUERY_TIMEOUT: '600s', P_COMPACTION_INTERVAL: '2s' });
  const prom = await startPrometheus();
  try {
    for (const b of data) {
      const res = await post(service.port, '/v1/prometheus/write?stream=bench', b, { 'content-encoding': 'snappy', 'content-type': 'application/x-protobuf' });
      if (res.status !== 200) throw new Error(`remote write to the service: ${res.status} ${res.body}`);
      const p = await fetch(`${prom.url}/api/v1/write`, { method: 'POST', body: new Uint8Array(b), headers: { 'content-encoding': 'snappy', 'content-type': 'application/x-protobuf' } });
      if (p.status >= 300) throw new Error(`remote write to Prometheus: ${p.status} ${await p.text()}`);
    }
    await waitFlushed(service.port, 'bench', 600_000);
    await waitCompacted(service.port, HOURS + 2);
    const rows: string[][] = [['PromQL (1,000 series × ' + HOURS + ' h at 15 s, ' + fmt(samples) + ' samples)', 'service ms', 'Prometheus 2.42 ms', 'ratio']];
    const range = `start=${start / 1000}&end=${end / 1000}&step=60`;
    for (const [name, q] of QUERIES) {
      const params = `query=${encodeURIComponent(q)}&${range}`;
      const [a, b] = await compare(`/prometheus/bench/api/v1/query_range?${params}`, `/api/v1/query_range?${params}`, service.port, prom.url);
      rows.push([`query_range: ${name} (${HOURS} h, step 60 s)`, fmt(a, 1), fmt(b, 1), `${fmt(a / b, 1)}×`]);
    }
    const last = `start=${(end - 3_600_000) / 1000}&end=${end / 1000}`;
    for (const [name, p] of [
      ['labels (last hour)', `labels?${last}`],
      ['label/__name__/values (last hour)', `label/__name__/values?${last}`],
      ['series bench_requests_total (last hour)', `series?match[]=bench_requests_total&${last}`],
    ]) {
      const [a, b] = await compare(`/prometheus/bench/api/v1/${p}`, `/api/v1/${p}`, service.port, prom.url);
      rows.push([name, fmt(a, 1), fmt(b, 1), `${fmt(a / b, 1)}×`]);
    }
    return rows;
  } finally {
    await prom.stop();
    await service.stop();
  }
}

runIfMain(import.meta.filename, benchPromql);
