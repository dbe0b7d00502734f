import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { javaCounts, readerCounts, sparkCounts } from './helpers/iceberg.ts';
import { inRange, naive, range, SENDERS, serviceCounts, times } from './helpers/lakeData.ts';
import { startServer, type TestServer } from './helpers/server.ts';

/**
 * The JVM readers of the lake (docs/lake.md), one JVM start each for every table: Spark 4.0 local with
 * iceberg-spark-runtime (scripts/test-setup.d/71-spark.sh) and Java iceberg-core 1.12's RESTCatalog +
 * IcebergGenerics (72-iceberg-java.sh). They are the readers that catch the nanosecond trap.
 */

describe('Spark 4.0 local and Java iceberg-core (the JVM readers), local disk', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({ env: { P_FLUSH_INTERVAL: '1s', P_ICEBERG_INTERVAL: '1s' } });
  }, 60_000);
  afterAll(() => server?.stop());

  // Spark reads Iceberg `timestamp` as TIMESTAMP_NTZ: a nanosecond column registered as `timestamp` would
  // be read as microseconds here and the range count would be 0 (the trap docs/lake.md describes).
  it('count what the service counts for every kind of dataset, with and without a time filter (one JVM each)', async () => {
    const tables: Record<string, string> = {};
    for (const [kind, sender] of Object.entries(SENDERS)) {
      const name = `spark_${kind.replace('-', '_')}`;
      const res = await sender.send(server, name);
      expect(res.status, await res.text()).toBeLessThan(300);
      tables[name] = sender.timeColumn;
    }
    const expected: Record<string, [number, number]> = {};
    for (const name of Object.keys(tables)) {
      expected[name] = [times.length, inRange];
      await expect.poll(() => serviceCounts(server, name), { timeout: 30_000 }).toEqual(expected[name]);
      // Published (pyiceberg sees every row) before the one Spark run.
      const args = { uri: `${server.url}/iceberg`, key: server.apiKey, table: name, timeColumn: tables[name], start: naive(range.start), end: naive(range.end) };
      await expect.poll(async () => (await readerCounts(args)).pyiceberg[0], { timeout: 60_000, interval: 1000 }).toBe(times.length);
    }
    const jvm = { uri: `${server.url}/iceberg`, key: server.apiKey, start: naive(range.start), end: naive(range.end), tables };
    expect(await sparkCounts(jvm)).toEqual(expected);
    expect(await javaCounts(jvm)).toEqual(expected);
  }, 400_000);
});

