import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startS3Server, type S3TestServer } from '../test/helpers/s3server.ts';
import { api, BENCH_KEY, fmt, sendAll, startService, waitFlushed } from './lib.ts';

/**
 * Object-store requests the lake adds, counted on S3 (moto) at an HTTP relay between the service and
 * the bucket: per flush (a batch sent, flushed, and — lake on — committed), and per second of an idle
 * dataset, with `P_ICEBERG` on against off (the reference: what the flush itself costs). Each service
 * has its own moto, so neither sees the other's objects.
 */

const FLUSHES = 5;
const IDLE_MS = 10_000;

/** A relay that forwards each request to `target` and counts it by kind. */
async function countingRelay(target: string): Promise<{ endpoint: string; counts: Map<string, number>; close: () => Promise<void> }> {
  const counts = new Map<string, number>();
  const agent = new http.Agent({ keepAlive: true });
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', target);
    const kind =
      req.method === 'GET' && (url.searchParams.has('list-type') || url.searchParams.has('prefix'))
        ? 'LIST'
        : req.method === 'PUT' && req.headers['if-none-match']
          ? 'PUT (conditional)'
          : (req.method ?? '?');
    // The lake's own objects are under each dataset's `.iceberg/` prefix (docs/lake.md).
    const lake = decodeURIComponent(url.pathname + url.search).includes('/.iceberg/') ? 'lake ' : '';
    counts.set(lake + kind, (counts.get(lake + kind) ?? 0) + 1);
    const up = http.request(url, { method: req.method, headers: req.headers, agent }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    counts,
    close: () => {
      agent.destroy();
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

async function metric(port: number, pattern: RegExp): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { authorization: `Bearer ${BENCH_KEY}` } })).text();
  return Number(pattern.exec(text)?.[1] ?? 0);
}

const COMMITTED = /^lakehouse_iceberg_commits_total\{result="committed"\} (\d+)/m;
const FLUSHED = /^lakehouse_flushes_total\{result="ok"\} (\d+)/m;

const lakeOnly = (m: Map<string, number>) => new Map([...m].filter(([k]) => k.startsWith('lake ')).map(([k, v]) => [k.slice(5), v]));
const diff = (after: Map<string, number>, before: Map<string, number>) => new Map([...after].map(([k, v]) => [k, v - (before.get(k) ?? 0)]));
const total = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);
const show = (m: Map<string, number>, per: number) =>
  `${fmt(total(m) / per, 1)} (${[...m]
    .filter(([, v]) => v > 0)
    .sort()
    .map(([k, v]) => `${k} ${fmt(v / per, 1)}`)
    .join(', ')})`;

/** One service on its own moto: requests per flush, and per second idle. */
async function measure(lake: boolean, body: Buffer): Promise<{ perFlush: Map<string, number>; flushes: number; idle: Map<string, number> }> {
  let s3: S3TestServer | undefined;
  let relay: Awaited<ReturnType<typeof countingRelay>> | undefined;
  let service: Awaited<ReturnType<typeof startService>> | undefined;
  try {
    s3 = await startS3Server();
    relay = await countingRelay(s3.endpoint);
    const env = { P_STORAGE: 's3', P_S3_URL: relay.endpoint, P_S3_BUCKET: s3.bucket, P_S3_ACCESS_KEY: s3.accessKey, P_S3_SECRET_KEY: s3.secretKey };
    service = await startService({ ...env, P_FLUSH_INTERVAL: '2s', P_ICEBERG_INTERVAL: '1s', P_COMPACTION_INTERVAL: '1h', P_ICEBERG: lake ? 'on' : 'off' });
    const port = service.port;
    await api(port, 'PUT', '/api/v1/logstream/requests');
    // The first flush and commit (table creation) are not counted.
    const once = async () => {
      const commits = await metric(port, COMMITTED);
      await sendAll(port, '/api/v1/logstream/requests', [body], 1);
      await waitFlushed(port, 'requests');
      if (lake) for (let i = 0; i < 600 && (await metric(port, COMMITTED)) <= commits; i++) await new Promise((r) => setTimeout(r, 100));
    };
    await once();
    const before = new Map(relay.counts);
    const flushedBefore = await metric(port, FLUSHED);
    for (let i = 0; i < FLUSHES; i++) await once();
    const perFlush = diff(relay.counts, before);
    const flushes = (await metric(port, FLUSHED)) - flushedBefore;
    const idleBefore = new Map(relay.counts);
    await new Promise((r) => setTimeout(r, IDLE_MS));
    return { perFlush, flushes, idle: diff(relay.counts, idleBefore) };
  } finally {
    await service?.stop();
    await relay?.close();
    await s3?.close();
  }
}

/** Counts by kind, the lake's and the rest together. */
function merged(m: Map<string, number>): Map<string, number> {
  const out = new Map<string, number>();
  for (const [k, v] of m) out.set(k.replace(/^lake /, ''), (out.get(k.replace(/^lake /, '')) ?? 0) + v);
  return out;
}

/** Rows: requests per flush and per idle second, lake off (the reference) and on. */
export async function icebergRequests(body: Buffer): Promise<string[][]> {
  const off = await measure(false, body);
  const on = await measure(true, body);
  return [
    [`S3 requests (moto, counted at a relay; ${FLUSHES} batches of 1,000 events, each flushed and published)`, 'all requests per flush', 'of which the lake\'s (.iceberg/)', `idle, per second over ${IDLE_MS / 1000} s: all`, 'of which the lake\'s'],
    ['P_ICEBERG=off (reference)', show(merged(off.perFlush), off.flushes), '', show(merged(off.idle), IDLE_MS / 1000), ''],
    ['P_ICEBERG=on', show(merged(on.perFlush), on.flushes), show(lakeOnly(on.perFlush), on.flushes), show(merged(on.idle), IDLE_MS / 1000), show(lakeOnly(on.idle), IDLE_MS / 1000)],
  ];
}
