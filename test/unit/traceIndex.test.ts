import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { describe, expect, it } from 'vitest';
import { bloomMayHold, buildTraceBloom, traceBloomOf } from '../../src/storage/files/traceIndex.ts';

const ids = (n: number) => Array.from({ length: n }, () => randomBytes(16).toString('hex'));

describe('trace-id Bloom filter', () => {
  it.each([1, 10, 1000, 20_000])('never misses an id it holds (%i ids)', (n) => {
    const held = ids(n);
    const bloom = buildTraceBloom(held);
    expect(held.filter((id) => !bloomMayHold(bloom, [id]))).toEqual([]);
    // Case does not matter: ids are compared as lower-case hex.
    expect(bloomMayHold(bloom, [held[0].toUpperCase()])).toBe(true);
  });

  it('rarely answers "maybe" for an id it does not hold (~1% at 10 bits per id)', () => {
    const bloom = buildTraceBloom(ids(20_000));
    const others = ids(20_000);
    const falsePositives = others.filter((id) => bloomMayHold(bloom, [id])).length;
    expect(falsePositives / others.length).toBeLessThan(0.03);
  });

  it('any of several ids', () => {
    const held = ids(100);
    const bloom = buildTraceBloom(held);
    expect(bloomMayHold(bloom, [...ids(3), held[50]])).toBe(true);
  });
});

/**
 * The filter of a file, built from DuckDB's result a chunk at a time (the ids never all JavaScript
 * strings at once: docs/memory.md), is the filter of the file's distinct ids: the same bits as
 * buildTraceBloom over them, read here on their own.
 */
describe('trace-id filter of a Parquet file', () => {
  it.each([
    ['no span', 0, 1],
    ['one trace of three spans', 1, 3],
    ['more ids than a chunk, each twice, with nulls and upper case', 5000, 2],
  ])('%s', async (_, traces, spansEach) => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'trace-bloom-'));
    const file = path.join(dir, 'spans.parquet');
    const duck = await DuckDBInstance.create(':memory:');
    const conn = await duck.connect();
    try {
      const held = ids(traces).map((id, i) => (i % 7 === 0 ? id.toUpperCase() : id));
      const values = [...held.flatMap((id) => Array.from({ length: spansEach }, () => `'${id}'`)), 'NULL'];
      await conn.run(`COPY (SELECT unnest([${values.join(',')}]::VARCHAR[]) AS span_trace_id) TO '${file}' (FORMAT parquet)`);
      const distinct = (await conn.runAndReadAll(`SELECT DISTINCT span_trace_id FROM '${file}' WHERE span_trace_id IS NOT NULL`)).getRows().map(([id]) => String(id));
      expect(distinct.length).toBe(traces);
      expect(await traceBloomOf(duck, 'spans', file, [['span_trace_id', 'VARCHAR']])).toBe(buildTraceBloom(distinct));
    } finally {
      conn.closeSync();
      duck.closeSync();
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});
