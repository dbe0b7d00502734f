import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError } from './helpers/assert.ts';
import { waitFor } from './helpers/wait.ts';
import { s3Env, startS3Server, type S3TestServer } from './helpers/s3server.ts';
import { query, startServer, tempDir, type TestServer } from './helpers/server.ts';

/**
 * Events that keep their own time (docs/time.md), through HTTP as a client uses them: a dataset
 * created with Parseable's X-P-Time-Partition answers by event time (queries, counts, stats by date,
 * info), refuses events without a usable time, keeps its time field across a restart and on a second
 * worker; strings holding times become TIMESTAMP columns, with later misfits in the `_utf8` sibling.
 */

const DAY = 86_400_000;
/** Noon (UTC) of the day `n` days before today, and that day as YYYY-MM-DD. */
const dayAgo = (n: number) => {
  const midnight = Math.floor(Date.now() / DAY) * DAY - n * DAY;
  return { noon: midnight + DAY / 2, start: new Date(midnight).toISOString(), end: new Date(midnight + DAY).toISOString(), date: new Date(midnight).toISOString().slice(0, 10) };
};
const iso = (ms: number) => new Date(ms).toISOString();

async function createDataset(s: TestServer, name: string, headers: Record<string, string>): Promise<Response> {
  return s.request(`/api/v1/logstream/${name}`, { method: 'PUT', headers });
}

async function ingest(s: TestServer, name: string, events: unknown): Promise<Response> {
  return s.request('/api/v1/ingest', { method: 'POST', headers: { 'x-p-stream': name }, json: events });
}

async function count(s: TestServer, sql: string, range: { startTime?: string; endTime?: string } = {}): Promise<number> {
  const [row] = await query(s, sql, range);
  return Number(row.n);
}

