/**
 * Issue 30 A10 for the doors whose records carry their own times (OTLP logs, traces, metrics; remote
 * write): the reproducer, one request of records an hour apart over 100,000 hours, wrote 100,000 Parquet
 * files in one flush. Now only the records inside the window (P_SIGNAL_TIME_PAST_LIMIT back,
 * P_EVENT_TIME_FUTURE_LIMIT ahead, at their defaults here) are stored, so one flush writes at most
 * one file per hour of the window; the others are rejected one by one in OTLP's partial_success, and
 * remote write answers 400 (Prometheus' "out of bounds"), storing nothing of that request.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { query, startServer, type TestServer } from './helpers/server.ts';
import { waitFor } from './helpers/wait.ts';
import { otlpLogsJson, remoteWriteV1 } from './helpers/wire.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

interface Stats { wal: { count: number }; storage: { files: number } }

describe('OTLP and remote-write times are bounded', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({ env: { P_FLUSH_INTERVAL: '1s' } });
  }, 60_000);
  afterAll(async () => server?.stop());

  it("the reproducer: 100,000 OTLP log records an hour apart keep the window's 721, and the flush writes at most one file per hour", async () => {
    const sent = Date.now();
    // Half back, half ahead; 17 minutes past each hour step keeps every record well away from the bounds.
    const times = Array.from({ length: 100_000 }, (_, i) => sent + (i - 50_000) * HOUR + 17 * 60_000);
    const body = otlpLogsJson(times.map((timeMs) => ({ timeMs, attributes: [] })));
    expect(body.length).toBeGreaterThan(3_300_000);
    const res = await server.request('/v1/logs', { method: 'POST', body, headers: { 'content-type': 'application/json', 'X-P-Stream': 'spread' } });
    expect(res.status).toBe(200);
    // Inside: at most 30 days before receipt and 1 hour after (the receive time is within seconds of `sent`).
    const inside = times.filter((t) => t >= sent - 30 * DAY && t <= sent + HOUR);
    expect(inside.length).toBe(30 * 24 + 1);
    const answer = (await res.json()) as { partialSuccess?: { rejectedLogRecords: string; errorMessage: string } };
    expect(answer.partialSuccess?.rejectedLogRecords).toBe(String(times.length - inside.length));
    expect(answer.partialSuccess?.errorMessage).toMatch(/timed outside the stored window.*P_SIGNAL_TIME_PAST_LIMIT/);

    const stats = async () => (await (await server.request('/api/v1/logstream/spread/stats')).json()) as Stats;
    await waitFor('the spread dataset flushed', async () => (await stats()).wal.count === 0, 120_000);
    const hours = new Set(inside.map((t) => Math.floor(t / HOUR))).size;
    expect((await stats()).storage.files).toBeLessThanOrEqual(hours);
    const rows = await query(server, 'SELECT epoch_ms(time_unix_nano) AS t FROM spread ORDER BY 1', { startTime: new Date(sent - 60 * DAY).toISOString(), endTime: new Date(sent + 60 * DAY).toISOString() });
    expect(rows.map((r) => Number(r.t))).toEqual(inside);
  }, 180_000);

  it('remote write: a request with a sample outside the window is refused whole with 400; one inside is stored', async () => {
    const write = (timestampMs: number) =>
      server.request('/v1/prometheus/write?stream=prom', {
        method: 'POST',
        body: new Uint8Array(remoteWriteV1([{ labels: [['__name__', 'up'], ['job', 'a10']], samples: [{ value: 1, timestampMs: Date.now() - 1000 }, { value: 2, timestampMs }] }])),
        headers: { 'content-encoding': 'snappy', 'content-type': 'application/x-protobuf' },
      });
    for (const [ts, side] of [[Date.now() + 11 * 365 * DAY, /P_EVENT_TIME_FUTURE_LIMIT/], [Date.now() - 31 * DAY, /P_SIGNAL_TIME_PAST_LIMIT/]] as const) {
      const res = await write(ts);
      expect(res.status).toBe(400);
      expect(await res.text()).toMatch(side);
    }
    const ok = await write(Date.now() - 60_000);
    expect(ok.status, await ok.text()).toBeLessThan(300);
    const range = { startTime: new Date(Date.now() - 40 * DAY).toISOString(), endTime: new Date(Date.now() + 12 * 365 * DAY).toISOString() };
    expect(await query(server, 'SELECT count(*) AS n FROM prom', range)).toEqual([{ n: 2 }]);
  });
});
