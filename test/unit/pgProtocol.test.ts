import { DuckDBInstance } from '@duckdb/node-api';
import { describe, expect, it } from 'vitest';
import { Framer, parseStartup, ProtocolViolation, splitRows } from '../../src/doors/pg/messages.ts';
import { parameterLiteral } from '../../src/doors/pg/params.ts';
import { sessionCommand } from '../../src/doors/pg/sessionCommands.ts';
import { invalidSqlstate } from '../../src/doors/pg/sqlstate.ts';
import { copyOut } from '../../src/doors/pg/copy.ts';
import { pgSyntax, replacePlaceholders, splitStatements } from '../../src/query/catalog/sqlText.ts';
import { dataRowEncoder, RowWriter, timestampText } from '../../src/query/results/pg.ts';

/** The PostgreSQL door's pure parts: framing, statement text, parameters, session commands, row encoding. */

const typed = (type: string, body: Buffer) => {
  const head = Buffer.alloc(5);
  head.write(type, 0, 'latin1');
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
};

describe('Framer', () => {
  it('reassembles messages split anywhere and keeps the rest', () => {
    const f = new Framer(1024);
    const bytes = Buffer.concat([typed('Q', Buffer.from('SELECT 1\0')), typed('X', Buffer.alloc(0))]);
    for (const b of bytes) f.push(Buffer.from([b]));
    expect(f.next()).toEqual({ type: 0x51, payload: Buffer.from('SELECT 1\0') });
    expect(f.next()).toEqual({ type: 0x58, payload: Buffer.alloc(0) });
    expect(f.next()).toBeUndefined();
  });

  it('refuses lengths below 4 and messages over the bound, before buffering them', () => {
    const small = new Framer(1024);
    small.push(Buffer.from([0x51, 0, 0, 0, 3]));
    expect(() => small.next()).toThrow(ProtocolViolation);
    const big = new Framer(1024);
    big.push(Buffer.from([0x51, 0, 0, 0x10, 0]));
    expect(() => big.next()).toThrow(/larger than the 1024 accepted/);
  });

  const cases: [string, Buffer, RegExp][] = [
    ['SSLRequest', Buffer.from([0x04, 0xd2, 0x16, 0x2f]), /ssl/],
    ['protocol 2', Buffer.from([0, 2, 0, 0]), /only 3\.0/],
    ['no terminator', Buffer.concat([Buffer.from([0, 3, 0, 0]), Buffer.from('user')]), /terminator/],
  ];
  for (const [name, payload, want] of cases) {
    it(`startup packet: ${name}`, () => {
      let got: string;
      try {
        got = parseStartup(payload).kind;
      } catch (err) {
        got = (err as Error).message;
      }
      expect(got).toMatch(want);
    });
  }
});

describe('statement text', () => {
  it('splits on semicolons outside literals, quoted names, comments and dollar quotes', () => {
    expect(splitStatements("SELECT ';'; SELECT \"a;b\" -- ;\n; /* ; */ SELECT $$;$$;;")).toEqual(["SELECT ';'", ' SELECT "a;b" -- ;\n', ' /* ; */ SELECT $$;$$']);
    expect(splitStatements('  ;  -- nothing\n')).toEqual([]);
  });

  it('finds and replaces $n placeholders only in code', () => {
    const sql = "SELECT $1, '$2', \"$3\", $2 -- $4\n, $$ $5 $$";
    expect(replacePlaceholders(sql, (n) => `<${n}>`)).toBe("SELECT <1>, '$2', \"$3\", <2> -- $4\n, $$ $5 $$");
  });

  it('makes PostgreSQL-only catalog syntax plain', () => {
    expect(pgSyntax("WHERE c.relname OPERATOR(pg_catalog.~) '^(x)$' COLLATE pg_catalog.default AND pg_catalog.pg_table_is_visible(c.oid)")).toBe(
      "WHERE c.relname  ~  '^(x)$'   AND pg_table_is_visible(c.oid)",
    );
    expect(pgSyntax("SELECT x::pg_catalog.text, CAST(y AS pg_catalog.regtype), 'pg_catalog.f(' FROM pg_catalog.pg_class")).toBe("SELECT x::text, CAST(y AS regtype), 'pg_catalog.f(' FROM pg_catalog.pg_class");
  });
});

