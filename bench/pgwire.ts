/**
 * The PostgreSQL door in the same run as its references: 1M rows through the wire vs HTTP streaming
 * (`streaming=true`) vs DuckDB reading the same Parquet files in this process; and a one-row query's
 * latency over the wire vs HTTP. The wire client is a minimal one (counts DataRow messages, parses
 * nothing), the HTTP client splits NDJSON lines and parses them: each side pays what a client must.
 */
import * as http from 'node:http';
import * as net from 'node:net';
import * as path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { api, BENCH_KEY, fmt, listFiles, median, post, sendAll, startService, waitFlushed } from './lib.ts';
import { makeLogEvents } from './logs.ts';

const COLUMNS = 'p_timestamp, level, service, host, message, http_status, http_latency_ms';

/** A PostgreSQL connection that speaks just enough: login, simple queries, rows counted. */
class WireClient {
  private buf: Buffer = Buffer.alloc(0);
  private waiting?: () => void;
  private constructor(private readonly socket: net.Socket) {
    socket.on('data', (d: Buffer) => {
      this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
      this.waiting?.();
    });
  }

  static async connect(port: number, password: string): Promise<WireClient> {
    const socket = net.connect(port, '127.0.0.1');
    await new Promise<void>((r, j) => socket.once('connect', () => r()).once('error', j));
    socket.setNoDelay(true);
    const c = new WireClient(socket);
    const params = Buffer.from('user\0bench\0database\0bench\0\0');
    const head = Buffer.alloc(8);
    head.writeInt32BE(8 + params.length, 0);
    head.writeInt32BE(196608, 4);
    socket.write(Buffer.concat([head, params]));
    await c.until((t) => t === 0x52); // AuthenticationCleartextPassword
    socket.write(message('p', Buffer.from(`${password}\0`)));
    await c.until((t) => t === 0x5a);
    return c;
  }

  /** Reads messages until `stop` says so; returns the DataRows seen. Throws on an ErrorResponse. */
  private async until(stop: (type: number) => boolean): Promise<number> {
    let rows = 0;
    for (;;) {
      while (this.buf.length >= 5) {
        const len = this.buf.readInt32BE(1);
        if (this.buf.length < len + 1) break;
        const type = this.buf[0];
        if (type === 0x45) throw new Error(`server error: ${this.buf.subarray(5, len + 1).toString('utf8')}`);
        this.buf = this.buf.subarray(len + 1);
        if (type === 0x44) rows++;
        else if (stop(type)) return rows;
      }
      await new Promise<void>((r) => (this.waiting = r));
      this.waiting = undefined;
    }
  }

  async query(sql: string): Promise<number> {
    this.socket.write(message('Q', Buffer.from(`${sql}\0`)));
    return this.until((t) => t === 0x5a);
  }

  close(): void {
    this.socket.end(message('X', Buffer.alloc(0)));
  }
}

