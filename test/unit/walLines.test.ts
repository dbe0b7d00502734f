/**
 * The last-resort reading of WAL segments as lines (src/storage/files/parquetWriter.ts walLinesSql, issue 30
 * A11) against read_json (walScanSql, what every other flush reads): the same rows and values for every
 * column type, awkward names, nulls, special doubles and commit markers.
 */
import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { describe, expect, it } from 'vitest';
import type { ColumnType } from '../../src/model.ts';
import { jsonPointer, walLinesSql, walScanSql } from '../../src/storage/files/parquetWriter.ts';

const COLUMNS: [string, ColumnType][] = [
  ['p_timestamp', 'TIMESTAMP'],
  ['msg', 'VARCHAR'],
  ['a/b~c', 'VARCHAR'],
  ['quote"d', 'BIGINT'],
  ['x', 'DOUBLE'],
  ['ok', 'BOOLEAN'],
  ['t_ns', 'TIMESTAMP_NS'],
  ['ints', 'BIGINT[]'],
  ['dbls', 'DOUBLE[]'],
  ['strs', 'VARCHAR[]'],
];

const LINES = [
  { p_timestamp: '2026-11-25T10:00:00.123Z', msg: 'plain', 'a/b~c': 'x,y\u0001z', 'quote"d': 9007199254740993, x: 1.5, ok: true, t_ns: '2026-11-25T10:00:00.123456789Z', ints: [1, 2], dbls: [0.5, -1], strs: ['a', 'b"c', ''] },
  {},
  { p_timestamp: '2026-11-25T10:01:00.000Z', msg: '{"nested": [1, 2]}', x: 'NaN', ok: false, ints: [], strs: null },
  { p_timestamp: '2026-11-25T10:02:00.000Z', msg: 'tab\there\\ and "quotes"', x: '-Infinity', 'quote"d': -4 },
  { msg: 'no time: a commit marker or a row the flush drops' },
].map((l) => JSON.stringify(l));

describe('walLinesSql reads what walScanSql reads', () => {
  it('every column type, awkward names, nulls, special doubles', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'wal-lines-'));
    const file = path.join(dir, '000000000001.ndjson');
    await fs.writeFile(file, `${LINES.join('\n')}\n`);
    const db = await DuckDBInstance.create(':memory:', { threads: '1' });
    const conn = await db.connect();
    const read = async (sql: string) => (await conn.runAndReadAll(`SELECT * FROM (${sql}) ORDER BY p_timestamp`)).getRowObjectsJson();
    try {
      const lines = await read(walLinesSql([file], COLUMNS, 'p_timestamp'));
      expect(lines).toHaveLength(3);
      expect(lines).toEqual(await read(walScanSql([file], COLUMNS, 'p_timestamp')));
    } finally {
      conn.closeSync();
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it('JSON Pointers escape ~ and /', () => {
    expect([jsonPointer('a'), jsonPointer('a/b'), jsonPointer('~x'), jsonPointer('')]).toEqual(['/a', '/a~1b', '/~0x', '/']);
  });
});
