import { afterAll, describe, expect, it } from 'vitest';
import { boundParam, withoutGaps } from '../../src/doors/pg/params.ts';
import { CatalogDb, type DatasetSchema } from '../../src/query/catalog/catalogDb.ts';
import { replacePlaceholders } from '../../src/query/catalog/sqlText.ts';

/**
 * Catalog statements with bound parameters (issue 35): the template is classified and rewritten once,
 * with its placeholders (`$1::regclass` becomes a lookup of the parameter), and DuckDB binds each value.
 * The reference for each case is the statement with the value written in as a PostgreSQL literal,
 * classified and run as text (how a catalog statement without parameters runs): both must answer the
 * same rows, with the same columns and types.
 */

const OID = { text: 25, int4: 23, int8: 20, oid: 26, unknown: 0 };
const datasets = (): DatasetSchema[] => [
  { name: 'app', schema: { p_timestamp: 'TIMESTAMP', level: 'VARCHAR', n: 'BIGINT' } },
  { name: 'Mixed Case', schema: { p_timestamp: 'TIMESTAMP', v: 'DOUBLE' } },
];

describe('catalog statements with bound parameters answer as with literals', async () => {
  const db = await CatalogDb.open(datasets, { timeoutMs: 30_000, maxRows: 10_000, maxDepth: 32 });
  afterAll(() => db.close());

  /** All rows of a run, as DataRow bytes, with its columns. */
  const answer = async (sql: string, params?: Parameters<CatalogDb['run']>[4]) => {
    const run = await db.run(sql, [], undefined, false, params);
    const data: Buffer[] = [];
    for (let b = await run.next(); b; b = await run.next()) data.push(b.data);
    return { fields: run.fields, data: Buffer.concat(data).toString('hex') };
  };
  const answered = new Set<string>();
  const quote = (v: string) => `'${v.replace(/'/g, "''")}'`;

  /** [what a client sends, values as text, declared oids]. */
  const cases: [string, (string | null)[], number[]][] = [
    ['SELECT relname FROM pg_class WHERE relname = $1', ['app'], [OID.unknown]],
    ['SELECT c.relname, c.relkind FROM pg_catalog.pg_class c WHERE c.oid = $1::regclass', ['app'], [OID.unknown]],
    ['SELECT c.relname FROM pg_catalog.pg_class c WHERE c.oid = $1::regclass', ['public.app'], [OID.text]],
    ['SELECT c.relname FROM pg_catalog.pg_class c WHERE c.oid = $1::regclass', ['"Mixed Case"'], [OID.text]],
    ['SELECT a.attname, a.attnum FROM pg_attribute a WHERE a.attrelid = $1::regclass AND a.attnum > 0 ORDER BY a.attnum', ['app'], [OID.text]],
    ['SELECT n.nspname FROM pg_namespace n WHERE n.nspname = $1', ['public'], [OID.text]],
    ['SELECT n.nspname FROM pg_namespace n WHERE n.nspname = $1', ["it's; DROP TABLE app --"], [OID.text]],
    ["SELECT has_table_privilege($1, 'SELECT') AS ok", ['app'], [OID.text]],
    ['SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position', ['public', 'app'], [OID.unknown, OID.unknown]],
    ['SELECT relname FROM pg_class WHERE relnamespace = $1::regnamespace ORDER BY relname', ['public'], [OID.text]],
    ['SELECT relname FROM pg_class WHERE oid = $1 ORDER BY relname', [null], [OID.int8]],
    ['SELECT relname FROM pg_class WHERE relname = $1 OR relname = $3 ORDER BY relname', ['app', null, 'Mixed Case'], [OID.text, OID.text, OID.text]],
  ];

  it.each(cases)('%s %j', async (sql, values, oids) => {
    const dense = withoutGaps(sql, oids);
    const template = await db.classify(dense.sql);
    expect(template.kind).toBe('catalog');
    const positions = dense.positions ?? values.map((_, i) => i + 1);
    const params = positions.map((n) => boundParam(values[n - 1] === null ? null : Buffer.from(values[n - 1]!), 0, oids[n - 1]));
    const literal = replacePlaceholders(sql, (n) => (values[n - 1] === null ? 'NULL' : oids[n - 1] === OID.int8 ? values[n - 1]! : quote(values[n - 1]!)));
    const reference = await db.classify(literal);
    const got = await answer(template.sql, params);
    expect(got).toEqual(await answer(reference.sql));
    if (got.data) answered.add(sql + JSON.stringify(values));
  });
  // Equal empty answers would prove little: all but the injection-shaped and NULL cases answer rows.
  it('the cases answer rows', () => expect(answered.size).toBe(cases.length - 2));

  it('binds a value that would be SQL as a value (no rows, no error)', async () => {
    const template = await db.classify('SELECT relname FROM pg_class WHERE relname = $1');
    const got = await answer(template.sql, [boundParam(Buffer.from("x' OR '1'='1"), 0, OID.text)]);
    expect(got.data).toBe('');
  });
});

describe('placeholders with a gap (as PostgreSQL: a skipped parameter needs a declared type)', () => {
  /** [statement, declared oids, renumbered statement and positions, or the error]. */
  const cases: [string, number[], { sql: string; highest: number; positions?: number[] } | RegExp][] = [
    ['SELECT $1, $2', [], { sql: 'SELECT $1, $2', highest: 2 }],
    ['SELECT 1', [], { sql: 'SELECT 1', highest: 0 }],
    ['SELECT $2', [OID.int4], { sql: 'SELECT $1', highest: 2, positions: [2] }],
    ['SELECT $1::int, $3::int', [OID.int4, OID.int4, OID.int4], { sql: 'SELECT $1::int, $2::int', highest: 3, positions: [1, 3] }],
    ["SELECT $3 || '$2' /* $2 */, $1", [0, OID.text, 0], { sql: "SELECT $2 || '$2' /* $2 */, $1", highest: 3, positions: [1, 3] }],
    ['SELECT $1::int, $3::int', [], /could not determine data type of parameter \$2/],
    ['SELECT $1::int, $3::int', [OID.int4, 0, OID.int4], /could not determine data type of parameter \$2/],
    ['SELECT $1::int, $3::int', [OID.int4, 705, OID.int4], /could not determine data type of parameter \$2/],
    ['SELECT $4', [OID.int4], /parameter \$2/],
    ['SELECT $1::int8', [OID.int8, 0], /could not determine data type of parameter \$2/],
    ['SELECT $1::int8', [OID.int8, OID.text], { sql: 'SELECT $1::int8', highest: 1 }],
  ];
  it.each(cases)('%s %j', (sql, oids, expected) => {
    if (expected instanceof RegExp) {
      expect(() => withoutGaps(sql, oids)).toThrow(expected);
      try {
        withoutGaps(sql, oids);
      } catch (err) {
        expect((err as { sqlstate: string }).sqlstate).toBe('42P18');
      }
    } else expect(withoutGaps(sql, oids)).toEqual(expected);
  });
});
