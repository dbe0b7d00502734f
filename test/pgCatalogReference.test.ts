import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PG_CLIENTS, requireTool, startPgServer, type PgTestServer } from './helpers/pg.ts';
import { startReferencePostgres, type ReferencePostgres } from './helpers/postgres.ts';

/**
 * The emulated catalog checked against a real PostgreSQL 15 (issue 36): the same table — the columns a
 * dataset has, in PostgreSQL's types — on both, the catalog statements clients send
 * (test/fixtures/pg/catalog-statements.json: psql's \d and \dt, pgjdbc's metadata queries, SQLAlchemy's
 * reflection, Grafana's and Metabase's; a new statement joins by a line there) run on both, and the
 * answers' shapes compared: column names and type OIDs, and for the statements that describe the
 * table's columns, the rows. Then pgjdbc's DatabaseMetaData walk (DBeaver's, test/fixtures/pgjdbc/
 * MetaWalk.java) on both. Provisioned by scripts/test-setup.d/44-postgresql-server.sh (the server) and
 * 45-postgres-clients.sh (pgjdbc).
 */

const run = promisify(execFile);
/** `differs`: columns whose type is known to differ from PostgreSQL 15's, and how (docs/postgresql.md). */
type CatalogStatement = { client: string; sql: string; differs?: Record<string, string> };
const statements = JSON.parse(fs.readFileSync(path.join(import.meta.dirname, 'fixtures/pg/catalog-statements.json'), 'utf8')) as CatalogStatement[];

/** One event of each JSON value kind and the PostgreSQL type its column must be described as. */
const EVENT = { level: 'info', n: 7, ratio: 0.25, ok: true };
const PG_TYPES: Record<string, string> = { level: 'text', n: 'bigint', ratio: 'double precision', ok: 'boolean', p_timestamp: 'timestamp', p_src_ip: 'text', p_user_agent: 'text' };
const TABLE = 'reflogs';

/** Session statements (SET, SHOW, savepoints) are answered by the session, not the catalog. */
const SESSION = /^\s*(set|show|savepoint|release)\b/i;

let server: PgTestServer;
let reference: ReferencePostgres;
let ours: pg.Client;
let theirs: pg.Client;

beforeAll(async () => {
  // One after the other, so that afterAll stops whichever started if the other fails.
  reference = await startReferencePostgres();
  server = await startPgServer();
  const res = await server.request('/api/v1/ingest', { method: 'POST', json: [EVENT], headers: { 'X-P-Stream': TABLE } });
  expect(res.status, await res.clone().text()).toBe(200);
  ours = new pg.Client({ host: '127.0.0.1', port: server.pgPort, user: 'me', password: server.apiKey, database: 'lakehouse' });
  await ours.connect();
  // The reference table: our dataset's columns, in order, each in the PostgreSQL type it maps to.
  const ordered = (await ours.query(`SELECT attname FROM pg_catalog.pg_attribute WHERE attrelid = '${TABLE}'::regclass ORDER BY attnum`)).rows.map((r) => String(r.attname));
  expect([...ordered].sort()).toEqual(Object.keys(PG_TYPES).sort());
  // The database clients name (getCatalogs, current_database()): ours is always `lakehouse`.
  await reference.psql('CREATE DATABASE lakehouse');
  await reference.psql(`CREATE TABLE public.${TABLE} (${ordered.map((c) => `${c} ${PG_TYPES[c]}`).join(', ')});
    INSERT INTO public.${TABLE} (level, n, ratio, ok, p_timestamp) VALUES ('info', 7, 0.25, true, now())`, 'lakehouse');
  theirs = new pg.Client({ host: reference.socketDir, user: 'postgres', database: 'lakehouse' });
  await theirs.connect();
}, 120_000);

afterAll(async () => {
  await ours?.end().catch(() => undefined);
  await theirs?.end().catch(() => undefined);
  await Promise.all([server?.stop(), reference?.stop()]);
});

/** A result's columns: name and type OID. */
async function shape(client: pg.Client, sql: string): Promise<{ name: string; oid: number }[]> {
  const result = await client.query(sql.replaceAll("'logs'", `'${TABLE}'`).replaceAll('^(logs)$', `^(${TABLE})$`));
  return result.fields.map((f) => ({ name: f.name, oid: f.dataTypeID }));
}

/**
 * The same column names, in order, and the same type OIDs — but for the columns listed as differing,
 * which must still differ (a difference fixed leaves the list, so the list stays the truth).
 */
function expectSameShape(ours: { name: string; oid: number }[], theirs: { name: string; oid: number }[], differs: Record<string, string> = {}): void {
  expect(ours.map((c) => c.name)).toEqual(theirs.map((c) => c.name));
  for (const [i, c] of theirs.entries()) {
    if (differs[c.name]) expect(ours[i].oid, `${c.name} is listed as differing (${differs[c.name]}) but matches now: remove it from the list`).not.toBe(c.oid);
    else expect(`${c.name}:${ours[i].oid}`).toBe(`${c.name}:${c.oid}`);
  }
}

