import { once } from 'node:events';
import type * as net from 'node:net';
import { DuckDBInstance } from '@duckdb/node-api';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { startPgServer } from '../../src/doors/pg/server.ts';
import { ApiKeys } from '../../src/doors/shared/auth.ts';
import { ConnectionBudget } from '../../src/doors/shared/connections.ts';
import type { Services } from '../../src/doors/shared/context.ts';
import { sqlParses } from '../../src/metrics.ts';
import { runCatalog } from '../../src/query/catalog/inWorker.ts';
import { QueryExecutor } from '../../src/query/sql/executor.ts';
import type { ParseSite } from '../../src/query/sql/parseTree.ts';
import type { Execution, QueryPool } from '../../src/query/worker/pool.ts';
import type { FromWorker, WorkerJob } from '../../src/query/worker/protocol.ts';
import type { Snapshot, TableSource } from '../../src/storage/scan.ts';
import { tempDir } from '../helpers/server.ts';

/**
 * Parses per statement, per door (issue 35; docs/architecture.md "Parses per statement"): the real
 * QueryExecutor (sandbox, planner, time range: the service's DuckDB) behind the real PostgreSQL session
 * (node-postgres, in process) and the HTTP door's entry (`execute`), counted by
 * lakehouse_sql_parses_total. The query pool is replaced by one that runs catalog jobs with the
 * worker's own code (catalog/inWorker.ts, its parses reported back as from a worker) and answers data
 * jobs with no rows: the worker's parse of the text it runs is counted as `execute` when handed over.
 *
 * Expected counts: one parse of the statement's text by DuckDB's parser (`pg` or `sandbox`) plus the
 * parse DuckDB makes of the text it runs (`execute` for data, `prepare` for catalog statements). What
 * is parsed more, and why, is written beside each row.
 */

const SCHEMA = { p_timestamp: 'TIMESTAMP', level: 'VARCHAR', n: 'BIGINT' } as const;

/** Query workers in this process: catalog jobs by the worker's code, data jobs answered with no rows. */
function inProcessPool(): QueryPool {
  let id = 0;
  const run = async (_key: string, build: (filesDir: string) => Omit<WorkerJob, 'id'>): Promise<Execution> => {
    const job = { ...build('/nonexistent'), id: ++id } as WorkerJob;
    const messages: FromWorker[] = [];
    if (job.type === 'catalog') await runCatalog(job, (m) => messages.push(m));
    else messages.push({ type: 'answer', id: job.id, fields: [], types: [], text: '', rows: 0, pgTypes: [], data: new Uint8Array() });
    return { events: (async function* () { yield* messages; })(), ack: () => undefined, grant: () => undefined, cancel: () => undefined };
  };
  return { run } as unknown as QueryPool;
}

const source: TableSource = {
  resolve: async (name) => (name.toLowerCase() === 'app' ? ({ name: 'app', timeColumn: 'p_timestamp' } as never) : undefined),
  snapshot: async () => ({ meta: { name: 'app', timeColumn: 'p_timestamp' }, schema: SCHEMA, files: [], segments: [], release: () => undefined }) as unknown as Snapshot,
  seriesSnapshot: async () => {
    throw new Error('not used');
  },
  seriesIndexDamaged: () => undefined,
  setAsideDamaged: async () => undefined,
};

type Counts = Partial<Record<ParseSite, number>>;

async function counts(): Promise<Counts> {
  const out: Counts = {};
  for (const v of (await sqlParses.get()).values) if (v.value) out[v.labels.site as ParseSite] = v.value;
  return out;
}

/** The parses `fn` made, by site. */
async function parsesOf(fn: () => Promise<unknown>): Promise<Counts> {
  const before = await counts();
  await fn().catch(() => undefined);
  const after = await counts();
  const out: Counts = {};
  for (const [site, n] of Object.entries(after)) if (n - (before[site as ParseSite] ?? 0) > 0) out[site as ParseSite] = n - (before[site as ParseSite] ?? 0);
  return out;
}

