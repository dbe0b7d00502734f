import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { BENCH_KEY, listFiles, sendAll, startService, waitFlushed } from './lib.ts';
const now = Date.now();
const out: string[] = [];
for (let m = 20; m >= 1; m--) {
  const base = now - m * 60_000;
  out.push(JSON.stringify(Array.from({ length: 2000 }, (_, i) => ({ time: new Date(base + Math.floor((i * 60_000) / 2000)).toISOString(), level: i % 7 ? 'info' : 'error', service: `svc-${i % 13}`, latency_ms: (i * 7919) % 1000, message: `request ${m * 2000 + i}` }))));
}
const server = await startService({ P_FLUSH_INTERVAL: '1s' });
await fetch(`http://127.0.0.1:${server.port}/api/v1/logstream/small_sql`, { method: 'PUT', headers: { 'x-api-key': BENCH_KEY, 'x-p-time-partition': 'time' } });
await sendAll(server.port, '/api/v1/logstream/small_sql', out, 1);
await waitFlushed(server.port, 'small_sql');
const files = await listFiles(path.join(server.dataDir, 'store', 'small_sql'), '.parquet');
for (const f of files) await fs.copyFile(f, path.join('/tmp/h5', path.relative(server.dataDir, f).replaceAll('/', '_')));
await fs.writeFile('/tmp/h5/now.txt', String(now));
console.log(files.length);
await server.stop();