describe('catalog statements clients send: the same shape as PostgreSQL 15', () => {
  const catalog = statements.filter((s) => !SESSION.test(s.sql));
  it.each(catalog.map((s, i) => [`${s.client} #${i}: ${s.sql.replace(/\s+/g, ' ').slice(0, 60)}`, s] as const))('%s', async (_name, s) => {
    expectSameShape(await shape(ours, s.sql), await shape(theirs, s.sql), s.differs);
  });
});

describe("the table's columns: the type names PostgreSQL 15 gives each of our column types", () => {
  it.each([
    [
      'information_schema.columns',
      `SELECT column_name, data_type, udt_name, numeric_precision, numeric_scale, datetime_precision, is_nullable, ordinal_position FROM information_schema.columns WHERE table_schema = 'public' AND table_name = '${TABLE}' ORDER BY ordinal_position`,
      { data_type: 'varchar (the character_data domain) in PostgreSQL 15, text here: the column name has other types elsewhere in the catalog' },
    ],
    ["psql's \\d", `SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull, a.attnum FROM pg_catalog.pg_attribute a WHERE a.attrelid = '${TABLE}'::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, {}],
    ['pg_type of each column', `SELECT a.attname, t.typname, a.atttypid, t.typlen, t.typcategory FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid = a.atttypid WHERE a.attrelid = '${TABLE}'::regclass AND a.attnum > 0 ORDER BY a.attnum`, {}],
  ])('%s', async (_name, sql, differs) => {
    const [a, b] = await Promise.all([ours.query(sql), theirs.query(sql)]);
    expect(a.rows).toEqual(b.rows);
    expectSameShape(
      a.fields.map((f) => ({ name: f.name, oid: f.dataTypeID })),
      b.fields.map((f) => ({ name: f.name, oid: f.dataTypeID })),
      differs as Record<string, string>,
    );
  });
});

/** pgjdbc's walk (MetaWalk.java) against a server: its lines as name → answer. */
async function walk(url: string, user: string, password: string): Promise<Record<string, string>> {
  const jar = requireTool(path.join(PG_CLIENTS, 'postgresql-42.7.14.jar'), 'the pgjdbc jar');
  const classes = requireTool(path.join(PG_CLIENTS, 'pgjdbc-classes/MetaWalk.class'), 'the compiled pgjdbc metadata walk');
  const { stdout } = await run('java', ['-cp', `${path.dirname(classes)}:${jar}`, 'MetaWalk', url, user, password, TABLE], { timeout: 120_000 });
  return Object.fromEntries(stdout.trim().split('\n').map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
}

describe("pgjdbc's DatabaseMetaData walk (DBeaver's)", () => {
  /** Calls whose rows list the server's own objects (databases, schemas, types): their labels are compared. */
  const SERVER_OWN = new Set(['getCatalogs', 'getSchemas', 'getTypeInfo']);
  /** Calls whose answers differ from PostgreSQL 15's in column types only, and why. */
  const KNOWN_WALK: Record<string, string> = {
    getImportedKeys: 'key_seq is int8 (DuckDB\'s generate_series) for int4',
    getExportedKeys: 'key_seq is int8 (DuckDB\'s generate_series) for int4',
    getCrossReference: 'key_seq is int8 (DuckDB\'s generate_series) for int4',
  };
  /** One side of a walk line without the column types of its labels. */
  const withoutTypes = (line: string) => {
    const bar = line.indexOf('|');
    const labels = bar < 0 ? line : line.slice(0, bar);
    return labels.replace(/:[^,]*/g, '') + (bar < 0 ? '' : line.slice(bar));
  };
  const stripTypes = (how: string) => how.split(' ≠ ').map(withoutTypes).join(' ≠ ');

  it('answers every call as PostgreSQL 15 does', async () => {
    const [a, b] = await Promise.all([
      walk(`jdbc:postgresql://127.0.0.1:${server.pgPort}/lakehouse?sslmode=disable`, 'me', server.apiKey),
      walk(`jdbc:postgresql://127.0.0.1:${reference.tcpPort}/lakehouse?sslmode=disable`, 'postgres', 'unused'),
    ]);
    expect(Object.keys(a)).toEqual(Object.keys(b));
    const differing: Record<string, string> = {};
    for (const [call, answer] of Object.entries(a)) {
      expect(answer, call).not.toMatch(/^ERROR/);
      const comparable = (x: string) => (SERVER_OWN.has(call) ? x.split('|')[0] : x);
      if (comparable(answer) !== comparable(b[call])) differing[call] = `${comparable(answer)} ≠ ${comparable(b[call])}`;
    }
    // Calls whose column types differ (and only those): see KNOWN_WALK.
    expect(Object.keys(differing).sort()).toEqual(Object.keys(KNOWN_WALK).sort());
    for (const [call, how] of Object.entries(differing)) expect(stripTypes(how), `${call}: ${KNOWN_WALK[call]}`).toMatch(/^(.*) ≠ \1$/);
    expect(a.catalogMatchesCurrentDatabase).toBe('true');
    expect(a.getCatalogs.split('|')[1]).toBe('lakehouse');
  }, 240_000);
});
