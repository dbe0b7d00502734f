/**
 * Wide datasets (issue 30 A11, A15): a dataset never gets more columns than the storage DuckDB's memory
 * can flush (the effective P_MAX_COLUMNS is derived from it, docs/memory.md "Wide datasets"), and
 * field-stats over a wide result answers within its bounds. One server with a 512 MiB budget (storage
 * DuckDB 85 MiB), where 300 columns × 100 rows never flushed before.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type TestServer } from './helpers/server.ts';
import { waitFor } from './helpers/wait.ts';

const COLUMNS = 300;
const ROWS = 100;

/** ROWS events of COLUMNS string fields each, values that differ per row and column (little compression). */
function wideEvents(): Record<string, string>[] {
  return Array.from({ length: ROWS }, (_, r) =>
    Object.fromEntries(Array.from({ length: COLUMNS }, (_, c) => [`f${String(c).padStart(4, '0')}`, `v${r}-${c}-${(r * 7919 + c * 104729) % 100_003}`])),
  );
}

describe('a wide dataset at a 512 MiB budget', () => {
  let server: TestServer;
  const events = wideEvents();
  beforeAll(async () => {
    server = await startServer({ env: { P_MEMORY_BUDGET: '512MiB', P_FLUSH_INTERVAL: '1s' } });
    const res = await server.request('/api/v1/ingest', { method: 'POST', body: JSON.stringify(events), headers: { 'content-type': 'application/json', 'X-P-Stream': 'wide' } });
    expect(res.status, await res.text()).toBe(200);
  }, 120_000);
  afterAll(async () => server?.stop());

  it('flushes: the columns beyond the derived limit go to p_overflow, and every value is kept', async () => {
    await waitFor('the wide dataset flushed', async () => {
      const stats = (await (await server.request('/api/v1/logstream/wide/stats')).json()) as { wal: { count: number }; storage: { files: number } };
      return stats.wal.count === 0 && stats.storage.files > 0;
    }, 60_000);
    const schema = (await (await server.request('/api/v1/logstream/wide/schema')).json()) as { fields: { name: string }[] };
    const names = schema.fields.map((f) => f.name);
    expect(names).toContain('p_overflow');
    const dataColumns = names.filter((n) => /^f\d{4}$/.test(n));
    expect(dataColumns.length).toBeLessThan(COLUMNS);
    // Every value is in its column or in p_overflow: compare each row with what was sent.
    const res = await server.request('/api/v1/query', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: 'SELECT * FROM wide', startTime: '1h', endTime: 'now' }) });
    expect(res.status).toBe(200);
    const rows = (await res.json()) as Record<string, unknown>[];
    expect(rows).toHaveLength(ROWS);
    const stored = rows.map((row) => {
      const overflow = JSON.parse(String(row.p_overflow ?? '{}')) as Record<string, string>;
      return { ...Object.fromEntries(dataColumns.map((n) => [n, row[n]])), ...overflow };
    });
    const key = (e: Record<string, unknown>) => String(e.f0000);
    expect(stored.sort((a, b) => key(a).localeCompare(key(b)))).toEqual([...events].sort((a, b) => key(a).localeCompare(key(b))));
  }, 120_000);

  it('field-stats over the wide dataset answers, counting the rows it looked at', async () => {
    const res = await server.request('/api/v1/field-stats', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: 'SELECT * FROM wide', startTime: '1h', endTime: 'now', top: 2 }) });
    expect(res.status).toBe(200);
    const stats = (await res.json()) as { total: number; sampled: number; fields: { name: string; present: number; distinct: number }[] };
    expect(stats.total).toBe(ROWS);
    expect(stats.sampled).toBe(Math.min(ROWS, Math.floor(200_000 / stats.fields.length)));
    // f0000 is a column (the first field of every event); its values are all different in the events sent.
    expect(stats.fields.find((f) => f.name === 'f0000')).toMatchObject({ present: ROWS, distinct: new Set(events.map((e) => e.f0000)).size });
  });
});

