import * as path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { IdleClosingDuckDB, openDuckDB, withConnection } from '../../src/duckdb.ts';
import { tempDir } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';

/** The storage DuckDB closed when idle (docs/memory.md): never while in use, opened again on use. */
describe('IdleClosingDuckDB', () => {
  let dir: string;
  const open = () => openDuckDB({ dataDir: dir, threads: 1, memoryLimit: '128MB', tempDir: path.join(dir, 'tmp') });
  beforeAll(async () => {
    dir = await tempDir('duckidle-');
  });

  const one = async (db: IdleClosingDuckDB) => withConnection(db, async (conn) => Number((await conn.runAndReadAll('SELECT 1 + 1 AS n')).getRowObjects()[0].n));

  it('opens on first use, closes after the idle time, and opens again', async () => {
    const db = new IdleClosingDuckDB(open, 50);
    expect(db.isOpen).toBe(false);
    expect(await one(db)).toBe(2);
    expect(db.opens).toBe(1);
    await waitFor('closed', async () => !db.isOpen);
    expect(await one(db)).toBe(2);
    expect(db.opens).toBe(2);
    // A reopened instance has the same settings (the configuration is locked again).
    await expect(withConnection(db, (conn) => conn.run("SET memory_limit = '1GB'"))).rejects.toThrow(/locked/i);
  });

  it('is never closed while a connection is in use, and concurrent first uses share one instance', async () => {
    const db = new IdleClosingDuckDB(open, 20);
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const long = withConnection(db, async (conn) => {
      await held;
      return Number((await conn.runAndReadAll('SELECT 42 AS n')).getRowObjects()[0].n);
    });
    const short = await Promise.all([one(db), one(db), one(db)]);
    expect(short).toEqual([2, 2, 2]);
    expect(db.opens).toBe(1);
    // Well past the idle time of the short uses: still open, for the long one.
    await new Promise((r) => setTimeout(r, 200));
    expect(db.isOpen).toBe(true);
    release();
    expect(await long).toBe(42);
    await waitFor('closed after the last use', async () => !db.isOpen);
  });

  it('an open that fails fails its use, and the next use opens again', async () => {
    let fail = true;
    const db = new IdleClosingDuckDB(async () => {
      if (fail) throw new Error('IO Error: Cannot open file: Too many open files');
      return open();
    }, 50);
    await expect(one(db)).rejects.toThrow(/Too many open files/);
    expect(db.isOpen).toBe(false);
    fail = false;
    expect(await one(db)).toBe(2);
    expect(db.opens).toBe(1);
  });

  it('release() closes at once when unused, else when the last connection closes, without waiting for the idle time', async () => {
    // An idle time no test waits for: every close here is release()'s, observed right after the step.
    const db = new IdleClosingDuckDB(open, 3_600_000);
    expect(await one(db)).toBe(2);
    expect(db.isOpen).toBe(true);
    db.release();
    expect(db.isOpen).toBe(false);
    let finish!: () => void;
    const held = new Promise<void>((r) => (finish = r));
    const inUse = withConnection(db, async (conn) => {
      await held;
      return Number((await conn.runAndReadAll('SELECT 7 AS n')).getRowObjects()[0].n);
    });
    await waitFor('opened again', async () => db.isOpen);
    db.release();
    expect(db.isOpen).toBe(true); // a connection is open on it
    finish();
    expect(await inUse).toBe(7);
    expect(db.isOpen).toBe(false);
    expect(db.opens).toBe(2);
    // Released once: the next use keeps the instance for the idle time again.
    expect(await one(db)).toBe(2);
    expect(db.isOpen).toBe(true);
    db.release();
  });

  it('release() with nothing open leaves the next use its idle time', async () => {
    const db = new IdleClosingDuckDB(open, 3_600_000);
    db.release();
    expect(await one(db)).toBe(2);
    expect(db.isOpen).toBe(true);
    db.release();
    expect(db.isOpen).toBe(false);
  });

  it('release() leaves an instance kept open (idle time 0) open', async () => {
    const db = new IdleClosingDuckDB(open, 0);
    expect(await one(db)).toBe(2);
    db.release();
    expect(db.isOpen).toBe(true);
  });

  it('with an idle time of 0 stays open', async () => {
    const db = new IdleClosingDuckDB(open, 0);
    expect(await one(db)).toBe(2);
    await new Promise((r) => setTimeout(r, 100));
    expect(db.isOpen).toBe(true);
  });
});
