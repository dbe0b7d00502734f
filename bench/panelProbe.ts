/**
 * Profiling probe (not part of `npm run bench`): the 6-target install loaded once into
 * PROBE_DIR (kept), then the 20 panels timed against the service alone, PROBE_RUNS each.
 */
import * as fs from 'node:fs';
import { post, startService, waitFlushed, median, fmt } from './lib.ts';
import { dashboardSeries, body, RANGE } from './dashboard.ts';
import { timed } from './promql.ts';
import { BENCH_KEY } from './lib.ts';
import { buildPromql } from '../scripts/build-promql.ts';

const DIR = process.env.PROBE_DIR ?? '/tmp/panel-probe';
const RUNS = Number(process.env.PROBE_RUNS ?? 9);

async function main() {
  buildPromql();
  const fresh = !fs.existsSync(`${DIR}/end`);
  fs.mkdirSync(DIR, { recursive: true });
  const service = await startService({ P_DATA_DIR: `${DIR}/data`, P_FLUSH_INTERVAL: '1s', P_COMPACTION_INTERVAL: '24h' });
  try {
    if (fresh) {
      const end = Math.floor(Date.now() / 60_000) * 60_000 - 60_000;
      const start = end - 2 * 3_600_000;
      const scrapes = Math.floor((end - start) / 15_000) + 1;
      const set = dashboardSeries(4, 2);
      const send = async (b: Buffer) => {
        const res = await post(service.port, '/v1/prometheus/write?stream=dash', b, { 'content-encoding': 'snappy', 'content-type': 'application/x-protobuf' });
        if (res.status !== 200) throw new Error(`${res.status} ${res.body}`);
      };
      const recent = 240;
      for (let first = 0; first < scrapes - recent; first += 20) await send(body(set, start, first, Math.min(20, scrapes - recent - first)));
      await waitFlushed(service.port, 'dash', 600_000);
      for (let first = scrapes - recent; first < scrapes; first += 4) {
        await send(body(set, start, first, Math.min(4, scrapes - first)));
        await waitFlushed(service.port, 'dash', 60_000);
      }
      fs.writeFileSync(`${DIR}/end`, String(end));
    }
    const end = Number(fs.readFileSync(`${DIR}/end`, 'utf8'));
    const lastHour = `start=${(end - 3_600_000) / 1000}&end=${end / 1000}&step=15`;
    const urls = RANGE.slice(0, 20).map((e) => `http://127.0.0.1:${service.port}/prometheus/dash/api/v1/query_range?query=${encodeURIComponent(e)}&${lastHour}`);
    const key = { 'X-API-Key': BENCH_KEY };
    for (const u of urls) await timed(u, key);
    const per: number[][] = urls.map(() => []);
    for (let r = 0; r < RUNS; r++) for (const [i, u] of urls.entries()) per[i].push((await timed(u, key)).ms);
    let total = 0;
    for (const [i, xs] of per.entries()) {
      total += median(xs);
      if (process.env.PROBE_VERBOSE) console.log(`${fmt(median(xs), 2)}  ${RANGE[i]}`);
    }
    console.log(`20-panel total ${fmt(total, 1)} ms (median of ${RUNS} each)`);
  } finally {
    await service.stop();
  }
}
void main();
