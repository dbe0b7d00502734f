import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DuckDBInstance } from '@duckdb/node-api';
import { QueryPool } from '../src/query/worker/pool.ts';
import type { FromWorker } from '../src/query/worker/protocol.ts';
import { tempDir } from './helpers/server.ts';

/**
 * The second line of the sandbox, on its own: a query worker's DuckDB reads the files linked for its
 * query and nothing else, whatever SQL reaches it (these statements skip the planner on purpose).
 */
describe('query worker sandbox (defence in depth)', () => {
  let dir: string;
  let pool: QueryPool;
  let granted: string;
  let other: string;

  beforeAll(async () => {
    dir = await tempDir('qworker-');
    granted = path.join(dir, 'data', 'granted.parquet');
    other = path.join(dir, 'data', 'other.parquet');
    await fs.mkdir(path.dirname(granted), { recursive: true });
    const duck = await DuckDBInstance.create(':memory:');
    const conn = await duck.connect();
    await conn.run(`COPY (SELECT 'visible' AS v) TO '${granted}' (FORMAT parquet)`);
    await conn.run(`COPY (SELECT 'hidden' AS v) TO '${other}' (FORMAT parquet)`);
    conn.closeSync();
    pool = new QueryPool({ workDir: path.join(dir, 'work'), concurrency: 2, perKey: 2, queue: 4, queueWaitMs: 10_000, threads: 1, memoryLimit: '256MB', heapMb: 128, warm: 2 });
    await pool.start();
  });
  afterAll(async () => {
    await pool?.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  async function run(sql: string, materialize = false): Promise<{ rows?: unknown[]; error?: string }> {
    const exec = await pool.run('k', (filesDir) => ({
      type: 'run',
      links: [{ src: granted, name: 'g.parquet' }],
      views: [{ name: '"ds"', sql: `SELECT * FROM read_parquet('${filesDir}/g.parquet')` }],
      sql,
      sendNull: true,
      timeFormat: 'iso',
      maxRows: 1000,
      maxBytes: 1 << 20,
      streaming: false,
      materialize,
    }));
    const chunks: string[] = [];
    for await (const m of exec.events as AsyncIterable<FromWorker>) {
      if (m.type === 'chunk' || m.type === 'answer') chunks.push(m.text);
      if (m.type === 'error') return { error: m.message };
    }
    return { rows: JSON.parse(`[${chunks.join(',')}]`) as unknown[] };
  }

  it('reads its own dataset view', async () => {
    expect(await run('SELECT v FROM ds')).toEqual({ rows: [{ v: 'visible' }] });
    expect(await run('SELECT v FROM ds', true)).toEqual({ rows: [{ v: 'visible' }] });
  });

  it.each([
    ['a file by replacement scan', `SELECT * FROM '${'OTHER'}'`],
    ['a file by table function', `SELECT * FROM read_parquet('${'OTHER'}')`],
    ['a glob over the data directory', `SELECT * FROM read_parquet('${'DIR'}/data/*.parquet')`],
    ['text files', `SELECT * FROM read_text('/etc/passwd')`],
    ['the network', `SELECT * FROM read_parquet('http://127.0.0.1:1/x.parquet')`],
  ])('cannot read %s', async (_what, template) => {
    const sql = template.replace('OTHER', other).replace('DIR', dir);
    const r = await run(sql, true);
    expect(r.rows).toBeUndefined();
    expect(r.error).toMatch(/Permission|disabled|not allowed|external access/i);
  });

  it('cannot change its settings', async () => {
    for (const sql of ["SET enable_external_access = true", "SET allowed_directories = ['/']", "RESET lock_configuration"]) {
      const r = await run(sql);
      expect(r.error, sql).toBeDefined();
    }
    // Still sandboxed afterwards.
    expect((await run(`SELECT * FROM '${other}'`)).error).toBeDefined();
  });
});
