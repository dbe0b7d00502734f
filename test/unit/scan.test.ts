import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { scanSql, timestampLiteral, type Snapshot } from '../../src/storage/scan.ts';
import { tempDir } from '../helpers/server.ts';

/** The scan seam's SQL: files wholly inside the range are read unfiltered, the rest filtered. */
describe('scanSql', () => {
  let dir: string;
  let conn: DuckDBConnection;
  const minute = (m: number) => Date.UTC(2026, 0, 1, 0, m);
  /** One file per minute 0..3, each holding a row at :00.000, :30.5005 and :59.9999 of its minute. */
  const files: Snapshot['files'] = [];

  beforeAll(async () => {
    dir = await tempDir('scan-');
    const duck = await DuckDBInstance.create(':memory:');
    conn = await duck.connect();
    for (let m = 0; m < 4; m++) {
      const file = path.join(dir, `m${m}.parquet`);
      const base = `TIMESTAMP '2026-01-01 00:0${m}:00'`;
      await conn.run(
        `COPY (SELECT ${base} + INTERVAL (us) MICROSECONDS AS p_timestamp, ${m} AS m FROM (VALUES (0), (30500500), (59999999)) v(us)) TO '${file}' (FORMAT parquet)`,
      );
      files.push({ key: `k${m}`, path: file, rows: 3, bytes: 1, minMs: minute(m), maxMs: minute(m) + 59_999, columns: ['p_timestamp', 'm'], nodeId: 'n' });
    }
  });
  afterAll(async () => {
    conn?.closeSync();
    await fs.rm(dir, { recursive: true, force: true });
  });

  // The files overlapping the range, as the catalog selects them.
  const snap = (startMs: number, endMs: number): Snapshot => ({
    meta: { name: 'ds', timeColumn: 'p_timestamp' } as Snapshot['meta'],
    schema: { p_timestamp: 'TIMESTAMP', m: 'BIGINT' },
    files: files.filter((f) => f.maxMs + 1 > startMs && f.minMs < endMs),
    segments: [],
    release: () => undefined,
  });

  const rows = async (startMs: number, endMs: number) => {
    const sql = scanSql(snap(startMs, endMs), startMs, endMs);
    const r = await conn.runAndReadAll(`SELECT m, strftime(p_timestamp, '%M:%S.%f') AS t FROM (${sql})`);
    return { sql, rows: r.getRowObjectsJson().map((x) => `${x.m} ${x.t}`) };
  };

  it('reads files wholly inside the range without a filter, and keeps time order', async () => {
    const { sql, rows: got } = await rows(minute(0), minute(4));
    expect(sql).not.toMatch(/WHERE/);
    expect(got).toHaveLength(12);
    expect(got).toEqual([...got].sort());
  });

  it('filters the files that straddle a bound, to the microsecond', async () => {
    // Start inside minute 1 (after its :00 row), end inside minute 2 (before its :59.999999 row).
    const { sql, rows: got } = await rows(minute(1) + 1, minute(2) + 59_999);
    expect(sql.match(/WHERE/g)).toHaveLength(2);
    expect(got).toEqual(['1 01:30.500500', '1 01:59.999999', '2 02:00.000000', '2 02:30.500500']);
    // The end bound one millisecond later takes the last row of minute 2: its file is now inside.
    const wider = await rows(minute(1), minute(2) + 60_000);
    expect(wider.sql).not.toMatch(/WHERE/);
    expect(wider.rows).toHaveLength(6);
  });

  it('with the bounds as variables: one view text per file split, the same rows as the literals for each range', async () => {
    const bounds = { start: "getvariable('scan_start')", end: "getvariable('scan_end')" };
    // Each group: ranges over the same files straddling the same bounds (as "the last 15 minutes" asked
    // again a little later), so one view serves them all.
    const groups: [string, [number, number][]][] = [
      ['start in minute 1, end in minute 2', [[minute(1) + 1, minute(2) + 59_999], [minute(1) + 30_501, minute(2) + 30_500], [minute(1) + 59_999, minute(2) + 30_501]]],
      ['whole files', [[minute(0), minute(4)]]],
      ['start in minute 0, end past every file', [[minute(0) + 1, minute(9)], [minute(0) + 30_501, minute(5)]]],
    ];
    for (const [name, ranges] of groups) {
      const texts = new Set(ranges.map(([s, e]) => scanSql(snap(s, e), s, e, undefined, bounds)));
      expect(texts.size, name).toBe(1);
      await conn.run(`CREATE OR REPLACE TEMP VIEW scan_v AS ${[...texts][0]}`);
      const seen = new Set<string>();
      for (const [s, e] of ranges) {
        await conn.run(`SET VARIABLE scan_start = ${timestampLiteral(s)}; SET VARIABLE scan_end = ${timestampLiteral(e)}`);
        const got = await conn.runAndReadAll(`SELECT m, strftime(p_timestamp, '%M:%S.%f') AS t FROM scan_v`);
        const want = (await rows(s, e)).rows;
        expect(got.getRowObjectsJson().map((x) => `${x.m} ${x.t}`), `${name} [${s}, ${e})`).toEqual(want);
        seen.add(want.join());
      }
      // Every range of a group selects other rows: the view follows the variables.
      expect(seen.size, name).toBe(ranges.length);
    }
  });

  it('bounds a nanosecond time column only within its range (1677–2262), for any query range', async () => {
    const file = path.join(dir, 'ns.parquet');
    await conn.run(`COPY (SELECT CAST(TIMESTAMP '2026-01-01 00:00:00' + INTERVAL (s) SECOND AS TIMESTAMP_NS) AS t, s FROM range(4) r(s)) TO '${file}' (FORMAT parquet)`);
    const nsFile = { key: 'ns', path: file, rows: 4, bytes: 1, minMs: minute(0), maxMs: minute(0) + 3000, columns: ['t', 's'], nodeId: 'n' };
    const nsSnap: Snapshot = { meta: { name: 'ns', timeColumn: 't' } as Snapshot['meta'], schema: { t: 'TIMESTAMP_NS', s: 'BIGINT' }, files: [nsFile], segments: [], release: () => undefined };
    // [start, end) → the seconds a reference filter in DuckDB keeps (compared as TIMESTAMP, which holds every bound).
    const cases: [string, number, number][] = [
      ['from year 1 (the whole range) to within the file', Date.UTC(1, 0, 1), minute(0) + 2000],
      ['from 1600 to 9999', Date.UTC(1600, 0, 1), Date.UTC(9999, 0, 1)],
      ['from within the file to year 9999', minute(0) + 1000, Date.UTC(9999, 0, 1)],
      ['within the file', minute(0) + 1000, minute(0) + 3000],
    ];
    for (const [name, startMs, endMs] of cases) {
      const got = await conn.runAndReadAll(`SELECT s FROM (${scanSql(nsSnap, startMs, endMs)}) ORDER BY s`);
      const iso = (ms: number) => new Date(ms).toISOString().replace('T', ' ').replace('Z', '');
      const want = await conn.runAndReadAll(
        `SELECT s FROM read_parquet('${file}') WHERE CAST(t AS TIMESTAMP) >= TIMESTAMP '${iso(startMs)}' AND CAST(t AS TIMESTAMP) < TIMESTAMP '${iso(endMs)}' ORDER BY s`,
      );
      expect(got.getRowObjectsJson(), name).toEqual(want.getRowObjectsJson());
      expect(want.getRowObjectsJson().length, name).toBeGreaterThan(0);
    }
  });
});
