/**
 * The S3 backend: flush throughput to the bucket, then cold (empty cache) and warm query latency over
 * ≥ 100 small files before and after compaction, next to DuckDB reading the same files on local disk.
 */
import * as path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { startS3Server } from '../test/helpers/s3server.ts';
import { api, fmt, listFiles, median, post, sendAll, startService, waitFlushed } from './lib.ts';

type Stats = { ingestion: { count: number }; storage: { size: number; files: number } };

export async function benchS3(bodies: string[], events: number, queries: [string, string][]): Promise<void> {
  const s3 = await startS3Server();
  const env = {
    P_STORAGE: 's3',
    P_S3_URL: s3.endpoint,
    P_S3_BUCKET: s3.bucket,
    P_S3_ACCESS_KEY: s3.accessKey,
    P_S3_SECRET_KEY: s3.secretKey,
    P_CATALOG_REFRESH: '1s',
    P_COMPACTION_INTERVAL: '1h',
  };
  try {
    // Small flushes on purpose: ~100 files, the case compaction exists for. The data arrives in 100
    // parts and each is flushed to the bucket before the next is sent.
    const writer = await startService({ ...env, P_NODE_ID: 'bench-writer', P_FLUSH_INTERVAL: '100ms' });
    await api(writer.port, 'PUT', '/api/v1/logstream/s3_logs');
    const started = performance.now();
    const part = Math.ceil(bodies.length / 100);
    let ingestSecs = 0;
    for (let i = 0; i < bodies.length; i += part) {
      ingestSecs += await sendAll(writer.port, '/api/v1/logstream/s3_logs', bodies.slice(i, i + part), 8);
      await waitFlushed(writer.port, 's3_logs');
    }
    const flushedSecs = (performance.now() - started) / 1000;
    const written = (await api(writer.port, 'GET', '/api/v1/logstream/s3_logs/stats')) as Stats;
    await writer.stop();

    const runQueries = async (label: string): Promise<string[][]> => {
      const reader = await startService({ ...env, P_NODE_ID: `bench-reader-${label.replaceAll(' ', '-')}` });
      try {
        let stats: Stats;
        for (;;) {
          try {
            stats = (await api(reader.port, 'GET', '/api/v1/logstream/s3_logs/stats')) as Stats;
            if (stats.ingestion.count === events) break;
          } catch {
            /* not synced yet */
          }
          await new Promise((r) => setTimeout(r, 200));
        }
        const range = { startTime: '2000-01-01T00:00:00Z', endTime: '2100-01-01T00:00:00Z' };
        let t = performance.now();
        await api(reader.port, 'POST', '/api/v1/query', { query: queries[0][1].replaceAll('{t}', 's3_logs'), ...range });
        const cold = performance.now() - t;
        const files = await listFiles(path.join(reader.dataDir, 'cache', 's3_logs'), '.parquet');
        const direct = await DuckDBInstance.create(':memory:', { threads: '2' });
        const conn = await direct.connect();
        const list = `read_parquet([${files.map((f) => `'${f}'`).join(', ')}], hive_partitioning = false)`;
        const out: string[][] = [[`${label}: ${stats!.storage.files} files`, `cold ${fmt(cold, 0)} ms`, '', '']];
        for (const [name, sql] of queries) {
          const viaHttp: number[] = [];
          const viaDirect: number[] = [];
          for (let i = 0; i <= 5; i++) {
            t = performance.now();
            const res = await post(reader.port, '/api/v1/query', JSON.stringify({ query: sql.replaceAll('{t}', 's3_logs'), ...range }));
            if (res.status !== 200) throw new Error(`query failed: ${res.body}`);
            if (i) viaHttp.push(performance.now() - t);
            t = performance.now();
            (await conn.runAndReadAll(sql.replaceAll('{t}', list))).getRowObjectsJson();
            if (i) viaDirect.push(performance.now() - t);
          }
          out.push([`  ${name} (warm)`, fmt(median(viaHttp), 1), fmt(median(viaDirect), 1), `${fmt(median(viaHttp) / median(viaDirect), 2)}×`]);
        }
        conn.closeSync();
        return out;
      } finally {
        await reader.stop();
      }
    };

    const before = await runQueries('before compaction');
    const compactor = await startService({ ...env, P_NODE_ID: 'bench-writer', P_COMPACTION_INTERVAL: '1s', P_COMPACTION_TARGET_BYTES: '512MiB' });
    const compactStart = performance.now();
    let files = Infinity;
    for (;;) {
      const stats = (await api(compactor.port, 'GET', '/api/v1/logstream/s3_logs/stats')) as Stats;
      if (stats.storage.files <= 3 || (stats.storage.files === files && performance.now() - compactStart > 60_000)) break;
      files = stats.storage.files;
      await new Promise((r) => setTimeout(r, 500));
    }
    const compactSecs = (performance.now() - compactStart) / 1000;
    await compactor.stop();
    const after = await runQueries('after compaction');

    console.log(`\n## S3 backend (moto on loopback) over ${fmt(events)} events`);
    console.log(
      `  ingest ${fmt(events / ingestSecs)} events/s; sent in 100 parts, each flushed to the bucket before the next: ` +
        `${fmt(flushedSecs, 1)} s → ${fmt(events / flushedSecs)} events/s end to end, ${written.storage.files} files, ${fmt(written.storage.size / 1e6, 1)} MB`,
    );
    console.log(`  compaction to one file per hour: ${fmt(compactSecs, 1)} s`);
    const rows = [['query', 'service ms', 'direct ms (local disk)', 'ratio'], ...before, ...after];
    const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
    for (const r of rows) console.log(`  ${r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ')}`);
  } finally {
    await s3.close();
  }
}