describe('parses per statement', async () => {
  const dir = await tempDir('parse-count-');
  const duck = await DuckDBInstance.create(':memory:');
  const limits = { maxSqlBytes: 1 << 20, maxDepth: 16, timeoutMs: 30_000, maxRows: 10_000, maxBytes: 1 << 26 };
  const executor = new QueryExecutor(duck, source, inProcessPool(), limits, 1 << 22);
  const keys = await ApiKeys.load('r:reader', dir);
  const config = loadConfig({ P_DATA_DIR: dir, P_PG_ADDR: '127.0.0.1:0' });
  const storage = { list: () => [{ name: 'app' }], schemaOf: () => ({ schema: SCHEMA }) };
  const connections = new ConnectionBudget({ maxConnections: 8, headersTimeoutMs: 10_000 });
  const server = await startPgServer({ config, keys, queries: executor, storage, connections } as unknown as Services, config.pg!);
  const client = new pg.Client({ host: '127.0.0.1', port: (server.address() as net.AddressInfo).port, user: 'u', password: 'r', database: 'any' });
  await client.connect();
  // node-postgres's own Connection (its protocol writer and reader), for what its Client never sends:
  // Parse and Describe of a named statement, as JDBC and psql's \gdesc do before binding.
  // (@types/pg leaves out the start-up calls the Client makes of it.)
  const raw = new pg.Connection() as pg.Connection & { connect(port: number, host: string): void; startup(c: Record<string, string>): void; password(p: string): void };
  raw.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  await once(raw, 'connect');
  raw.on('authenticationCleartextPassword', () => raw.password('r'));
  raw.startup({ user: 'u', database: 'any' });
  await once(raw, 'readyForQuery');
  afterAll(async () => {
    raw.end();
    await client.end().catch(() => undefined);
    await new Promise<void>((resolve) => server.close(() => resolve()));
    duck.closeSync();
  });
  // The dialect's macros are parsed once per process (`setup`): not part of any statement's count.
  await parsesOf(() => executor.plan('SELECT count(*) FROM app'));

  const http = (sql: string) => () => executor.execute({ sql, startMs: 0, endMs: Date.now(), sendNull: false, timeFormat: 'iso', streaming: true, principalId: 'r', canRead: () => true });
  const simple = (sql: string) => () => client.query(sql);
  const extended = (text: string, values: unknown[]) => () => client.query({ text, values });
  let described = 0;
  /** Parse + Describe (statement) + Sync; resolves with the parameter types the service described. */
  const describeStatement = (text: string) => async () => {
    const name = `d${++described}`;
    const types = once(raw, 'parameterDescription');
    raw.parse({ name, text, types: [] }, false);
    raw.describe({ type: 'S', name }, false);
    raw.sync();
    await once(raw, 'readyForQuery');
    return types;
  };
  let bound = 0;
  /** Parse (with declared parameter types) + Bind + Execute + Sync, as drivers that declare types send them. */
  const extendedTyped = (text: string, types: number[], values: (string | null)[]) => async () => {
    const name = `b${++bound}`;
    const done = once(raw, 'readyForQuery');
    // pg's writer sends `types` as int32 OIDs and `rows` as an int32 (@types/pg types them as strings).
    raw.parse({ name, text, types: types as unknown as string[] }, false);
    raw.bind({ statement: name, values }, false);
    raw.execute({ rows: 0 as unknown as string }, false);
    raw.sync();
    await done;
  };

  // Each row runs after the rows before it, on the same service (its caches as a client meets them).
  const table: { door: string; what: string; run: () => Promise<unknown>; expected: Counts }[] = [
    { door: 'HTTP', what: 'a SELECT', run: http('SELECT count(*) FROM app WHERE level = \'warn\''), expected: { sandbox: 1, execute: 1 } },
    { door: 'HTTP', what: 'the same SELECT again (plan cached)', run: http('SELECT count(*) FROM app WHERE level = \'warn\''), expected: { execute: 1 } },
    { door: 'HTTP', what: 'a refused statement', run: http('DELETE FROM app'), expected: { sandbox: 1 } },
    { door: 'PG simple', what: 'a data SELECT', run: simple('SELECT level, n FROM app WHERE n > 3'), expected: { pg: 1, execute: 1 } },
    { door: 'PG simple', what: 'the same SELECT again', run: simple('SELECT level, n FROM app WHERE n > 3'), expected: { execute: 1 } },
    { door: 'PG simple', what: 'a refused statement (no tree: data, refused by the sandbox)', run: simple('DROP TABLE app'), expected: { pg: 1 } },
    { door: 'PG simple', what: 'a syntax error', run: simple('SELEC 1'), expected: { pg: 1 } },
    { door: 'PG simple', what: 'a session command (the door reads it, no parser)', run: simple("SET application_name = 'parse-count'"), expected: {} },
    // The worker rewrites a catalog statement (PostgreSQL's column names and types, `x::regclass`…) and
    // checks it as it will run, from the tree it was sent: the new text is not parsed for the checks.
    { door: 'PG simple', what: 'a catalog statement', run: simple("SELECT nspname FROM pg_namespace WHERE nspname = 'public'"), expected: { pg: 1, prepare: 1 } },
    { door: 'PG simple', what: 'a catalog statement with pg_catalog names', run: simple("SELECT c.relname FROM pg_catalog.pg_class c WHERE c.relname = 'app'"), expected: { pg: 1, prepare: 1 } },
    { door: 'PG simple', what: 'the same catalog statement again', run: simple("SELECT nspname FROM pg_namespace WHERE nspname = 'public'"), expected: { prepare: 1 } },
    // Parse/Bind/Describe/Execute: the template's one parse, which the sandbox checks and plans; the
    // worker prepares the template (`execute`) and DuckDB binds the values to it: no text per value.
    { door: 'PG extended', what: 'a data SELECT with a parameter', run: extended('SELECT n FROM app WHERE level = $1', ['error']), expected: { pg: 1, execute: 1 } },
    { door: 'PG extended', what: 'the same statement with another value', run: extended('SELECT n FROM app WHERE level = $1', ['info']), expected: { execute: 1 } },
    { door: 'PG extended', what: 'a time range from two bound values', run: extended('SELECT count(*) FROM app WHERE p_timestamp >= $1 AND p_timestamp < $2 AND n > $3', [new Date(0), new Date(), 3]), expected: { pg: 1, execute: 1 } },
    // A Describe of the statement: the sandbox checks the template from its tree (no text with NULLs
    // for its parameters), the catalog database describes it (DuckDB's prepare: its types).
    { door: 'PG extended', what: 'Describe of a data statement with parameters', run: describeStatement('SELECT level FROM app WHERE n > $1 AND level = $2'), expected: { pg: 1, prepare: 1 } },
    { door: 'PG extended', what: 'Describe of the same statement again (described before)', run: describeStatement('SELECT level FROM app WHERE n > $1 AND level = $2'), expected: {} },
    // A catalog statement: classified and rewritten once with its placeholders (`$1::regclass` becomes a
    // lookup of the parameter), checked as it will run; the worker prepares it and DuckDB binds the values.
    { door: 'PG extended', what: 'a catalog statement with a parameter', run: extended('SELECT relname FROM pg_class WHERE relname = $1', ['app']), expected: { pg: 1, prepare: 1 } },
    { door: 'PG extended', what: 'the same catalog statement with another value', run: extended('SELECT relname FROM pg_class WHERE relname = $1', ['other']), expected: { prepare: 1 } },
    { door: 'PG extended', what: 'a catalog statement with $1::regclass', run: extended('SELECT c.relname FROM pg_catalog.pg_class c WHERE c.oid = $1::regclass', ['app']), expected: { pg: 1, prepare: 1 } },
    { door: 'PG extended', what: 'the same $1::regclass statement with another value', run: extended('SELECT c.relname FROM pg_catalog.pg_class c WHERE c.oid = $1::regclass', ['public.app']), expected: { prepare: 1 } },
    { door: 'PG extended', what: 'has_table_privilege($1, …) and n.nspname = $2', run: extended("SELECT has_table_privilege($1, 'SELECT') AS ok FROM pg_namespace n WHERE n.nspname = $2", ['app', 'public']), expected: { pg: 1, prepare: 1 } },
    // Placeholders with a gap ($1 and $3): renumbered once on the template, the values bound.
    { door: 'PG extended', what: 'a data SELECT with a gap, types declared', run: extendedTyped('SELECT n FROM app WHERE level = $1 AND n > $3', [25, 20, 20], ['warn', '0', '3']), expected: { pg: 1, execute: 1 } },
    { door: 'PG extended', what: 'the same gap statement with other values', run: extendedTyped('SELECT n FROM app WHERE level = $1 AND n > $3', [25, 20, 20], ['info', null, '5']), expected: { execute: 1 } },
    { door: 'PG extended', what: 'a catalog statement with a gap, types declared', run: extendedTyped('SELECT relname FROM pg_class WHERE relname = $1 OR relname = $3', [25, 25, 25], ['app', 'x', 'y']), expected: { pg: 1, prepare: 1 } },
    // As PostgreSQL's Parse: a skipped parameter without a declared type is refused before any parse.
    { door: 'PG extended', what: 'a gap without a declared type (42P18)', run: extendedTyped('SELECT n FROM app WHERE level = $1 AND n > $3', [], ['warn', '0', '3']), expected: {} },
    { door: 'PG extended', what: 'a data SELECT without parameters', run: extended('SELECT max(n) FROM app', []), expected: { pg: 1, execute: 1 } },
  ];

  it.each(table)('$door: $what', async ({ run, expected }) => {
    expect(await parsesOf(run)).toEqual(expected);
  });
});