function message(type: string, body: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head.write(type, 0, 'latin1');
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

/** Rows of an HTTP streamed query (NDJSON: one array of rows per line), each line parsed. */
function httpStreamRows(port: number, sql: string): Promise<number> {
  const body = JSON.stringify({ query: sql, startTime: '2000-01-01T00:00:00Z', endTime: '2100-01-01T00:00:00Z', streaming: true });
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: '/api/v1/query', method: 'POST', headers: { 'x-api-key': BENCH_KEY, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (res) => {
        let rest = '';
        let rows = 0;
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          const lines = (rest + d).split('\n');
          rest = lines.pop()!;
          for (const l of lines) {
            const parsed = JSON.parse(l) as unknown;
            if (Array.isArray(parsed)) rows += parsed.length;
            else if ((parsed as { error?: string }).error) reject(new Error((parsed as { error: string }).error));
          }
        });
        res.on('end', () => resolve(rows));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

export async function benchPgWire(rowsWanted = Number(process.env.BENCH_PG_ROWS ?? 1_000_000)): Promise<string[][]> {
  // No compaction during the run: the direct read lists the Parquet files, and a compacted file's
  // sources stay on disk for a grace period (both would be counted).
  const server = await startService({ P_PG_ADDR: '127.0.0.1:0', P_QUERY_TIMEOUT: '300s', P_COMPACTION_INTERVAL: '24h' });
  const pgPort = server.pgPort!;
  try {
    const events = makeLogEvents(rowsWanted, 11);
    const bodies: string[] = [];
    for (let i = 0; i < events.length; i += 1000) bodies.push(JSON.stringify(events.slice(i, i + 1000)));
    events.length = 0;
    await api(server.port, 'PUT', '/api/v1/logstream/bench_pg');
    await sendAll(server.port, '/api/v1/logstream/bench_pg', bodies, 4);
    await waitFlushed(server.port, 'bench_pg');
    const sql = `SELECT ${COLUMNS} FROM bench_pg`;
    const files = await listFiles(path.join(server.dataDir, 'store', 'bench_pg'), '.parquet');
    const duck = await DuckDBInstance.create(':memory:', { threads: '2' });
    const conn = await duck.connect();
    const wire = await WireClient.connect(pgPort, BENCH_KEY);

    const runs = Number(process.env.BENCH_PG_RUNS ?? 3);
    const rate: Record<'wire' | 'http' | 'duckdb', number[]> = { wire: [], http: [], duckdb: [] };
    // Interleaved, so a machine busy with something else weighs on each alike.
    for (let i = 0; i < runs; i++) {
      let t = performance.now();
      const w = await wire.query(sql);
      rate.wire.push(w / ((performance.now() - t) / 1000));
      t = performance.now();
      const h = await httpStreamRows(server.port, sql);
      rate.http.push(h / ((performance.now() - t) / 1000));
      t = performance.now();
      const result = await conn.stream(`SELECT ${COLUMNS} FROM read_parquet([${files.map((f) => `'${f}'`).join(', ')}], hive_partitioning = false)`);
      let d = 0;
      for (;;) {
        const chunk = await result.fetchChunk();
        if (!chunk || chunk.rowCount === 0) break;
        d += chunk.getRows().length;
      }
      rate.duckdb.push(d / ((performance.now() - t) / 1000));
      if (w !== rowsWanted || h !== rowsWanted || d !== rowsWanted) throw new Error(`row counts differ: wire ${w}, http ${h}, duckdb ${d}, expected ${rowsWanted}`);
    }

    const one = 'SELECT level, service FROM bench_pg LIMIT 1';
    const latency: Record<'wire' | 'http', number[]> = { wire: [], http: [] };
    const body = JSON.stringify({ query: one, startTime: '2000-01-01T00:00:00Z', endTime: '2100-01-01T00:00:00Z' });
    for (let i = 0; i < 31; i++) {
      let t = performance.now();
      if ((await wire.query(one)) !== 1) throw new Error('one-row query over the wire returned another count');
      latency.wire.push(performance.now() - t);
      t = performance.now();
      const res = await post(server.port, '/api/v1/query', body);
      if (res.status !== 200) throw new Error(`HTTP query failed: ${res.body}`);
      latency.http.push(performance.now() - t);
    }
    wire.close();
    conn.closeSync();

    const m = { wire: median(rate.wire), http: median(rate.http), duckdb: median(rate.duckdb) };
    return [
      ['', 'rows/s', 'vs DuckDB direct'],
      [`${fmt(rowsWanted)} rows, PostgreSQL wire (text)`, fmt(m.wire), `${fmt(m.wire / m.duckdb, 2)}×`],
      [`${fmt(rowsWanted)} rows, HTTP streaming (NDJSON)`, fmt(m.http), `${fmt(m.http / m.duckdb, 2)}×`],
      [`${fmt(rowsWanted)} rows, DuckDB on the same files`, fmt(m.duckdb), '1.00×'],
      ['one-row query, PostgreSQL wire (median ms)', fmt(median(latency.wire), 2), ''],
      ['one-row query, HTTP (median ms)', fmt(median(latency.http), 2), ''],
    ];
  } finally {
    await server.stop();
  }
}
