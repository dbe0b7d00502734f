import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { describe, expect, it } from 'vitest';
import { defaultReserve } from '../../src/storage/diskSpace.ts';
import { tempDir } from '../helpers/server.ts';

const MiB = 1024 * 1024;

/**
 * The disk reserve must hold one flush's Parquet, or a full disk never recovers by itself (issue 30
 * A12: 2 MiB on a 64 MiB file system). The reference is measured, not assumed: a WAL segment of
 * incompressible events (random bytes as base64) as large as a sealed segment gets (P_FLUSH_BYTES),
 * written as zstd Parquet the way a flush writes it.
 */
describe('defaultReserve: room for one flush of incompressible data', () => {
  it.each([
    ['64 MiB file system, 4 MiB flushes', 64 * MiB, 4 * MiB],
    ['64 MiB file system, 8 MiB flushes', 64 * MiB, 8 * MiB],
    ['1 GiB file system, 4 MiB flushes', 1024 * MiB, 4 * MiB],
  ])('%s', async (_name, fileSystem, flushBytes) => {
    const dir = await tempDir();
    const wal = path.join(dir, 'segment.ndjson');
    const lines: string[] = [];
    let bytes = 0;
    for (let i = 0; bytes < flushBytes; i++) {
      const line = `${JSON.stringify({ p_timestamp: new Date(Date.UTC(2026, 10, 28) + i).toISOString(), msg: randomBytes(600).toString('base64') })}\n`;
      lines.push(line);
      bytes += line.length;
    }
    await fs.writeFile(wal, lines.join(''));
    const db = await DuckDBInstance.create(':memory:', { threads: '1' });
    const conn = await db.connect();
    try {
      const target = path.join(dir, 'flush.parquet');
      await conn.run(`COPY (SELECT * FROM read_json('${wal}', format = 'newline_delimited', columns = {p_timestamp: 'TIMESTAMP', msg: 'VARCHAR'})) TO '${target}' (FORMAT parquet, COMPRESSION zstd)`);
      const parquet = (await fs.stat(target)).size;
      expect(defaultReserve(flushBytes, fileSystem)).toBeGreaterThanOrEqual(parquet);
    } finally {
      conn.closeSync();
      db.closeSync();
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it('leaves the WAL at least three quarters of a small file system', () => {
    expect(defaultReserve(16 * MiB, 64 * MiB)).toBe(16 * MiB);
  });
});