/**
 * The door contract (docs/security.md) unchanged by checking a catalog statement as it will run when it
 * is classified: around the nesting limit, the statements refused before (at the run's own parse, of the
 * rewritten text) are refused now (at the classification), with the same message; the others run.
 * "Before" is reproduced with the same code: the rewritten text from a catalog database with room to
 * spare, run unchecked (parsed and checked in the worker) on one with the limit.
 */
describe('catalog statements checked as they will run', async () => {
  const { CatalogDb } = await import('../../src/query/catalog/catalogDb.ts');
  const datasets = () => [{ name: 'app', schema: { ...SCHEMA } }];
  const MAX = 6;
  const limited = await CatalogDb.open(datasets, { timeoutMs: 30_000, maxRows: 1000, maxDepth: MAX });
  const roomy = await CatalogDb.open(datasets, { timeoutMs: 30_000, maxRows: 1000, maxDepth: MAX + 10 });
  afterAll(() => {
    limited.close();
    roomy.close();
  });
  const seen = new Set<string>();
  const outcome = (p: Promise<unknown>) => p.then(() => 'runs', (e: Error) => e.message);
  /** Scalar subqueries nested `depth` deep around a catalog lookup (typed columns: a wrapper when run). */
  const nested = (depth: number) => {
    let q = "SELECT relname FROM pg_class WHERE relname = 'app'";
    for (let i = 1; i < depth; i++) q = `SELECT (${q}) AS relname`;
    return q;
  };
  it.each([MAX - 2, MAX - 1, MAX, MAX + 1].map((depth) => ({ depth })))('nested $depth deep', async ({ depth }) => {
    const sql = nested(depth);
    const before = await outcome(roomy.classify(sql).then((st) => limited.run(st.sql, [], undefined, false)));
    const now = await outcome(limited.classify(sql).then((st) => limited.run(st.sql, [], undefined, st.checked)));
    expect(now).toBe(before);
    seen.add(now === 'runs' ? 'runs' : 'refused');
  });
  // MAX deep as written passes the classification's own check; only the wrapper it runs in refuses it.
  it('covers both sides of the limit', () => expect([...seen].sort()).toEqual(['refused', 'runs']));
});
