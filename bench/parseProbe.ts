/**
 * Parses per statement (issue 35) and statements/s over the PostgreSQL door: the service's
 * lakehouse_sql_parses_total (query workers' parses reported back) around one new statement sent each
 * way (simple query, extended protocol Parse/Bind/Execute with the `pg` client, HTTP /api/v1/query),
 * then distinct simple-query statements (each a new text, so no cache helps) one after another for a
 * fixed count, and one extended-protocol statement bound to as many distinct values (a PostgreSQL
 * client's prepared statement: before issue 35's binding, each value made a new text to check), and two
 * catalog statements with parameters (`$1::regclass`, has_table_privilege($1, …)) bound the same way.
 * Run: `node bench/parseProbe.ts` (builds dist/ first, as every benchmark).
 */
import pg from 'pg';
import { api, BENCH_KEY, fmt, post, runIfMain, startService } from './lib.ts';

const STATEMENTS = 300;

async function parses(port: number): Promise<Record<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { 'x-api-key': BENCH_KEY } })).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^lakehouse_sql_parses_total\{site="(\w+)"\} (\d+)/gm)) out[m[1]] = Number(m[2]);
  return out;
}

/** Parses (by site, setup left out) that `run` caused. */
async function counted(port: number, run: () => Promise<unknown>): Promise<string> {
  const before = await parses(port);
  await run();
  const after = await parses(port);
  const sites = Object.keys(after).filter((s) => s !== 'setup' && after[s] !== (before[s] ?? 0));
  const total = sites.reduce((n, s) => n + after[s] - (before[s] ?? 0), 0);
  return `${total} (${sites.map((s) => `${s} ${after[s] - (before[s] ?? 0)}`).join(', ') || 'none'})`;
}

export async function parseProbe(): Promise<string[][]> {
  const server = await startService({ P_PG_ADDR: '127.0.0.1:0' });
  const pgPort = server.pgPort!;
  const client = new pg.Client({ host: '127.0.0.1', port: pgPort, user: 'bench', password: BENCH_KEY, database: 'bench' });
  try {
    await api(server.port, 'PUT', '/api/v1/logstream/probe');
    const events = Array.from({ length: 100 }, (_, i) => ({ p_timestamp: new Date(Date.UTC(2026, 0, 1, 0, i)).toISOString(), level: i % 3 ? 'info' : 'error', n: i }));
    const res = await post(server.port, '/api/v1/logstream/probe', JSON.stringify(events));
    if (res.status >= 300) throw new Error(`ingest ${res.status}: ${res.body}`);
    await client.connect();
    const where = (k: number) => `FROM probe WHERE p_timestamp >= '2026-01-01T00:${String(k % 60).padStart(2, '0')}:00Z' AND n >= ${k}`;
    const rows = [['statement', 'DuckDB parses (by site)']];
    rows.push(['PG simple query (new text)', await counted(server.port, () => client.query(`SELECT count(*) ${where(1)}`))]);
    rows.push(['PG simple query (the same text again)', await counted(server.port, () => client.query(`SELECT count(*) ${where(1)}`))]);
    rows.push(['PG extended Parse/Bind/Execute (new text)', await counted(server.port, () => client.query(`SELECT count(*) ${where(2)} AND level = $1`, ['info']))]);
    rows.push(['PG extended, the same text with another value', await counted(server.port, () => client.query(`SELECT count(*) ${where(2)} AND level = $1`, ['error']))]);
    // Catalog statements with parameters, as drivers send them for metadata (issue 35, branch pgcat).
    const catalog = 'SELECT c.relname FROM pg_catalog.pg_class c WHERE c.oid = $1::regclass';
    rows.push(['PG extended catalog statement ($1::regclass, new text)', await counted(server.port, () => client.query(catalog, ['probe']))]);
    rows.push(['PG extended catalog statement, another value', await counted(server.port, () => client.query(catalog, ['public.probe']))]);
    rows.push(['HTTP /api/v1/query (new text)', await counted(server.port, () => api(server.port, 'POST', '/api/v1/query', { query: `SELECT count(*) ${where(3)}`, startTime: '2026-01-01T00:00:00Z', endTime: '2026-01-02T00:00:00Z' }))]);
    const started = performance.now();
    for (let i = 0; i < STATEMENTS; i++) await client.query(`SELECT count(*) ${where(1000 + i)}`);
    const perSec = STATEMENTS / ((performance.now() - started) / 1000);
    rows.push([`PG simple query, ${STATEMENTS} distinct statements in a row`, `${fmt(perSec, 1)} statements/s`]);
    const bound = 'SELECT count(*) FROM probe WHERE p_timestamp >= $1 AND n >= $2';
    const boundStarted = performance.now();
    for (let i = 0; i < STATEMENTS; i++) await client.query(bound, [new Date(Date.UTC(2026, 0, 1, 0, i % 60)), i]);
    const boundPerSec = STATEMENTS / ((performance.now() - boundStarted) / 1000);
    rows.push([`PG extended, one statement bound to ${STATEMENTS} distinct values in a row`, `${fmt(boundPerSec, 1)} statements/s`]);
    const named = 'SELECT n.nspname, has_table_privilege($1, \'SELECT\') AS ok FROM pg_catalog.pg_namespace n WHERE n.nspname = $2';
    const catalogStarted = performance.now();
    for (let i = 0; i < STATEMENTS; i++) await client.query(i % 2 ? catalog : named, i % 2 ? [`probe${i}`] : [`probe${i}`, 'public']);
    const catalogPerSec = STATEMENTS / ((performance.now() - catalogStarted) / 1000);
    rows.push([`PG extended, two catalog statements bound to ${STATEMENTS} distinct values in a row`, `${fmt(catalogPerSec, 1)} statements/s`]);
    return rows;
  } finally {
    await client.end().catch(() => undefined);
    await server.stop();
  }
}

runIfMain(import.meta.filename, parseProbe);
