import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type TestServer } from './helpers/server.ts';
import { waitFor } from './helpers/wait.ts';

/**
 * Counts per time bucket are pre-aggregated by receive time (src/query/sql/preAggregate.ts) once the
 * files prove few distinct receive times: the answer must be the one the statement gives as written.
 * Each statement is asked as written and as a twin the rewrite leaves alone (`HAVING count(*) > 0`,
 * true of every group), over the WAL and then over Parquet; the service's counter shows which ran
 * pre-aggregated. Hours, days, zones and DST are covered in test/unit/preAggregate.test.ts, where
 * times are not the clock's.
 */
const STATEMENTS = [
  "SELECT date_trunc('minute', p_timestamp) AS minute, count(*) AS n FROM hist GROUP BY 1 ORDER BY 1",
  'SELECT p_timestamp, count(*) FROM hist GROUP BY 1 ORDER BY 1',
  "SELECT date_trunc('second', p_timestamp) AS s, count(*) AS n FROM hist WHERE level = 'error' GROUP BY 1 ORDER BY 1",
  // Rows whose field is null (absent from the event), and rows where it is not.
  'SELECT p_timestamp AS t, count(*) AS n FROM hist WHERE user_id IS NULL GROUP BY 1 ORDER BY 1',
  'SELECT p_timestamp AS t, count() AS n FROM hist WHERE user_id IS NOT NULL GROUP BY 1 ORDER BY n DESC, t',
  "SELECT date_trunc('hour', p_timestamp AT TIME ZONE 'America/New_York') AS h, count(*) AS n FROM hist GROUP BY 1 ORDER BY 1",
  "SELECT date_bin('15 minutes', p_timestamp) AS b, count(*) AS n FROM hist GROUP BY 1 ORDER BY 1",
  // The console's hits over time (grouped by an alias no dataset column has).
  "SELECT time_bucket(INTERVAL '60 seconds', CAST(p_timestamp AS TIMESTAMP), TIMESTAMP '1970-01-01') AS t, count(*) AS n FROM hist GROUP BY t ORDER BY t",
  // Ordered by an alias that is also a column of the dataset: left as written (DuckDB may bind the column).
  "SELECT date_trunc('minute', p_timestamp) AS minute, count(*) AS level FROM hist GROUP BY 1 ORDER BY level",
];
/** Statements the service leaves as written even over Parquet. */
const DECLINED = 1;

const twin = (sql: string) => sql.replace(' ORDER BY', ' HAVING count(*) > 0 ORDER BY');

/** Requests, and events per request: each request's events share one receive time. */
const REQUESTS = 4;
const EVENTS = 20_000;

describe('per-bucket counts pre-aggregated by receive time', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({ env: { P_FLUSH_INTERVAL: '1h' } });
    expect((await server.request('/api/v1/logstream/hist', { method: 'PUT' })).status).toBe(200);
    for (let r = 0; r < REQUESTS; r++) {
      const events = Array.from({ length: EVENTS }, (_, i) => ({
        level: i % 7 === 0 ? 'error' : 'info',
        ...(i % 3 === 0 ? {} : { user_id: `u${(i * 31 + r) % 97}` }),
      }));
      const res = await server.request('/api/v1/logstream/hist', { method: 'POST', json: events });
      expect(res.status, await res.clone().text()).toBe(200);
    }
  });
  afterAll(async () => {
    await server?.stop();
  });

  const ask = async (sql: string) => {
    const res = await server.request('/api/v1/query', {
      method: 'POST',
      json: { query: sql, startTime: '2000-01-01T00:00:00Z', endTime: '2100-01-01T00:00:00Z', fields: true, send_null: true },
    });
    const text = await res.text();
    expect(res.status, text).toBe(200);
    return JSON.parse(text) as { fields: string[]; records: Record<string, unknown>[] };
  };
  const counter = async () => Number(/^lakehouse_query_pre_aggregated_total (\S+)$/m.exec(await (await server.request('/metrics')).text())?.[1] ?? 0);

  /** Every statement as written and its twin: the same answer; returns how many ran pre-aggregated. */
  const compareAll = async () => {
    const before = await counter();
    for (const sql of STATEMENTS) {
      const written = await ask(sql);
      expect(await ask(twin(sql)), sql).toEqual(written);
      expect(written.records.length, sql).toBeGreaterThan(0);
      // Every row counted once: the buckets add up to the rows the statement's WHERE selects.
      const where = /WHERE (.*?) GROUP BY/.exec(sql)?.[1];
      const total = (await ask(`SELECT count(*) AS n FROM hist${where ? ` WHERE ${where}` : ''}`)).records[0].n;
      expect(written.records.reduce((s, r) => s + Number(r.n ?? r.level ?? r['count(*)']), 0), sql).toBe(total);
    }
    return (await counter()) - before;
  };

  it('gives the same rows over the WAL, where nothing proves few receive times (not rewritten)', async () => {
    expect(await compareAll()).toBe(0);
    const fields = (await ask(STATEMENTS[1])).fields;
    expect(fields).toEqual(['p_timestamp', 'count(*)']);
  });

  it('gives the same rows over Parquet, pre-aggregated', async () => {
    // The WAL goes to Parquet at a short flush interval (the same data directory, a new process).
    await server.stop();
    server = await startServer({ dataDir: server.dataDir, env: { P_FLUSH_INTERVAL: '200ms' } });
    await waitFor('hist flushed', async () => ((await (await server.request('/api/v1/logstream/hist/stats')).json()) as { wal: { count: number } }).wal.count === 0);
    // Each statement as written ran pre-aggregated (but the declined); none of the twins did.
    expect(await compareAll()).toBe(STATEMENTS.length - DECLINED);
    expect((await ask(STATEMENTS[1])).fields).toEqual(['p_timestamp', 'count(*)']);
    expect((await ask(STATEMENTS[0])).records.reduce((s, r) => s + Number(r.n), 0)).toBe(REQUESTS * EVENTS);
  });
});
