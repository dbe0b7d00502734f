import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { javaCounts, readerCounts, sparkCounts, type JvmArgs } from './helpers/iceberg.ts';
import { inRange, naive, range, SENDERS, serviceCounts, times, LAKE_BACKENDS } from './helpers/lakeData.ts';
import type { S3TestServer } from './helpers/s3server.ts';
import { startServer, type TestServer } from './helpers/server.ts';

/**
 * The JVM readers of the lake (docs/lake.md), one JVM start each for every table: Spark 4.0 local with
 * iceberg-spark-runtime (scripts/test-setup.d/71-spark.sh) and Java iceberg-core 1.12's RESTCatalog +
 * IcebergGenerics (72-iceberg-java.sh). They are the readers that catch the nanosecond trap. On S3 (moto)
 * both read with iceberg-aws's S3FileIO (+ Iceberg's AWS SDK v2 bundle), their own credentials, and the
 * endpoint, path style and region LoadTable hands them.
 */


describe.each(LAKE_BACKENDS)('Spark 4.0 local and Java iceberg-core (the JVM readers), %s', (_backend, backend) => {
  let server: TestServer;
  let s3: S3TestServer | undefined;
  beforeAll(async () => {
    const b = await backend();
    s3 = b.s3;
    server = await startServer({ env: { ...b.env, P_FLUSH_INTERVAL: '1s', P_ICEBERG_INTERVAL: '1s' } });
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
    await s3?.close();
  });

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
    const keys = s3 && { accessKey: s3.accessKey, secretKey: s3.secretKey };
    const expected: Record<string, [number, number]> = {};
    for (const name of Object.keys(tables)) {
      expected[name] = [times.length, inRange];
      await expect.poll(() => serviceCounts(server, name), { timeout: 30_000 }).toEqual(expected[name]);
      // Published (pyiceberg sees every row) before the one Spark run.
      const args = { uri: `${server.url}/iceberg`, key: server.apiKey, table: name, timeColumn: tables[name], start: naive(range.start), end: naive(range.end) };
      const s3Args = s3 && { endpoint: s3.endpoint, accessKey: s3.accessKey, secretKey: s3.secretKey, region: 'us-east-1' };
      await expect.poll(async () => (await readerCounts({ ...args, s3: s3Args })).pyiceberg[0], { timeout: 60_000, interval: 1000 }).toBe(times.length);
    }
    const jvm: JvmArgs = { uri: `${server.url}/iceberg`, key: server.apiKey, start: naive(range.start), end: naive(range.end), tables, s3: keys };
    expect(await sparkCounts(jvm)).toEqual(expected);
    expect(await javaCounts(jvm)).toEqual(expected);
  }, 400_000);
});
