/**
 * OTLP/JSON logs: CPU seconds of the service's process tree per million log records, from the first
 * request until the WAL is in Parquet (flush included), over a few rounds (each into a new dataset of
 * the same service), split into the ingest worker threads, the event loop and the rest (DuckDB's flush,
 * V8's helper threads). Beside two references measured in the same run on the same data: `JSON.parse`
 * of the very bodies sent (one core), and DuckDB alone (one thread, as the service's flush) turning the
 * rows the service stores — its own WAL lines for these bodies — into ZSTD Parquet. Their sum is the
 * least a design that parses each body and has DuckDB write the Parquet spends per record.
 *
 * `npx tsx bench/otlpLogs.ts` runs it alone; BENCH_OTLP_LOG_ROUNDS (3), BENCH_OTLP_REQUESTS (200).
 */
import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { serializeJob, type IngestJob } from '../src/ingest/worker/pipeline.ts';
import { walScanSql } from '../src/storage/files/parquetWriter.ts';
import { emptySchema } from '../src/storage/dataset/schema.ts';
import type { ColumnType } from '../src/model.ts';
import { jsonParseRate } from './limits.ts';
import { fmt, median, runIfMain, sendAll, settle, startService, waitFlushed, watchTree } from './lib.ts';
import { logsRequest } from './otel.ts';

const PER_REQUEST = 1000;

/** CPU seconds per million records of DuckDB alone writing the service's WAL lines for `bodies` as Parquet (flush settings). */
async function duckdbFlushCpu(bodies: Buffer[]): Promise<number> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'lakehouse-otlp-limit-'));
  try {
    const wal = path.join(dir, 'wal.ndjson');
    const handle = await fs.open(wal, 'w');
    const schema = emptySchema();
    const received = new Date().toISOString();
    for (const body of bodies) {
      const job: IngestJob = { kind: 'otlp', signal: 'logs', format: 'json', received, body, maxDecompressedBytes: 64 << 20, limits: { maxEvents: 100_000, maxValues: 4_000_000, maxNames: 4000 } };
      const r = serializeJob(job, { schema, maxColumns: 1000 });
      for (const [name, types] of r.types) schema[name] ??= types[0];
      await handle.write(typeof r.lines === 'string' ? Buffer.from(r.lines) : r.lines);
    }
    await handle.close();
    const db = await DuckDBInstance.create(':memory:', { threads: '1' });
    const conn = await db.connect();
    const columns = Object.entries(schema) as [string, ColumnType][];
    const cpu = process.cpuUsage();
    await conn.run(`COPY (${walScanSql([wal], columns, 'time_unix_nano')}) TO '${path.join(dir, 'out.parquet')}' (FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL 1)`);
    const used = process.cpuUsage(cpu);
    conn.closeSync();
    return ((used.user + used.system) / 1e6 / (bodies.length * PER_REQUEST)) * 1e6;
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

export async function benchOtlpLogs(): Promise<string[][]> {
  const requests = Number(process.env.BENCH_OTLP_REQUESTS ?? 200);
  const rounds = Number(process.env.BENCH_OTLP_LOG_ROUNDS ?? 3);
  const records = requests * PER_REQUEST;
  const base = Date.now() - 3_600_000;
  const bodies = Array.from({ length: requests }, (_, i) => Buffer.from(JSON.stringify(logsRequest(PER_REQUEST, i, base + i * PER_REQUEST))));
  const perMillion = (sec: number) => (sec / records) * 1e6;

  const parse = 1e6 / jsonParseRate(bodies, PER_REQUEST).eventsPerSec;
  const duck = await duckdbFlushCpu(bodies);

  const rows: string[][] = [['case', 'records', 'records/s', 'CPU s/1M records', 'ingest threads', 'event loop', 'other threads']];
  const totals: number[] = [];
  const server = await startService({ P_FLUSH_INTERVAL: '5s' });
  try {
    await settle(server.pid);
    for (let round = 1; round <= rounds; round++) {
      const dataset = `otlp_logs_json_${round}`;
      const watch = watchTree(server.pid);
      const secs = await sendAll(server.port, `/v1/logs?stream=${dataset}`, bodies, 8, { 'content-type': 'application/json' });
      await waitFlushed(server.port, dataset);
      const use = await watch.stop();
      let ingest = 0;
      let loop = 0;
      for (const [thread, sec] of use.byThread) {
        if (thread.startsWith('ingest-worker/')) ingest += sec;
        else if (thread.endsWith(`/${server.pid}`)) loop += sec;
      }
      totals.push(perMillion(use.cpuSec));
      rows.push([`round ${round}`, fmt(records), fmt(records / secs), fmt(perMillion(use.cpuSec), 1), fmt(perMillion(ingest), 1), fmt(perMillion(loop), 1), fmt(perMillion(use.cpuSec - ingest - loop), 1)]);
    }
  } finally {
    await server.stop();
  }
  rows.push([`service, median of ${rounds} (${fmt(Math.min(...totals), 1)}–${fmt(Math.max(...totals), 1)})`, '', '', fmt(median(totals), 1), '', '', '']);
  rows.push(['reference: JSON.parse of the bodies, 1 core', '', '', fmt(parse, 1), '', '', '']);
  rows.push(['reference: DuckDB alone, the same rows → Parquet', '', '', fmt(duck, 1), '', '', '']);
  rows.push(['reference: the two together (the floor)', '', '', fmt(parse + duck, 1), '', '', `service ${fmt(median(totals) / (parse + duck), 2)} × floor`]);
  return rows;
}

runIfMain(import.meta.filename, benchOtlpLogs);
