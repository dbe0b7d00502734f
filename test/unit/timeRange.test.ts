import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseTree, treeJson } from '../../src/query/sql/parseTree.ts';
import { rangeInputs, timeRangeOf, WHOLE_RANGE } from '../../src/query/sql/timeRange.ts';

/** The time range a statement's WHERE gives its dataset (the PostgreSQL door has no range beside the SQL). */

let db: DuckDBInstance;
let conn: DuckDBConnection;
beforeAll(async () => {
  db = await DuckDBInstance.create(':memory:');
  conn = await db.connect();
});
afterAll(() => {
  conn?.closeSync();
  db?.closeSync();
});

const ms = (iso: string) => new Date(iso).getTime();
const columns = new Map([
  ['logs', 'p_timestamp'],
  ['other', 'ts'],
]);

async function statementOf(sql: string) {
  const r = await conn.runAndReadAll('SELECT json_serialize_sql($1::VARCHAR) AS ast', [sql]);
  return (JSON.parse(String(r.getRowObjects()[0].ast)) as { statements: Record<string, unknown>[] }).statements[0];
}

async function range(sql: string) {
  return timeRangeOf(conn, await statementOf(sql), columns);
}

/** The range from the part of the tree a plan keeps (rangeInputs, as JSON: sandbox.ts), not the whole tree. */
async function keptRange(sql: string) {
  const kept = rangeInputs(await statementOf(sql));
  return kept === undefined ? WHOLE_RANGE : timeRangeOf(conn, parseTree(treeJson(kept)), columns);
}

describe('timeRangeOf', () => {
  const A = '2026-01-02T03:04:05.678Z';
  const B = '2026-01-03T00:00:00Z';
  const cases: [string, string, { startMs: number; endMs: number }][] = [
    ['no condition', 'SELECT * FROM logs', WHOLE_RANGE],
    ['>=', `SELECT * FROM logs WHERE p_timestamp >= '${A}'`, { startMs: ms(A), endMs: WHOLE_RANGE.endMs }],
    ['> (floor: never narrower)', `SELECT * FROM logs WHERE p_timestamp > '${A}'`, { startMs: ms(A), endMs: WHOLE_RANGE.endMs }],
    ['<', `SELECT * FROM logs WHERE p_timestamp < '${B}'`, { startMs: WHOLE_RANGE.startMs, endMs: ms(B) + 1 }],
    ['<=', `SELECT * FROM logs WHERE p_timestamp <= '${B}'`, { startMs: WHOLE_RANGE.startMs, endMs: ms(B) + 1 }],
    ['=', `SELECT * FROM logs WHERE p_timestamp = '${A}'`, { startMs: ms(A), endMs: ms(A) + 1 }],
    ['constant on the left', `SELECT * FROM logs WHERE '${A}' <= p_timestamp`, { startMs: ms(A), endMs: WHOLE_RANGE.endMs }],
    ["BETWEEN (Grafana's $__timeFilter)", `SELECT * FROM logs WHERE "p_timestamp" BETWEEN '${A}' AND '${B}'`, { startMs: ms(A), endMs: ms(B) + 1 }],
    ['Metabase: qualified column, timestamp literal', `SELECT count(*) FROM "public"."logs" WHERE "public"."logs"."p_timestamp" >= timestamp '2026-01-02 03:04:05.678' AND "public"."logs"."p_timestamp" < timestamp '2026-01-03 00:00:00'`, { startMs: ms(A), endMs: ms(B) + 1 }],
    ['Superset: to_timestamp as the door rewrites it (strptime)', `SELECT * FROM logs WHERE p_timestamp >= strptime('2026-01-02 03:04:05.678000', '%Y-%m-%d %H:%M:%S.%f')`, { startMs: ms(A), endMs: WHOLE_RANGE.endMs }],
    ['alias', `SELECT * FROM logs l WHERE l.p_timestamp >= '${A}'`, { startMs: ms(A), endMs: WHOLE_RANGE.endMs }],
    ['intersection of several', `SELECT * FROM logs WHERE p_timestamp >= '2026-01-01' AND n > 3 AND p_timestamp >= '${A}' AND p_timestamp < '${B}'`, { startMs: ms(A), endMs: ms(B) + 1 }],
    ['under OR: no bound', `SELECT * FROM logs WHERE p_timestamp >= '${A}' OR n = 1`, WHOLE_RANGE],
    ['NOT (>=), which the parser turns into <', `SELECT * FROM logs WHERE NOT (p_timestamp >= '${A}')`, { startMs: WHOLE_RANGE.startMs, endMs: ms(A) + 1 }],
    ['under NOT of an AND: no bound', `SELECT * FROM logs WHERE NOT (p_timestamp >= '${A}' AND n = 1)`, WHOLE_RANGE],
    ['another column: no bound', `SELECT * FROM logs WHERE other_time >= '${A}'`, WHOLE_RANGE],
    ["another table's column: no bound", `SELECT * FROM logs WHERE x.p_timestamp >= '${A}'`, WHOLE_RANGE],
    ['a column on the other side: no bound', `SELECT * FROM logs WHERE p_timestamp >= p_other`, WHOLE_RANGE],
    ['the dataset twice (subquery sees the same view): no bound', `SELECT * FROM logs WHERE p_timestamp >= '${A}' AND n IN (SELECT n FROM logs)`, WHOLE_RANGE],
    ['a join: no bound', `SELECT * FROM logs JOIN other ON true WHERE p_timestamp >= '${A}'`, WHOLE_RANGE],
    ['from a subquery: no bound', `SELECT * FROM (SELECT p_timestamp + INTERVAL 1 DAY AS p_timestamp FROM logs) WHERE p_timestamp >= '${A}'`, WHOLE_RANGE],
    ['a number compared: no bound', 'SELECT * FROM logs WHERE p_timestamp >= 5', WHOLE_RANGE],
    ['a subquery as the value: no bound', `SELECT * FROM logs WHERE p_timestamp >= (SELECT max(x) FROM range(3) t(x))`, WHOLE_RANGE],
    ['contradiction: empty range', `SELECT * FROM logs WHERE p_timestamp >= '${B}' AND p_timestamp < '${A}'`, { startMs: ms(B), endMs: ms(B) }],
  ];
  for (const [name, sql, want] of cases) {
    it(name, async () => {
      expect(await range(sql)).toEqual(want);
      expect(await keptRange(sql)).toEqual(want);
    });
  }

  it('evaluates relative bounds (now() - interval) at query time', async () => {
    const before = Date.now();
    const r = await range("SELECT * FROM logs WHERE p_timestamp > now() - INTERVAL '1 hour'");
    expect(r.startMs).toBeGreaterThanOrEqual(before - 3_600_000 - 1);
    expect(r.startMs).toBeLessThanOrEqual(Date.now() - 3_600_000 + 1);
    expect(r.endMs).toBe(WHOLE_RANGE.endMs);
  });
});
