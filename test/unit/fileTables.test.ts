import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { scanSql, type Snapshot } from '../../src/storage/scan.ts';
import { fileTableFor, TABLE_BYTES_PER_COLUMN, tableBytes } from '../../src/query/sql/fileTable.ts';
import { FileTables } from '../../src/query/worker/fileTables.ts';
import { tempDir } from '../helpers/server.ts';

/**
 * Small files read from the worker's table (fileTable.ts, worker/fileTables.ts) answer exactly what the
 * Parquet scan answers: the same rows, cast the same way, for any range and any mix of file schemas.
 */
describe('file tables', () => {
  let dir: string;
  let conn: DuckDBConnection;
  const minute = (m: number) => Date.UTC(2026, 0, 1, 0, m);
  const files: Snapshot['files'] = [];
  const BUDGET = 1 << 20;

  beforeAll(async () => {
    dir = await tempDir('filetables-');
    conn = await (await DuckDBInstance.create(':memory:')).connect();
    // Minute 0 lacks `level`; minute 1 holds `v` as BIGINT where the dataset now says DOUBLE (widened);
    // minutes 2–3 hold every column. Each holds a row at :00.000000, :30.500500 and :59.999999.
    for (let m = 0; m < 4; m++) {
      const file = path.join(dir, `m${m}.parquet`);
      const base = `TIMESTAMP '2026-01-01 00:0${m}:00'`;
      const v = m === 1 ? `(${m} * 10 + i)::BIGINT` : `(${m} * 10 + i) / 4`;
      const level = m === 0 ? '' : `, CASE WHEN i = 1 THEN NULL ELSE 'l' || i END AS level`;
      await conn.run(
        `COPY (SELECT ${base} + INTERVAL (us) MICROSECONDS AS p_timestamp, ${v} AS v${level} FROM (VALUES (0, 0), (30500500, 1), (59999999, 2)) t(us, i)) TO '${file}' (FORMAT parquet)`,
      );
      const columns = m === 0 ? ['p_timestamp', 'v'] : ['p_timestamp', 'v', 'level'];
      files.push({ key: `k${m}`, path: file, rows: 3, bytes: 100, minMs: minute(m), maxMs: minute(m) + 59_999, columns, nodeId: 'n' });
    }
  });
  afterAll(async () => {
    conn?.closeSync();
    await fs.rm(dir, { recursive: true, force: true });
  });

  const snap = (startMs: number, endMs: number, name = 'ds'): Snapshot => ({
    meta: { name, timeColumn: 'p_timestamp' } as Snapshot['meta'],
    schema: { p_timestamp: 'TIMESTAMP', v: 'DOUBLE', level: 'VARCHAR' },
    files: files.filter((f) => f.maxMs + 1 > startMs && f.minMs < endMs),
    segments: [],
    release: () => undefined,
  });
  const rowsOf = async (sql: string) =>
    (await conn.runAndReadAll(`SELECT strftime(p_timestamp, '%M:%S.%f') AS t, v, level, typeof(v) AS tv FROM (${sql})`)).getRowsJson().map((r) => JSON.stringify(r)).sort();

  const tables = new FileTables();
  it.each([
    ['every file whole', minute(0), minute(4)],
    ['both bounds inside files, to the microsecond', minute(1) + 1, minute(2) + 59_999],
    ['one file, its last row only', minute(0) + 59_999, minute(1)],
    ['a file with no row in range', minute(0) + 1, minute(0) + 30_000],
    ['the later files only (earlier ones stay in the table, unseen)', minute(2), minute(4)],
  ])('%s: the same rows as the Parquet scan', async (_name, startMs, endMs) => {
    const s = snap(startMs, endMs);
    const inTable = fileTableFor(s, (f) => f, BUDGET);
    expect(inTable).toBeDefined();
    await tables.sync(conn, { budget: BUDGET, tables: [inTable!.spec] });
    const fromTable = scanSql(s, startMs, endMs, (f) => f, undefined, inTable!.table);
    expect(fromTable).not.toMatch(/read_parquet/);
    const want = await rowsOf(scanSql(s, startMs, endMs));
    expect(await rowsOf(fromTable)).toEqual(want);
  });

  it('loads a file once, and starts over past the budget', async () => {
    const counting = new FileTables();
    let calls = 0;
    const counted = new Proxy(conn, { get: (t, p) => (p === 'run' ? (sql: string) => (calls++, t.run(sql)) : Reflect.get(t, p)) });
    const unit = tableBytes(files[0]);
    const spec = (s: Snapshot, budget: number) => ({ budget, tables: [fileTableFor(s, (f) => f, 1 << 20)!.spec] });
    const early = snap(minute(0), minute(2), 'budget');
    const fixed = spec(early, 0).tables[0].bytes;
    expect(fixed).toBe(4 * TABLE_BYTES_PER_COLUMN); // three columns and the file id
    await counting.sync(counted, spec(early, fixed + 2 * unit));
    expect(calls).toBe(2); // the table, then one INSERT of its files
    expect(counting.heldBytes).toBe(fixed + 2 * unit);
    await counting.sync(counted, spec(early, fixed + 2 * unit));
    expect(calls).toBe(2); // loaded already: no native call
    // Two more files past a budget of the table and two files: everything goes, then the job's files are loaded.
    const late = snap(minute(2), minute(4), 'budget');
    await counting.sync(counted, spec(late, fixed + 2 * unit));
    expect(counting.heldBytes).toBe(fixed + 2 * unit);
    const name = spec(late, 0).tables[0].name;
    expect((await conn.runAndReadAll(`SELECT DISTINCT p_file_table_id FROM ${name} ORDER BY 1`)).getRowsJson().flat()).toEqual(spec(late, 0).tables[0].files.map((f) => f.id).sort((a, b) => a - b));
  });

  it('a file that cannot be read fails the load and loads none of its batch', async () => {
    const bad = path.join(dir, 'bad.parquet');
    await fs.writeFile(bad, 'PAR1 not a parquet file PAR1');
    const tablesOf = new FileTables();
    const s = snap(minute(0), minute(4), 'damaged');
    const damaged = { ...s, files: [...s.files, { ...files[0], key: 'bad', path: bad }] };
    const spec = fileTableFor(damaged, (f) => f, BUDGET)!.spec;
    await expect(tablesOf.sync(conn, { budget: BUDGET, tables: [spec] })).rejects.toThrow();
    expect(tablesOf.heldBytes).toBe(spec.bytes); // the table, empty
    // The query runs again without the file set aside: every other file loads.
    await tablesOf.sync(conn, { budget: BUDGET, tables: [fileTableFor(s, (f) => f, BUDGET)!.spec] });
    expect((await conn.runAndReadAll(`SELECT count(*)::INTEGER FROM ${spec.name}`)).getRowsJson()).toEqual([[12]]);
  });

  it.each([
    ['no room', 0, {}],
    ['files above the room left', 4 * TABLE_BYTES_PER_COLUMN + 4 * tableBytes({ bytes: 100 }) - 1, {}],
    ['a wide schema (a table costs per column)', 8 << 20, Object.fromEntries(Array.from({ length: 400 }, (_, i) => [`c${i}`, 'VARCHAR'])) as Record<string, 'VARCHAR'>],
    ['a column named like the file id', 1 << 20, { p_file_table_id: 'BIGINT' }],
  ] as const)('reads Parquet with %s', (_name, room, extra) => {
    const s = snap(minute(0), minute(4));
    expect(fileTableFor({ ...s, schema: { ...s.schema, ...extra } }, (f) => f, room)).toBeUndefined();
  });

  it('reads from a table when the files fit the room exactly', () => {
    expect(fileTableFor(snap(minute(0), minute(4)), (f) => f, 4 * TABLE_BYTES_PER_COLUMN + 4 * tableBytes({ bytes: 100 }))).toBeDefined();
  });

  it('keeps one table per dataset and schema, the same ids for the same files', () => {
    const a = fileTableFor(snap(minute(0), minute(4)), (f) => f, BUDGET)!;
    const b = fileTableFor(snap(minute(0), minute(4)), (f) => f, BUDGET)!;
    const other = fileTableFor(snap(minute(0), minute(4), 'other'), (f) => f, BUDGET)!;
    const widened = fileTableFor({ ...snap(minute(0), minute(4)), schema: { p_timestamp: 'TIMESTAMP', v: 'VARCHAR', level: 'VARCHAR' } }, (f) => f, BUDGET)!;
    expect(a.table).toEqual(b.table);
    expect(new Set([a.table.name, other.table.name, widened.table.name]).size).toBe(3);
  });

  // A file's SELECT is kept with the file between queries: a new schema or link directory must not get the old one.
  it("builds a file's rows anew for another schema or link path, and keeps them otherwise", () => {
    const first = fileTableFor(snap(minute(2), minute(3)), (f) => `/w1/${path.basename(f)}`, BUDGET)!.spec.files[0];
    expect(fileTableFor(snap(minute(2), minute(3)), (f) => `/w1/${path.basename(f)}`, BUDGET)!.spec.files[0]).toBe(first);
    const otherDir = fileTableFor(snap(minute(2), minute(3)), (f) => `/w2/${path.basename(f)}`, BUDGET)!.spec.files[0];
    expect(otherDir.sql).toContain("'/w2/m2.parquet'");
    expect(otherDir.id).toBe(first.id);
    const widened = fileTableFor({ ...snap(minute(2), minute(3)), schema: { p_timestamp: 'TIMESTAMP', v: 'VARCHAR', level: 'VARCHAR' } }, (f) => `/w2/${path.basename(f)}`, BUDGET)!.spec.files[0];
    expect(widened.sql).toMatch(/CAST\("v" AS VARCHAR\)/);
    expect(first.sql).toMatch(/CAST\("v" AS DOUBLE\)/);
  });
});