describe('a dataset already wider than the limit', () => {
  let server: TestServer;
  const events = wideEvents();
  /** ROWS × HOURS wide events of a dataset timed by its field `ts`, spread over HOURS past hours (one minute each). */
  const HOURS = 4;
  const hourStart = Math.floor(Date.now() / 3_600_000) * 3_600_000 - (HOURS + 1) * 3_600_000;
  const timed = Array.from({ length: HOURS }, (_, h) => wideEvents().map((e, r) => ({ ...e, f0000: `${h}-${e.f0000}`, ts: new Date(hourStart + h * 3_600_000 + (r % 60) * 60_000).toISOString() }))).flat();
  const rowsOf = async (sql: string, startTime: string) => {
    const ask = async () => {
      const res = await server.request('/api/v1/query', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: sql, startTime, endTime: 'now' }) });
      return { status: res.status, text: await res.text() };
    };
    // At 512 MiB the other wide dataset's flush may hold the memory a 300-column plan needs: the service
    // then answers 503 "retry later" (its back-pressure), and a client retries, as here.
    let answer = await ask();
    for (let i = 0; i < 30 && answer.status === 503; i++) {
      await new Promise((r) => setTimeout(r, 1000));
      answer = await ask();
    }
    expect(answer.status, answer.text).toBe(200);
    return JSON.parse(answer.text) as Record<string, unknown>[];
  };
  const flushed = (name: string) => async () => {
    const stats = (await (await server.request(`/api/v1/logstream/${name}/stats`)).json()) as { wal: { count: number }; storage: { files: number } };
    return stats.wal.count === 0 && stats.storage.files > 0;
  };

  beforeAll(async () => {
    // Under the default budget the 300 fields are columns; killed before a flush, the WAL keeps them.
    const big = await startServer({ env: { P_FLUSH_INTERVAL: '1h' } });
    const headers = { 'content-type': 'application/json' };
    let res = await big.request('/api/v1/ingest', { method: 'POST', body: JSON.stringify(events), headers: { ...headers, 'X-P-Stream': 'wide_before' } });
    expect(res.status, await res.text()).toBe(200);
    res = await big.request('/api/v1/logstream/wide_hours', { method: 'PUT', headers: { 'X-P-Time-Partition': 'ts' } });
    expect(res.status, await res.text()).toBe(200);
    res = await big.request('/api/v1/ingest', { method: 'POST', body: JSON.stringify(timed), headers: { ...headers, 'X-P-Stream': 'wide_hours' } });
    expect(res.status, await res.text()).toBe(200);
    await big.kill();
    server = await startServer({ dataDir: big.dataDir, env: { P_MEMORY_BUDGET: '512MiB', P_FLUSH_INTERVAL: '1s' } });
  }, 120_000);
  afterAll(async () => server?.stop());

  it('made under a bigger budget, its WAL flushes at a 512 MiB budget', async () => {
    await waitFor('the wide dataset flushed', flushed('wide_before'), 90_000);
    const schema = (await (await server.request('/api/v1/logstream/wide_before/schema')).json()) as { fields: { name: string }[] };
    expect(schema.fields.filter((f) => /^f\d{4}$/.test(f.name))).toHaveLength(COLUMNS);
    const rows = await rowsOf('SELECT * FROM wide_before', '1h');
    const key = (e: Record<string, unknown>) => String(e.f0000);
    const pick = (r: Record<string, unknown>) => Object.fromEntries(Object.keys(events[0]).map((n) => [n, r[n]]));
    expect(rows.map(pick).sort((a, b) => key(a).localeCompare(key(b)))).toEqual([...events].sort((a, b) => key(a).localeCompare(key(b))));
  }, 180_000);

  it("its WAL spanning several hours (an event-time dataset) flushes at a 512 MiB budget, each hour's rows in its hour", async () => {
    await waitFor('the wide event-time dataset flushed', flushed('wide_hours'), 120_000);
    const rows = await rowsOf('SELECT * FROM wide_hours', '1d');
    expect(rows).toHaveLength(timed.length);
    const key = (e: Record<string, unknown>) => String(e.f0000);
    // Each row as sent: every field, the time compared as an instant (the answer's text form is DuckDB's).
    const pick = (r: Record<string, unknown>) => ({ ...Object.fromEntries(Object.keys(events[0]).map((n) => [n, r[n]])), ts: new Date(`${String(r.ts).replace(' ', 'T').replace(/Z?$/, 'Z')}`).toISOString() });
    expect(rows.map(pick).sort((a, b) => key(a).localeCompare(key(b)))).toEqual([...timed].sort((a, b) => key(a).localeCompare(key(b))));
    // One hour's rows per hour: the flush wrote each hour's partition from that hour's lines.
    const perHour = await rowsOf("SELECT epoch_ms(date_trunc('hour', ts)) AS h, count(*) AS n FROM wide_hours GROUP BY 1 ORDER BY 1", '1d');
    expect(perHour.map((r) => [Number(r.h), Number(r.n)])).toEqual(Array.from({ length: HOURS }, (_, h) => [hourStart + h * 3_600_000, ROWS]));
  }, 180_000);
});
