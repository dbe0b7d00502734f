/**
 * The physical limits of this machine for the ingest path, measured in the same run as the service:
 * how fast one core runs `JSON.parse` over the very bodies the benchmark sends, how fast the disk
 * takes sequential write + fdatasync (large writes: bytes/s; small ones: commits/s), how many requests
 * per second a bare node:http server answers with the same client, and how fast DuckDB alone turns
 * the same events (as NDJSON) into ZSTD Parquet.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { freePort } from '../test/helpers/server.ts';
import { sendAll } from './lib.ts';

/** Events per CPU-second of `JSON.parse` on one thread over `bodies` (best of 3 passes, bytes decoded from UTF-8 as the service does). */
export function jsonParseRate(bodies: Buffer[], eventsPerBody: number): { eventsPerSec: number; mbPerSec: number } {
  let best = Infinity;
  for (let pass = 0; pass < 3; pass++) {
    const t = process.cpuUsage();
    for (const b of bodies) JSON.parse(b.toString('utf8'));
    const u = process.cpuUsage(t);
    best = Math.min(best, (u.user + u.system) / 1e6);
  }
  const bytes = bodies.reduce((s, b) => s + b.length, 0);
  return { eventsPerSec: (bodies.length * eventsPerBody) / best, mbPerSec: bytes / best / 1e6 };
}

/** Sequential write + fdatasync into the data directory's file system: `chunk` bytes per commit, for about `seconds`. */
export async function fsyncRate(dir: string, chunk: number, seconds: number): Promise<{ commitsPerSec: number; mbPerSec: number }> {
  const file = path.join(dir, `fsync-probe-${chunk}`);
  const handle = await fs.open(file, 'w');
  const buf = Buffer.alloc(chunk, 0x61);
  let commits = 0;
  let pos = 0;
  const started = performance.now();
  try {
    while (performance.now() - started < seconds * 1000) {
      await handle.write(buf, 0, buf.length, pos);
      await handle.datasync();
      pos += buf.length;
      commits++;
    }
  } finally {
    await handle.close();
    await fs.rm(file, { force: true });
  }
  const secs = (performance.now() - started) / 1000;
  return { commitsPerSec: commits / secs, mbPerSec: pos / secs / 1e6 };
}

/** Requests/s of a bare node:http server (reads the body, answers a small JSON) under `sendAll` with the same bodies and clients. */
export async function bareHttpRate(bodies: string[], clients: number): Promise<number> {
  const port = await freePort();
  const code = `require('node:http').createServer((req, res) => { const c = []; req.on('data', (d) => c.push(d)); req.on('end', () => { Buffer.concat(c); const b = '{"message":"ingested","count":1}'; res.writeHead(200, { 'content-type': 'application/json', 'content-length': b.length }); res.end(b); }); }).listen(${port}, '127.0.0.1', () => process.send('up'));`;
  const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  await new Promise((r) => child.once('message', r));
  try {
    const secs = await sendAll(port, '/', bodies, clients);
    return bodies.length / secs;
  } finally {
    child.kill();
  }
}

/** Events/s of DuckDB alone (its default threads) turning `bodies` (JSON arrays of flat-ish events) as NDJSON into ZSTD Parquet. */
export async function duckdbParquetRate(bodies: string[], events: number): Promise<number> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'lakehouse-limit-'));
  try {
    const ndjson = path.join(dir, 'events.ndjson');
    const handle = await fs.open(ndjson, 'w');
    for (const b of bodies) await handle.write(`${(JSON.parse(b) as unknown[]).map((e) => JSON.stringify(e)).join('\n')}\n`);
    await handle.close();
    const db = await DuckDBInstance.create(':memory:');
    const conn = await db.connect();
    const started = performance.now();
    await conn.run(`COPY (SELECT * FROM read_json('${ndjson}', format = 'newline_delimited')) TO '${path.join(dir, 'out.parquet')}' (FORMAT parquet, COMPRESSION zstd)`);
    const secs = (performance.now() - started) / 1000;
    conn.closeSync();
    return events / secs;
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}