describe('parameterLiteral', () => {
  const text = (s: string) => Buffer.from(s);
  const int4 = Buffer.alloc(4);
  int4.writeInt32BE(-42);
  const ts = Buffer.alloc(8);
  ts.writeBigInt64BE(1_000_000n); // 2000-01-01 00:00:01 UTC
  const cases: [string, Buffer | null, number, number, string | undefined, string][] = [
    ['null', null, 0, 0, undefined, 'NULL'],
    ['untyped text', text("it's"), 0, 0, undefined, "'it''s'"],
    ['untyped, inferred BIGINT', text('17'), 0, 0, 'BIGINT', '17'],
    ['untyped, inferred BIGINT, not a number', text('1; DROP'), 0, 0, 'BIGINT', "'1; DROP'"],
    ['int8 text', text(' 12 '), 0, 20, undefined, '12'],
    ['int4 binary', int4, 1, 23, undefined, '-42'],
    ['float8 NaN', text('NaN'), 0, 701, undefined, "CAST('NaN' AS DOUBLE)"],
    ['timestamp binary', ts, 1, 1114, undefined, "CAST('2000-01-01 00:00:01.000' AS TIMESTAMP)"],
    ['timestamptz text', text('2026-01-01 10:00:00+02'), 0, 1184, undefined, "CAST('2026-01-01 10:00:00+02' AS TIMESTAMPTZ)"],
    ['bool', text('t'), 0, 16, undefined, "CAST('t' AS BOOLEAN)"],
  ];
  for (const [name, value, format, oid, inferred, want] of cases) {
    it(name, () => expect(parameterLiteral(value, format, oid, inferred)).toBe(want));
  }
  /** Binary values of PostgreSQL's send functions: int32 days since 2000-01-01, numeric's base-10000 words. */
  const i32 = (v: number) => {
    const b = Buffer.alloc(4);
    b.writeInt32BE(v);
    return b;
  };
  const numeric = (words: number[]) => {
    const b = Buffer.alloc(2 * words.length);
    words.forEach((w, i) => b.writeUInt16BE(w & 0xffff, 2 * i));
    return b;
  };
  const i64 = (v: bigint) => {
    const b = Buffer.alloc(8);
    b.writeBigInt64BE(v);
    return b;
  };
  // Expected texts from PostgreSQL 15's date_out/numeric_out for the same bytes.
  const binary: [string, Buffer, number, string][] = [
    ['date 0', i32(0), 1082, "CAST('2000-01-01' AS DATE)"],
    ['date -1', i32(-1), 1082, "CAST('1999-12-31' AS DATE)"],
    ['date leap day', i32(60), 1082, "CAST('2000-03-01' AS DATE)"],
    ['date infinity (0x7fffffff)', i32(0x7fffffff), 1082, "CAST('infinity' AS DATE)"],
    ['date -infinity', i32(-0x80000000), 1082, "CAST('-infinity' AS DATE)"],
    ['date 5874897-12-31 (the last)', i32(2_147_483_494 - 2_451_545 - 1), 1082, "CAST('5874897-12-31' AS DATE)"],
    ['date 4714-11-24 BC (Julian day 0)', i32(-2_451_545), 1082, "CAST('4714-11-24 (BC)' AS DATE)"],
    ['timestamp infinity', i64(0x7fffffffffffffffn), 1114, "CAST('infinity' AS TIMESTAMP)"],
    ['numeric 12345.678', numeric([3, 1, 0, 3, 1, 2345, 6780]), 1700, '12345.678'],
    ['numeric -0.5', numeric([1, -1, 0x4000, 1, 5000]), 1700, '-0.5'],
    ['numeric 0', numeric([0, 0, 0, 0]), 1700, '0'],
    ['numeric NaN', numeric([0, 0, 0xc000, 0]), 1700, "CAST('NaN' AS DOUBLE)"],
  ];
  for (const [name, value, oid, want] of binary) {
    it(`binary ${name}`, () => expect(parameterLiteral(value, 1, oid)).toBe(want));
  }
  const refused: [string, Buffer, number, string][] = [
    ['date past 5874897 AD', i32(2_147_483_494 - 2_451_545), 1082, '22008'],
    ['date before 4713 BC', i32(-2_451_546), 1082, '22008'],
    ['timestamp beyond a Date', i64(0x7ffffffffffffff0n), 1114, '22008'],
    ['numeric: a digit of 10000', numeric([1, 0, 0, 0, 10000]), 1700, '22P03'],
    ['numeric: negative digit', numeric([1, 0, 0, 0, -1]), 1700, '22P03'],
    ['numeric: more digits than bytes', numeric([3, 0, 0, 0, 1]), 1700, '22P03'],
    ['numeric: bytes after the digits', numeric([1, 0, 0, 0, 1, 7]), 1700, '22P03'],
    ['numeric: negative digit count', numeric([-1, 0, 0, 0]), 1700, '22P03'],
    ['numeric: unknown sign', numeric([1, 0, 0x1234, 0, 1]), 1700, '22P03'],
    ['numeric: negative scale', numeric([1, 0, 0, -2, 1]), 1700, '22P03'],
    ['numeric: too short', Buffer.from([0, 1, 0]), 1700, '22P03'],
  ];
  for (const [name, value, oid, sqlstate] of refused) {
    it(`binary ${name} is refused with ${sqlstate}`, () => expect(() => parameterLiteral(value, 1, oid)).toThrow(expect.objectContaining({ sqlstate })));
  }

  it('refuses a non-number declared as a number, and NUL characters', () => {
    expect(() => parameterLiteral(text('1 OR 1=1'), 0, 20)).toThrow(/not a number/);
    expect(() => parameterLiteral(text('a\0b'), 0, 25)).toThrow(/NUL/);
  });
});