describe('a dataset with a time field of its events', () => {
  let server: TestServer;
  const days = [3, 2, 1].map(dayAgo);
  /** Events per day, three days back: 5, 7 and 9. */
  const perDay = [5, 7, 9];

  beforeAll(async () => {
    server = await startServer({ env: { P_FLUSH_INTERVAL: '500ms', P_COMPACTION_INTERVAL: '1s' } });
  });
  afterAll(async () => {
    await server?.kill();
  });

  it('is created with X-P-Time-Partition and -Limit, which info and the schema report', async () => {
    const res = await createDataset(server, 'backfill', { 'x-p-time-partition': 'event_time', 'x-p-time-partition-limit': '10d' });
    expect(res.status, await res.text()).toBe(200);
    const info = (await (await server.request('/api/v1/logstream/backfill/info')).json()) as Record<string, unknown>;
    expect(info).toMatchObject({ timePartition: 'event_time', timePartitionLimit: '10', inferTimestamp: true });
    const schema = (await (await server.request('/api/v1/logstream/backfill/schema')).json()) as { time_column: string };
    expect(schema.time_column).toBe('event_time');
  });

  it('info reports the limit that applies: the 30-day default when none was given, none without a time field', async () => {
    expect((await createDataset(server, 'defaultlimit', { 'x-p-time-partition': 'event_time' })).status).toBe(200);
    const info = (await (await server.request('/api/v1/logstream/defaultlimit/info')).json()) as Record<string, unknown>;
    expect(info).toMatchObject({ timePartition: 'event_time', timePartitionLimit: '30' });
    // Enforced: an event 31 days old is refused, one 29 days old is stored.
    expect((await ingest(server, 'defaultlimit', [{ event_time: iso(Date.now() - 31 * 86_400_000) }])).status).toBe(400);
    expect((await ingest(server, 'defaultlimit', [{ event_time: iso(Date.now() - 29 * 86_400_000) }])).status).toBe(200);
    expect((await createDataset(server, 'nolimit', {})).status).toBe(200);
    const plain = (await (await server.request('/api/v1/logstream/nolimit/info')).json()) as Record<string, unknown>;
    expect(plain).not.toHaveProperty('timePartition');
    expect(plain).not.toHaveProperty('timePartitionLimit');
  });

  it('a backfill over three days answers by event time: queries, counts, stats by date', async () => {
    const events = days.flatMap((d, i) => Array.from({ length: perDay[i] }, (_, k) => ({ event_time: iso(d.noon + k * 60_000), day: i, msg: `event ${k}` })));
    // Sent newest first, in one request: the order of arrival does not matter.
    const res = await ingest(server, 'backfill', events.reverse());
    expect(res.status, await res.text()).toBe(200);

    for (const [i, d] of days.entries()) {
      expect(await count(server, 'SELECT count(*) AS n FROM backfill', { startTime: d.start, endTime: d.end })).toBe(perDay[i]);
    }
    // Nothing was received in those days: the receive time is now, on every row. (The newest event is
    // yesterday's noon + 8 minutes, so at least 11 h 52 min before now at any time of day.)
    expect(await count(server, 'SELECT count(*) AS n FROM backfill WHERE p_timestamp < event_time + INTERVAL 11 HOUR', {})).toBe(0);
    expect(await count(server, 'SELECT count(*) AS n FROM backfill', { startTime: '10m', endTime: 'now' })).toBe(0);
    // The time field is a TIMESTAMP: compared and bucketed without a cast.
    const buckets = await query(server, "SELECT date_trunc('day', event_time) AS d, count(*) AS n FROM backfill GROUP BY 1 ORDER BY 1", { startTime: days[0].start, endTime: days[2].end });
    expect(buckets.map((r) => Number(r.n))).toEqual(perDay);
    const schema = (await (await server.request('/api/v1/logstream/backfill/schema')).json()) as { fields: { name: string; data_type: unknown }[] };
    expect(schema.fields.find((f) => f.name === 'event_time')?.data_type).toEqual({ Timestamp: ['Millisecond', null] });

    const counts = await server.request('/api/v1/counts', { method: 'POST', json: { stream: 'backfill', startTime: days[0].start, endTime: days[2].end, numBins: 3 } });
    const body = (await counts.json()) as { records: { count: number }[] };
    expect(body.records.map((r) => r.count)).toEqual(perDay);

    // Flushed by event time: each day's hour partition holds that day's events.
    for (const [i, d] of days.entries()) {
      await waitFor(`stats of ${d.date}`, async () => {
        const stats = (await (await server.request(`/api/v1/logstream/backfill/stats?date=${d.date}`)).json()) as { events: number };
        return stats.events === perDay[i];
      });
    }
    const today = new Date().toISOString().slice(0, 10);
    const stats = (await (await server.request(`/api/v1/logstream/backfill/stats?date=${today}`)).json()) as { events: number };
    expect(stats.events).toBe(0);
    const info = (await (await server.request('/api/v1/logstream/backfill/info')).json()) as { firstEventAt: string; latestEventAt: string };
    expect(info.firstEventAt).toBe(iso(days[0].noon));
    expect(info.latestEventAt).toBe(iso(days[2].noon + (perDay[2] - 1) * 60_000));
  });

  it('refuses an event without a usable time with 400 naming the field, and stores nothing of that request', async () => {
    const before = await count(server, 'SELECT count(*) AS n FROM backfill');
    const good = { event_time: iso(Date.now()), msg: 'good' };
    const cases: [unknown, RegExp][] = [
      [{ msg: 'no time' }, /"event_time" is missing/],
      [{ event_time: 'yesterday' }, /"event_time" holds "yesterday", which is not a timestamp/],
      [{ event_time: Math.floor(Date.now() / 1000) }, /"event_time" is a number/],
      [{ event_time: iso(Date.now() - 11 * DAY) }, /"event_time" .*more than 10 days ago/],
      [{ event_time: '2026-02-30T00:00:00Z' }, /not a timestamp/],
      // Bounded ahead too (issue 30 A10: events an hour apart over 11 years ahead wrote 100,000 files).
      [{ event_time: iso(Date.now() + 2 * 3_600_000) }, /"event_time" .*after the request was received \(P_EVENT_TIME_FUTURE_LIMIT\)/],
      [{ event_time: iso(Date.now() + 11 * 365 * DAY) }, /P_EVENT_TIME_FUTURE_LIMIT/],
    ];
    for (const [bad, message] of cases) {
      expect(await expectError(await ingest(server, 'backfill', [good, bad]), 400)).toMatch(message);
      // Through Parseable's other ingest route too.
      const res = await server.request('/api/v1/logstream/backfill', { method: 'POST', json: [bad, good] });
      expect(await expectError(res, 400)).toMatch(message);
    }
    expect(await count(server, 'SELECT count(*) AS n FROM backfill')).toBe(before);
    // Every accepted form of time, on yesterday's date.
    const y = dayAgo(1);
    const at10 = y.noon - 2 * 3_600_000;
    const forms = [`${y.date}T10:00:00+02:00`, `${y.date} 10:00:00`, `${y.date}T10:00:00.123456789Z`, new Date(at10).toUTCString(), `${y.date}t10:00:00,5`];
    const res = await ingest(server, 'backfill', forms.map((event_time, k) => ({ event_time, form: k })));
    expect(res.status, await res.text()).toBe(200);
    const rows = await query(server, "SELECT form, epoch_ms(event_time) AS t FROM backfill WHERE form IS NOT NULL ORDER BY form");
    expect(rows.map((r) => Number(r.t))).toEqual([at10 - 2 * 3_600_000, at10, at10 + 123, at10, at10 + 500]);
  });

  it('refuses a time field it cannot keep, and a change of it', async () => {
    expect(await expectError(await createDataset(server, 'badlimit', { 'x-p-time-partition': 't', 'x-p-time-partition-limit': '10' }), 400)).toMatch(/X-P-Time-Partition-Limit "10"/);
    expect(await expectError(await createDataset(server, 'nolimitfield', { 'x-p-time-partition-limit': '10d' }), 400)).toMatch(/send it with X-P-Time-Partition/);
    expect(await expectError(await createDataset(server, 'otelt', { 'x-p-time-partition': 't', 'x-p-log-source': 'otel-logs' }), 400)).toMatch(/JSON datasets/);
    expect(await expectError(await createDataset(server, 'svc', { 'x-p-time-partition': 'p_src_ip' }), 400)).toMatch(/cannot be a column name/);
    expect(await expectError(await createDataset(server, 'backfill', { 'x-p-time-partition': 'other' }), 400)).toMatch(/cannot change/);
    expect((await createDataset(server, 'backfill', { 'x-p-time-partition': 'event_time' })).status).toBe(200);
    // A dataset created without one keeps the receive time (and says so).
    expect((await createDataset(server, 'plain', {})).status).toBe(200);
    expect(await expectError(await createDataset(server, 'plain', { 'x-p-time-partition': 'ts' }), 400)).toMatch(/time column "p_timestamp"/);
    const info = (await (await server.request('/api/v1/logstream/plain/info')).json()) as Record<string, unknown>;
    expect(info).not.toHaveProperty('timePartition');
  });

  it('retention deletes by event time: a backfilled day past the rule goes, the days within stay', async () => {
    expect((await createDataset(server, 'aged', { 'x-p-time-partition': 'at_time' })).status).toBe(200);
    const retention = await server.request('/api/v1/logstream/aged/retention', { method: 'PUT', json: [{ description: 'two days', action: 'delete', duration: '2d' }] });
    expect(retention.status, await retention.text()).toBe(200);
    const old = dayAgo(3);
    const recent = dayAgo(1);
    const res = await ingest(server, 'aged', [
      { at_time: iso(old.noon), n: 1 },
      { at_time: iso(old.noon + 1000), n: 2 },
      { at_time: iso(recent.noon), n: 3 },
    ]);
    expect(res.status, await res.text()).toBe(200);
    await waitFor('the old day removed by retention', async () => (await count(server, 'SELECT count(*) AS n FROM aged')) === 1, 40_000);
    expect(await query(server, 'SELECT n FROM aged')).toEqual([{ n: 3 }]);
  });

  it('keeps its time field across a restart', async () => {
    await server.stop();
    server = await startServer({ dataDir: server.dataDir, env: { P_FLUSH_INTERVAL: '500ms', P_COMPACTION_INTERVAL: '1s' } });
    expect(await expectError(await ingest(server, 'backfill', { msg: 'no time' }), 400)).toMatch(/"event_time" is missing/);
    const d = days[1];
    expect(await count(server, 'SELECT count(*) AS n FROM backfill', { startTime: d.start, endTime: d.end })).toBe(perDay[1]);
    expect((await ingest(server, 'backfill', { event_time: iso(d.noon), msg: 'after restart' })).status).toBe(200);
    expect(await count(server, 'SELECT count(*) AS n FROM backfill', { startTime: d.start, endTime: d.end })).toBe(perDay[1] + 1);
  });
});

