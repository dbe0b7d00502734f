import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PG_CLIENTS, requireTool, startPgServer, type PgTestServer } from './helpers/pg.ts';

/**
 * pgjdbc (DatabaseMetaData as DBeaver and Metabase use it, a PreparedStatement with a timestamp
 * parameter, server-side prepared statements, fetch-size cursors) and psycopg 3 with SQLAlchemy's
 * inspector, each run as a real client program against the real service. Provisioned by
 * scripts/test-setup.d/45-postgres-clients.sh.
 */

const run = promisify(execFile);
let server: PgTestServer;
let since = '';

beforeAll(async () => {
  server = await startPgServer();
  const ingest = async (events: unknown[]) => {
    const res = await server.request('/api/v1/ingest', { method: 'POST', json: events, headers: { 'X-P-Stream': 'clientlogs' } });
    expect(res.status, await res.clone().text()).toBe(200);
  };
  await ingest([{ level: 'info', n: 1 }, { level: 'error', n: 2 }]);
  await new Promise((r) => setTimeout(r, 1100));
  since = new Date(Date.now() - 300).toISOString();
  await new Promise((r) => setTimeout(r, 400));
  await ingest([{ level: 'warn', n: 3, ratio: 0.25 }]);
}, 120_000);

afterAll(async () => {
  await server?.stop();
});

describe('pgjdbc', () => {
  it('reads DatabaseMetaData and runs prepared statements with a timestamp parameter', async () => {
    const jar = requireTool(path.join(PG_CLIENTS, 'postgresql-42.7.14.jar'), 'the pgjdbc jar');
    const classes = requireTool(path.join(PG_CLIENTS, 'pgjdbc-classes/PgClient.class'), 'the compiled pgjdbc test program');
    const { stdout } = await run('java', ['-cp', `${path.dirname(classes)}:${jar}`, 'PgClient', String(server.pgPort), server.apiKey, 'clientlogs', since], { timeout: 120_000 });
    const found = Object.fromEntries(stdout.trim().split('\n').map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
    expect(found.product).toBe('PostgreSQL 15.0');
    expect(found.schemas.split(',')).toContain('public');
    expect(found.tables).toBe('clientlogs');
    expect(found.columns.split(',')).toEqual(expect.arrayContaining(['level:text:12', 'n:int8:-5', 'p_timestamp:timestamp:93', 'ratio:float8:8']));
    expect(found.primaryKeys).toBe('0');
    expect(found.resultTypes).toBe('int8,timestamp');
    expect(found.rows.split(',').map((r: string) => r.split('@')[0])).toEqual(['3']);
    expect(found.repeated).toBe('3');
    expect(found.fetched).toBe('10');
  });
});

describe('psycopg 3 and SQLAlchemy', () => {
  it('binds parameters, reads binary results and inspects the schema', async () => {
    const python = requireTool(path.join(PG_CLIENTS, 'venv/bin/python'), 'the Python venv with psycopg and SQLAlchemy');
    const script = path.join(import.meta.dirname, 'fixtures/pg/clients.py');
    const { stdout } = await run(python, [script, String(server.pgPort), server.apiKey, 'clientlogs', since], { timeout: 120_000 });
    const out = JSON.parse(stdout) as Record<string, unknown>;
    expect(out.psycopg_rows).toEqual([[3, 'warn']]);
    expect((out.psycopg_binary as unknown[]).slice(0, 2)).toEqual([3, 0.25]);
    expect(out.psycopg_regclass).toEqual([['clientlogs']]);
    expect(out.psycopg_privilege).toEqual([[true, 'public']]);
    // PostgreSQL 15's answers to the same libpq calls (declared types: $2 unused; none: 42P18).
    expect(out.libpq_gap).toEqual([['1', '3'], ['1', '3'], ['42P18'], ['42P18']]);
    expect(out.sa_schemas).toContain('public');
    expect(out.sa_tables).toEqual(['clientlogs']);
    expect(out.sa_columns).toEqual(expect.arrayContaining([['level', 'TEXT'], ['n', 'BIGINT'], ['p_timestamp', 'TIMESTAMP'], ['ratio', 'DOUBLE PRECISION']]));
    expect(out.sa_pk).toEqual([]);
    expect(out.sa_count).toBe(3);
  });
});
