import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readerCounts, startRestFixture, type RestFixture } from './helpers/iceberg.ts';
import { inRange, naive, range, SENDERS, serviceCounts, times } from './helpers/lakeData.ts';
import { startServer, type TestServer } from './helpers/server.ts';

/**
 * The push to a catalog the user runs (P_ICEBERG_PUSH_URI, docs/lake.md "Push"), against the Iceberg
 * project's own REST catalog server (iceberg-open-api test fixtures, scripts/test-setup.d/
 * 73-iceberg-rest-fixture.sh), read back with pyiceberg THROUGH that catalog: registered, then every
 * later snapshot committed there with assert-ref-snapshot-id.
 */
describe('push to an external Iceberg REST catalog (the Iceberg project\'s RESTCatalogServer)', () => {
  let fixture: RestFixture;
  let server: TestServer;
  beforeAll(async () => {
    fixture = await startRestFixture();
    server = await startServer({ env: { P_FLUSH_INTERVAL: '1s', P_ICEBERG_INTERVAL: '1s', P_ICEBERG_PUSH_URI: fixture.uri } });
  }, 90_000);
  afterAll(async () => {
    await server?.stop();
    fixture?.stop();
  });

  const through = (table: string, timeColumn: string) => ({ uri: fixture.uri, key: '', table, timeColumn, start: naive(range.start), end: naive(range.end), pyicebergOnly: true });

  it('pyiceberg through the external catalog counts what the service counts, after later snapshots too', async () => {
    const tables: Record<string, string> = { push_json: SENDERS.json.timeColumn, push_logs: SENDERS['otel-logs'].timeColumn };
    const res = [await SENDERS.json.send(server, 'push_json'), await SENDERS['otel-logs'].send(server, 'push_logs')];
    for (const r of res) expect(r.status, await r.text()).toBeLessThan(300);
    for (const [name, tc] of Object.entries(tables)) {
      await expect.poll(() => serviceCounts(server, name), { timeout: 30_000 }).toEqual([times.length, inRange]);
      await expect.poll(async () => (await readerCounts(through(name, tc))).pyiceberg, { timeout: 60_000, interval: 1000 }).toEqual([times.length, inRange]);
    }
    // A second batch is a second snapshot: committed there as an update of the registered table.
    const more = await server.request('/api/v1/ingest', { method: 'POST', headers: { 'x-p-stream': 'push_json' }, json: [{ event_time: naive(range.start) + 'Z', n: 99, 'http.route': '/later' }] });
    expect(more.status, await more.text()).toBe(200);
    await expect.poll(() => serviceCounts(server, 'push_json'), { timeout: 30_000 }).toEqual([times.length + 1, inRange + 1]);
    await expect.poll(async () => (await readerCounts(through('push_json', tables.push_json))).pyiceberg, { timeout: 60_000, interval: 1000 }).toEqual([times.length + 1, inRange + 1]);
    const metrics = await (await server.request('/metrics')).text();
    expect(metrics).toMatch(/lakehouse_iceberg_pushes_total\{result="registered"\} [1-9]/);
    expect(metrics).toMatch(/lakehouse_iceberg_pushes_total\{result="committed"\} [1-9]/);
  }, 240_000);
});