describe('session commands', () => {
  const cases: [string, 'I' | 'T' | 'E', string, 'I' | 'T' | 'E'][] = [
    ['BEGIN', 'I', 'BEGIN', 'T'],
    ['START TRANSACTION READ ONLY', 'I', 'BEGIN', 'T'],
    ['COMMIT', 'T', 'COMMIT', 'I'],
    ['COMMIT', 'E', 'ROLLBACK', 'I'],
    ['ROLLBACK', 'E', 'ROLLBACK', 'I'],
    ['ROLLBACK TO SAVEPOINT a', 'E', 'ROLLBACK', 'T'],
    ['SAVEPOINT a', 'T', 'SAVEPOINT', 'T'],
    ['SET extra_float_digits = 3', 'I', 'SET', 'I'],
    ["SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED", 'I', 'SET', 'I'],
    ['SHOW TimeZone', 'I', 'SHOW', 'I'],
  ];
  for (const [sql, from, tag, to] of cases) {
    it(`${sql} (${from})`, () => {
      const a = sessionCommand(sql, new Map(), from);
      expect([a.tag, a.txn]).toEqual([tag, to]);
    });
  }
  it('keeps SET values for SHOW and refuses read-write transactions', () => {
    const settings = new Map<string, string>();
    sessionCommand("SET application_name TO 'my app'", settings, 'I');
    expect(sessionCommand('SHOW application_name', settings, 'I').rows).toEqual(['my app']);
    expect(() => sessionCommand('SET TRANSACTION READ WRITE', settings, 'I')).toThrow(/read-only/);
    expect(() => sessionCommand('SHOW no_such_thing', settings, 'I')).toThrow(/unrecognized/);
  });
});

describe('DataRow encoding', () => {
  it('writes text and binary formats PostgreSQL clients read', async () => {
    const db = await DuckDBInstance.create(':memory:');
    const conn = await db.connect();
    const r = await conn.run(
      "SELECT true AS b, 7::SMALLINT AS s, -5::INTEGER AS i, 9007199254740993::BIGINT AS l, 1.5::FLOAT AS f, -0.1::DOUBLE AS d, 12345.6789::DECIMAL(12,4) AS n, 'a b' AS t, TIMESTAMP '2026-01-02 03:04:05.5' AS ts, DATE '2000-01-02' AS dt, ['x', NULL, 'y z'] AS arr, NULL::INTEGER AS nul",
    );
    const chunk = await r.fetchChunk();
    const row = chunk!.getRows()[0];
    const types = r.columnTypes();
    const textRow = new RowWriter();
    dataRowEncoder(types, [])(textRow, row);
    const values = readRow(textRow.take()).map((v) => v?.toString('utf8') ?? null);
    expect(values).toEqual(['t', '7', '-5', '9007199254740993', '1.5', '-0.1', '12345.6789', 'a b', '2026-01-02 03:04:05.5', '2000-01-02', '{x,NULL,"y z"}', null]);

    const binRow = new RowWriter();
    dataRowEncoder(types, [1])(binRow, row);
    const bin = readRow(binRow.take());
    expect(bin[0]).toEqual(Buffer.from([1]));
    expect(bin[1]!.readInt16BE(0)).toBe(7);
    expect(bin[2]!.readInt32BE(0)).toBe(-5);
    expect(bin[3]!.readBigInt64BE(0)).toBe(9007199254740993n);
    expect(bin[4]!.readFloatBE(0)).toBe(1.5);
    expect(bin[5]!.readDoubleBE(0)).toBe(-0.1);
    // numeric 12345.6789: 3 digit groups (1, 2345, 6789), weight 1, positive, scale 4.
    expect([...Array(7)].map((_, k) => bin[6]!.readInt16BE(2 * k))).toEqual([3, 1, 0, 4, 1, 2345, 6789]);
    expect(bin[8]!.readBigInt64BE(0)).toBe(BigInt(Date.UTC(2026, 0, 2, 3, 4, 5, 500) - Date.UTC(2000, 0, 1)) * 1000n);
    expect(bin[9]!.readInt32BE(0)).toBe(1);
    expect(bin[11]).toBeNull();
    conn.closeSync();
    db.closeSync();
  });

  it('splits a batch of rows at a row limit', () => {
    const w = new RowWriter();
    for (const s of ['a', 'bb', 'ccc']) {
      w.byte(0x44);
      w.int32(4 + 2 + 4 + s.length);
      w.int16(1);
      w.lenString(s);
    }
    const [first, rest] = splitRows(w.take(), 2);
    expect(readRows(first).map((r) => r[0]!.toString())).toEqual(['a', 'bb']);
    expect(readRows(rest).map((r) => r[0]!.toString())).toEqual(['ccc']);
  });

  it('prints timestamps as PostgreSQL does', () => {
    expect(timestampText(0n)).toBe('1970-01-01 00:00:00');
    expect(timestampText(-1n)).toBe('1969-12-31 23:59:59.999999');
    expect(timestampText(1_500_000n)).toBe('1970-01-01 00:00:01.5');
  });
});