describe('timestamps recognised in strings', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer();
  });
  afterAll(async () => {
    await server?.kill();
  });

  const types = async (name: string) => {
    const schema = (await (await server.request(`/api/v1/logstream/${name}/schema`)).json()) as { fields: { name: string; data_type: unknown }[] };
    return Object.fromEntries(schema.fields.map((f) => [f.name, f.data_type]));
  };

  it('types a new time-named string field holding a time as TIMESTAMP; later misfits go to the _utf8 sibling', async () => {
    const first = [
      { created_at: '2026-11-20T10:00:00+02:00', start: '2026-11-20 08:30:00', note: '2026-11-20T10:00:00Z', status_time: 'soon', n: 1 },
      { created_at: '2026-11-21T10:00:00Z', start: '2026-11-21 08:30:00.250', note: 'x', status_time: 'later', n: 2 },
    ];
    expect((await ingest(server, 'logs', first)).status).toBe(200);
    const t = await types('logs');
    expect(t.created_at).toEqual({ Timestamp: ['Millisecond', null] });
    expect(t.start).toEqual({ Timestamp: ['Millisecond', null] });
    // Not a time-like name, or not a time: text.
    expect(t.note).toBe('Utf8');
    expect(t.status_time).toBe('Utf8');

    // A later value that is not a time: kept, in the sibling; nothing refused.
    const res = await ingest(server, 'logs', [{ created_at: 'yesterday', n: 3 }, { created_at: '2026-11-22T00:00:00Z', status_time: '2026-11-22T00:00:00Z', n: 4 }]);
    expect(res.status, await res.text()).toBe(200);
    const after = await types('logs');
    expect(after.created_at_utf8).toBe('Utf8');
    expect(after.status_time).toBe('Utf8');
    const rows = await query(server, "SELECT n, strftime(created_at, '%Y-%m-%dT%H:%M:%S') AS c, created_at_utf8 AS u, status_time AS s FROM logs ORDER BY n");
    expect(rows).toEqual([
      { n: 1, c: '2026-11-20T08:00:00', u: null, s: 'soon' },
      { n: 2, c: '2026-11-21T10:00:00', u: null, s: 'later' },
      { n: 3, c: null, u: 'yesterday', s: null },
      // A time into a text column stays the text it came as.
      { n: 4, c: '2026-11-22T00:00:00', u: null, s: '2026-11-22T00:00:00Z' },
    ]);
    // Compared and bucketed without a cast (what BI tools and the console write).
    expect(await count(server, "SELECT count(*) AS n FROM logs WHERE created_at >= TIMESTAMP '2026-11-21 00:00:00'")).toBe(2);
    const [{ h }] = await query(server, "SELECT strftime(min(date_trunc('hour', start)), '%H:%M') AS h FROM logs");
    expect(h).toBe('08:00');
  });

  it('OTLP log records without a time take the observed time, then the receive time', async () => {
    const observed = BigInt(Date.now() - 3_600_000) * 1_000_000n;
    const body = {
      resourceLogs: [
        {
          scopeLogs: [
            {
              logRecords: [
                { timeUnixNano: '0', observedTimeUnixNano: String(observed), body: { stringValue: 'observed' } },
                { timeUnixNano: '0', body: { stringValue: 'received' } },
              ],
            },
          ],
        },
      ],
    };
    const res = await server.request('/v1/logs', { method: 'POST', headers: { 'x-p-stream': 'otlogs' }, json: body });
    expect(res.status, await res.text()).toBe(200);
    const rows = await query(server, 'SELECT body, epoch_ms(time_unix_nano) AS t, epoch_ms(p_timestamp) AS r FROM otlogs ORDER BY body');
    expect(rows[0].body).toBe('observed');
    expect(Number(rows[0].t)).toBe(Number(observed / 1_000_000n));
    expect(rows[1].body).toBe('received');
    expect(Number(rows[1].t)).toBe(Number(rows[1].r));
  });
});

