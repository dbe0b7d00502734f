import { DuckDBInstance, DuckDBIntegerType, DuckDBVarCharType } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answerColumns, applyColumnNames, pgColumnNames, pgColumnTypes, untagColumn, withTypedColumns } from '../../src/query/catalog/columnNames.ts';
import { announcedAs } from '../../src/query/results/pg.ts';
import { ARRAY_OF, ELEMENT_OF, PG } from '../../src/query/results/pgTypes.ts';

/**
 * query/catalog/columnNames.ts: the names and types PostgreSQL 15 gives a catalog answer's columns,
 * read from DuckDB's parse tree of the statement. The expected names are PostgreSQL 15's own answers
 * to the same statements (test/pgCatalogReference.test.ts compares whole answers with a live server).
 */

let conn: Awaited<ReturnType<DuckDBInstance['connect']>>;
let db: DuckDBInstance;
beforeAll(async () => {
  db = await DuckDBInstance.create(':memory:');
  conn = await db.connect();
});
afterAll(() => {
  conn.closeSync();
  db.closeSync();
});

async function tree(sql: string): Promise<Record<string, unknown>> {
  const r = await conn.runAndReadAll('SELECT json_serialize_sql($1::VARCHAR) AS ast', [sql]);
  return JSON.parse(String(r.getRowObjects()[0].ast)) as Record<string, unknown>;
}

describe('column names as PostgreSQL 15 gives them', () => {
  it.each([
    ['SELECT c.relname, n.nspname AS "Schema" FROM pg_class c, pg_namespace n', ['relname', 'Schema']],
    ['SELECT NULL AS TABLE_CAT, NULL AS "TABLE_SCHEM"', ['table_cat', 'TABLE_SCHEM']],
    ['SELECT result.TABLE_NAME FROM (SELECT 1 AS table_name) result', ['table_name']],
    ["SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid), format_type(1, 2) FROM pg_attrdef d", ['pg_get_expr', 'format_type']],
    ["SELECT CASE WHEN true THEN 'a' END, CASE WHEN true THEN 'a' ELSE x END FROM t", ['case', 'x']],
    ["SELECT c.oid::pg_catalog.regclass, 'x'::text, 1 + 2, 'lit'", ['oid', 'text', '?column?', '?column?']],
    ['SELECT (SELECT c.collname FROM pg_collation c), EXISTS (SELECT 1), ARRAY[1, 2], coalesce(a, b) FROM t', ['collname', 'exists', 'array', 'coalesce']],
  ])('%s', async (sql, expected) => {
    const ast = await tree(sql);
    const names = pgColumnNames(ast, sql);
    applyColumnNames(names);
    // The statement's own columns come first (then those of its subqueries, named the same way).
    expect([...names.values()].slice(0, expected.length)).toEqual(expected);
  });
});

describe('column types from the model of PostgreSQL 15 catalog', () => {
  it.each([
    ['SELECT c.relname, c.relkind, c.oid, c.relnatts, c.relpages FROM pg_class c', ['name', 'char', 'oid', 'int2', undefined]],
    ['SELECT pg_get_userbyid(1), current_database(), current_user, col_description(1, 2), NULL', ['name', 'name', 'name', 'text', 'text']],
    ['SELECT (SELECT nspname FROM pg_namespace), table_name, data_type FROM information_schema.columns', ['name', 'name', undefined]],
    ['SELECT * FROM (SELECT n.nspname, c.oid AS id FROM pg_namespace n, pg_class c) s', ['name', 'oid']],
    ['SELECT r.TABLE_SCHEM, r.x FROM (SELECT n.nspname AS TABLE_SCHEM, 1 AS x FROM pg_namespace n) r', ['name', undefined]],
  ])('%s', async (sql, expected) => {
    const ast = await tree(sql);
    const types = pgColumnTypes(ast);
    applyColumnNames(pgColumnNames(ast, sql));
    const columns = answerColumns(ast, types);
    expect(columns?.map((c) => c.type)).toEqual(expected);
  });

  it('knows nothing of `*` (its columns are not in the statement)', async () => {
    expect(pgColumnTypes(await tree('SELECT * FROM pg_class'))).toBeUndefined();
  });

  it('carries each type through the statement as it runs, repeated names kept apart', async () => {
    const sql = withTypedColumns('SELECT 1 AS a, 2 AS a, 3 AS b', [{ name: 'a', type: 'oid' }, { name: 'a' }, { name: 'b', type: 'int2' }]);
    const result = await conn.run(sql);
    expect(result.columnNames().map(untagColumn)).toEqual([{ name: 'a', type: 'oid' }, { name: 'a' }, { name: 'b', type: 'int2' }]);
  });

  it.each([
    ['name', DuckDBVarCharType.instance, PG.text.oid, 19],
    ['oid', DuckDBIntegerType.instance, PG.int4.oid, 26],
    ['oid of text values: its own type', DuckDBVarCharType.instance, PG.text.oid, 25],
    ['char', DuckDBVarCharType.instance, PG.text.oid, 18],
    ['text', DuckDBIntegerType.instance, PG.int4.oid, 25],
  ])('announces a %s column as its catalog type when its values fit', (as, type, own, expected) => {
    expect(announcedAs(type, undefined).oid).toBe(own);
    expect(announcedAs(type, as.split(' ')[0]).oid).toBe(expected);
  });
});

describe('array type oids: one table', () => {
  it('maps each element type to its array and back', () => {
    for (const [elem, arr] of Object.entries(ARRAY_OF)) expect(ELEMENT_OF[arr]).toBe(Number(elem));
  });
});
