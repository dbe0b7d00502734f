/**
 * The physical limits of this machine for the ingest path, measured in the same run as the service:
 * how fast one core runs `JSON.parse` over the very bodies the benchmark sends, how fast the disk
 * takes sequential write + fdatasync (large writes: bytes/s; small ones: commits/s), how many requests
 * per second a bare node:http server answers with the same client, and how fast DuckDB alone turns
 * the same events (as NDJSON) into ZSTD Parquet.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { announcedPorts, median, post, sendAll } from './lib.ts';

/**
 * A probe server (`code` defines `server`, a node:http server not yet listening) started as the service is
 * (bench/lib.ts startService): it binds port 0 and reports the port in a `listening` line of the service's
 * shape, so no port is picked here and bound later by another process.
 */
async function startProbe(code: string): Promise<{ child: ChildProcess; port: number }> {
  const announce = `server.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ msg: 'listening', port: server.address().port, grpcPort: null, pgPort: null })));`;
  const child = spawn(process.execPath, ['-e', `${code}\n${announce}`], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    return { child, port: (await announcedPorts(child)).port };
  } catch (err) {
    child.kill();
    throw err;
  }
}

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
  const code = `const server = require('node:http').createServer((req, res) => { const c = []; req.on('data', (d) => c.push(d)); req.on('end', () => { Buffer.concat(c); const b = '{"message":"ingested","count":1}'; res.writeHead(200, { 'content-type': 'application/json', 'content-length': b.length }); res.end(b); }); });`;
  const { child, port } = await startProbe(code);
  try {
    const secs = await sendAll(port, '/', bodies, clients);
    return bodies.length / secs;
  } finally {
    child.kill();
  }
}

/**
 * DuckDB alone (its default threads) turning `bodies` (JSON arrays of flat-ish events) as NDJSON into
 * ZSTD Parquet: events/s, and CPU seconds per million events (DuckDB's threads are this process's, and
 * nothing else runs in it meanwhile).
 */
export async function duckdbParquetRate(bodies: string[], events: number): Promise<{ eventsPerSec: number; cpuSecPerMillion: number }> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'lakehouse-limit-'));
  try {
    const ndjson = path.join(dir, 'events.ndjson');
    const handle = await fs.open(ndjson, 'w');
    for (const b of bodies) await handle.write(`${(JSON.parse(b) as unknown[]).map((e) => JSON.stringify(e)).join('\n')}\n`);
    await handle.close();
    const db = await DuckDBInstance.create(':memory:');
    const conn = await db.connect();
    const started = performance.now();
    const cpu = process.cpuUsage();
    await conn.run(`COPY (SELECT * FROM read_json('${ndjson}', format = 'newline_delimited')) TO '${path.join(dir, 'out.parquet')}' (FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL 1)`);
    const secs = (performance.now() - started) / 1000;
    const used = process.cpuUsage(cpu);
    conn.closeSync();
    return { eventsPerSec: events / secs, cpuSecPerMillion: ((used.user + used.system) / 1e6 / events) * 1e6 };
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

/**
 * The floor of a query's fixed cost that the sandbox's process isolation sets: a bare node:http server
 * that hands each request to a child process over IPC (advanced serialization, as the query pool does)
 * and answers with what comes back. Median round trip in ms over `n` sequential POSTs.
 */
export async function isolatedHttpRoundTripMs(n = 200): Promise<number> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'lakehouse-hop-'));
  const worker = path.join(dir, 'worker.cjs');
  await fs.writeFile(worker, `process.on('message', (m) => process.send({ id: m.id, rows: JSON.stringify([{ one: 1 }]) }));`);
  const code = `const child = require('node:child_process').fork(${JSON.stringify(worker)}, [], { serialization: 'advanced' });
const waiting = new Map(); let next = 0;
child.on('message', (m) => { const res = waiting.get(m.id); waiting.delete(m.id); res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(m.rows) }); res.end(m.rows); });
const server = require('node:http').createServer((req, res) => { const c = []; req.on('data', (d) => c.push(d)); req.on('end', () => { const id = next++; waiting.set(id, res); child.send({ id, sql: Buffer.concat(c).toString() }); }); });`;
  const { child: server, port } = await startProbe(code);
  try {
    const times: number[] = [];
    const body = JSON.stringify({ query: 'SELECT 1 AS one', startTime: '2000-01-01T00:00:00Z', endTime: '2100-01-01T00:00:00Z' });
    for (let i = 0; i < n; i++) {
      const t = performance.now();
      const res = await post(port, '/', body);
      if (res.status !== 200) throw new Error(`isolation probe answered ${res.status}`);
      if (i >= 10) times.push(performance.now() - t);
    }
    return median(times);
  } finally {
    server.kill();
    await fs.rm(dir, { recursive: true, force: true });
  }
}