describe('a time field on two workers of one bucket', () => {
  let s3: S3TestServer;
  const servers: TestServer[] = [];
  beforeAll(async () => {
    s3 = await startS3Server();
  });
  afterAll(async () => {
    for (const s of servers) await s.kill();
    await s3?.close();
  });

  it('a worker that learns of the dataset later checks and partitions by its time field', async () => {
    const env = { ...s3Env(s3), P_FLUSH_INTERVAL: '500ms', P_CATALOG_REFRESH: '1s' };
    const a = await startServer({ dataDir: await tempDir(), env });
    servers.push(a);
    const b = await startServer({ dataDir: await tempDir(), env });
    servers.push(b);
    // Created on A after B started: B has not seen it.
    expect((await createDataset(a, 'shared', { 'x-p-time-partition': 'ts' })).status).toBe(200);
    expect(await expectError(await ingest(b, 'shared', { msg: 'no time' }), 400)).toMatch(/"ts" is missing/);
    const d = dayAgo(2);
    expect((await ingest(b, 'shared', [{ ts: iso(d.noon), msg: 'from b' }])).status).toBe(200);
    expect((await ingest(a, 'shared', [{ ts: iso(d.noon + 1000), msg: 'from a' }])).status).toBe(200);
    for (const w of [a, b]) {
      await waitFor('both events by event time on each worker', async () => (await count(w, 'SELECT count(*) AS n FROM shared', { startTime: d.start, endTime: d.end })) === 2);
    }
    const info = (await (await b.request('/api/v1/logstream/shared/info')).json()) as Record<string, unknown>;
    expect(info.timePartition).toBe('ts');
  });
});