function readRows(buf: Buffer): (Buffer | null)[][] {
  const rows: (Buffer | null)[][] = [];
  let pos = 0;
  while (pos < buf.length) {
    const len = buf.readInt32BE(pos + 1);
    rows.push(readRow(buf.subarray(pos, pos + 1 + len)));
    pos += 1 + len;
  }
  return rows;
}

function readRow(buf: Buffer): (Buffer | null)[] {
  expect(buf[0]).toBe(0x44);
  const n = buf.readInt16BE(5);
  const out: (Buffer | null)[] = [];
  let p = 7;
  for (let i = 0; i < n; i++) {
    const l = buf.readInt32BE(p);
    p += 4;
    out.push(l < 0 ? null : buf.subarray(p, p + l));
    if (l > 0) p += l;
  }
  return out;
}

describe('invalidSqlstate: DuckDB error classes as PostgreSQL SQLSTATEs (issue 36 #5)', () => {
  // Messages as DuckDB words them; SQLSTATEs PostgreSQL 15 gives the same mistake.
  const cases: [string, string][] = [
    ["Conversion Error: Could not convert string 'abc' to INT32", '22P02'],
    ['Conversion Error: Type INT64 with value 99999999999 can\'t be cast because the value is out of range for the destination type INT32', '22003'],
    ['Binder Error: Referenced column "nope" not found in FROM clause!', '42703'],
    ['Binder Error: Cannot compare values of type TIMESTAMP_NS and type TIMESTAMP WITH TIME ZONE - an explicit cast is required', '42804'],
    ['Binder Error: No function matches the given name and argument types \'lower(INTEGER)\'.', '42883'],
    ['Catalog Error: Scalar Function with name nope does not exist!', '42883'],
    ['Parser Error: syntax error at or near "SELEC"', '42601'],
    ['only read-only SELECT statements are allowed', '42601'],
  ];
  it.each(cases)('%s → %s', (message, code) => expect(invalidSqlstate(message)).toBe(code));
});

describe('copyOut: which COPY statements are reads', () => {
  const cases: [string, ReturnType<typeof copyOut>][] = [
    ['COPY (SELECT 1) TO STDOUT', { query: 'SELECT 1', csv: false, header: false }],
    [' copy ( select a, (b) from t ) to stdout;', { query: ' select a, (b) from t ', csv: false, header: false }],
    ['COPY (SELECT 1) TO STDOUT WITH (FORMAT csv, HEADER)', { query: 'SELECT 1', csv: true, header: true }],
    ["COPY (SELECT 1) TO STDOUT (FORMAT 'csv', HEADER false)", { query: 'SELECT 1', csv: true, header: false }],
    ['COPY t TO STDOUT', undefined],
    ['COPY t FROM STDIN', undefined],
    ["COPY (SELECT 1) TO '/tmp/x'", undefined],
  ];
  it.each(cases)('%s', (sql, want) => expect(copyOut(sql)).toEqual(want));
  it('refuses formats and options it does not write', () => {
    expect(() => copyOut('COPY (SELECT 1) TO STDOUT (FORMAT binary)')).toThrow(/not supported/);
    expect(() => copyOut("COPY (SELECT 1) TO STDOUT (DELIMITER '|')")).toThrow(/not supported/);
  });
});
