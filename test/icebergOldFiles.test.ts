import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, describe, expect, it } from 'vitest';
import { readerCounts } from './helpers/iceberg.ts';
import { inRange, naive, range, SENDERS, serviceCounts, times } from './helpers/lakeData.ts';
import { startServer, type TestServer } from './helpers/server.ts';

/**
 * Old nanosecond-timed files (written before the microsecond copy `p_time_us` existed) get into the lake
 * (docs/lake.md "Old files"): they stay out of the table until compaction rewrites them with the copy —
 * large ones too, alone, a few a pass — and the lake may lag meanwhile, never count more than the service.
 * The old files are made here as they were: an OTLP logs dataset flushed with P_ICEBERG=off, then each of
 * its Parquet files rewritten without `p_time_us` (DuckDB), before a service with the lake on starts.
 */
describe('old nanosecond files without p_time_us', () => {
  let server: TestServer | undefined;
  afterAll(() => server?.stop());

  it('enter the table once compaction has rewritten them, the counts never above the service\'s', async () => {
    // A 1-byte compaction target: every file counts as large, so only the rewrite of old files touches them.
    const env = { P_FLUSH_INTERVAL: '1s', P_NODE_ID: 'old-files', P_COMPACTION_TARGET_BYTES: '1', P_COMPACTION_INTERVAL: '1s' };
    const before = await startServer({ env: { ...env, P_ICEBERG: 'off' } });
    const res = await SENDERS['otel-logs'].send(before, 'old_logs');
    expect(res.status, await res.text()).toBeLessThan(300);
    const dir = path.join(before.dataDir, 'store', 'old_logs');
    const parquet = async () => (await fs.readdir(dir, { recursive: true })).filter((f) => f.endsWith('.parquet')).map((f) => path.join(dir, f));
    await expect.poll(async () => (await parquet()).length, { timeout: 30_000 }).toBeGreaterThan(0);
    await expect.poll(() => serviceCounts(before, 'old_logs'), { timeout: 30_000 }).toEqual([times.length, inRange]);
    await before.stop();

    const duck = await DuckDBInstance.create();
    const conn = await duck.connect();
    const sizes = new Map<string, number>();
    for (const file of await parquet()) {
      await conn.run(`COPY (SELECT * EXCLUDE (p_time_us) FROM read_parquet('${file}')) TO '${file}.old' (FORMAT parquet)`);
      await fs.rename(`${file}.old`, file);
      sizes.set(path.relative(path.join(before.dataDir, 'store'), file), (await fs.stat(file)).size);
    }
    // The catalog's manifests record each file's size (a file of another size is set aside as damaged):
    // they get the sizes the files had when written like this.
    const manifests = path.join(dir, '.manifests');
    for (const f of (await fs.readdir(manifests, { recursive: true })).filter((n) => n.endsWith('.json'))) {
      const text = await fs.readFile(path.join(manifests, f), 'utf8');
      const patched = JSON.stringify(JSON.parse(text), (k, v: unknown) => {
        const entry = v as { key?: unknown; bytes?: unknown };
        if (entry && typeof entry === 'object' && typeof entry.key === 'string' && typeof entry.bytes === 'number' && sizes.has(entry.key)) return { ...entry, bytes: sizes.get(entry.key) };
        return v;
      });
      await fs.writeFile(path.join(manifests, f), patched);
    }
    const described = await conn.runAndReadAll(`DESCRIBE SELECT * FROM read_parquet('${(await parquet())[0]}')`);
    expect(described.getRowObjectsJson().map((r) => r.column_name)).not.toContain('p_time_us');
    conn.closeSync();

    server = await startServer({ dataDir: before.dataDir, env: { ...env, P_ICEBERG_INTERVAL: '1s' } });
    const s = server;
    await expect.poll(() => serviceCounts(s, 'old_logs'), { timeout: 30_000 }).toEqual([times.length, inRange]);
    const args = { uri: `${s.url}/iceberg`, key: s.apiKey, table: 'old_logs', timeColumn: 'p_time_us', start: naive(range.start), end: naive(range.end), pyicebergOnly: true };
    let lagged = false;
    await expect
      .poll(
        async () => {
          const [all, part] = (await readerCounts(args)).pyiceberg;
          // Lag, never lie: never more rows than the service has, in the range or in all.
          expect(all).toBeLessThanOrEqual(times.length);
          expect(part).toBeLessThanOrEqual(inRange);
          if (all < times.length) lagged = true;
          return [all, part];
        },
        { timeout: 120_000, interval: 1000 },
      )
      .toEqual([times.length, inRange]);
    // Nothing was published before the rewrite started: the old files were out of the table at first.
    expect(lagged).toBe(true);
    expect(await parquet()).not.toHaveLength(0);
  }, 240_000);
});
