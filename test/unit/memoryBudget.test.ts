import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { flushableColumns, memoryBudget, sizedDefaults } from '../../src/memoryBudget.ts';

const MiB = 1024 * 1024;

describe('the memory budget: the cgroup limit, else total memory', () => {
  async function fake(cgroup: string, files: Record<string, string>) {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'lakehouse-cg-'));
    await fs.writeFile(path.join(dir, 'cgroup'), cgroup);
    for (const [f, text] of Object.entries(files)) {
      await fs.mkdir(path.dirname(path.join(dir, 'root', f)), { recursive: true });
      await fs.writeFile(path.join(dir, 'root', f), text);
    }
    return memoryBudget(path.join(dir, 'cgroup'), path.join(dir, 'root'));
  }
  it.each<[string, string, Record<string, string>, number | 'total', string]>([
    ['cgroup v2 limit', '0::/kubepods/pod1\n', { 'kubepods/pod1/memory.max': `${512 * MiB}\n` }, 512 * MiB, 'cgroup v2'],
    ['cgroup v2 without a limit', '0::/x\n', { 'x/memory.max': 'max\n' }, 'total', 'total memory'],
    ['cgroup v1 limit', '4:memory:/docker/abc\n1:cpu:/\n', { 'memory/docker/abc/memory.limit_in_bytes': `${256 * MiB}\n` }, 256 * MiB, 'cgroup v1'],
    ['cgroup v1 "unlimited"', '4:memory:/a\n', { 'memory/a/memory.limit_in_bytes': '9223372036854771712\n' }, 'total', 'total memory'],
    ['v1 and v2 lines: the one with a limit', '4:memory:/a\n0::/b\n', { 'memory/a/memory.limit_in_bytes': '9223372036854771712\n', 'b/memory.max': `${1024 * MiB}\n` }, 1024 * MiB, 'cgroup v2'],
    ['no cgroup file', '', {}, 'total', 'total memory'],
  ])('%s', async (_label, cgroup, files, bytes, source) => {
    const got = await fake(cgroup, files);
    expect(got).toEqual({ bytes: bytes === 'total' ? os.totalmem() : bytes, source });
  });
});

describe('defaults sized from the budget; the parts stay under it', () => {
  it.each([256, 512, 1024, 2048, 4096, 8192, 32768])('%i MiB', (mib) => {
    const d = sizedDefaults(mib * MiB);
    // The service's own share (Node, ingest workers, in flight) is what the others leave: at least 40%.
    const others = d.storageMemoryBytes + d.queryConcurrency * d.queryWorkerMaxBytes;
    if (mib >= 512) expect(others).toBeLessThanOrEqual(0.6 * mib * MiB);
    expect(d.queryMemoryBytes).toBeLessThan(d.queryWorkerMaxBytes);
    expect(d.inflightBytes).toBeGreaterThanOrEqual(10 * MiB); // a largest body (P_MAX_BODY_BYTES) fits
    expect(d.queryConcurrency).toBeGreaterThanOrEqual(1);
    // Never below what cost a third more CPU per event (Node's 3 MiB at 512 MiB: under 12), never above
    // 16 MiB (48 MiB cost the same CPU and ~35 MB more at the peak: docs/memory.md).
    expect(d.ingestYoungGenerationBytes).toBeGreaterThanOrEqual(12 * MiB);
    expect(d.ingestYoungGenerationBytes).toBeLessThanOrEqual(16 * MiB);
    if (mib >= 1024) expect(d.ingestYoungGenerationBytes).toBe(16 * MiB);
  });

  it('at 512 MiB', () => {
    expect(sizedDefaults(512 * MiB)).toEqual({
      storageMemoryBytes: Math.floor((512 * MiB) / 6),
      storageThreads: 1,
      queryConcurrency: 1,
      queryWorkerMaxBytes: Math.floor((512 * MiB) / 3),
      queryMemoryBytes: Math.floor((512 * MiB) / 6),
      inflightBytes: 16 * MiB,
      flushBytes: 16 * MiB,
      metricMetadataBytes: 8 * MiB,
      // Three semi-spaces of 4 MiB (a 512 MiB budget / 128).
      ingestYoungGenerationBytes: 12 * MiB,
    });
  });

  it('explicit settings win over the sized defaults', () => {
    const sized = loadConfig({ P_MEMORY_BUDGET: '512MiB' });
    expect(sized.queryPool.concurrency).toBe(1);
    expect(sized.storageDuckDB.memoryLimit).toBe('85MiB');
    const set = loadConfig({ P_MEMORY_BUDGET: '512MiB', P_QUERY_CONCURRENCY: '3', P_STORAGE_MEMORY_LIMIT: '1GB', P_FLUSH_BYTES: '1MiB', P_QUERY_WORKER_MAX_MEMORY: '1GiB', P_MAX_INFLIGHT_BYTES: '32MiB', P_QUERY_MEMORY_LIMIT: '300MB' });
    expect(set).toMatchObject({
      queryPool: { concurrency: 3, maxRssBytes: 1024 * MiB, memoryLimit: '300MB' },
      storageDuckDB: { memoryLimit: '1GB' },
      engine: { flushBytes: MiB },
      ingest: { maxInflightBytes: 32 * MiB },
    });
    expect(sized.ingest.workerYoungGenerationMb).toBe(12);
    expect(loadConfig({ P_MEMORY_BUDGET: '512MiB', P_INGEST_WORKER_YOUNG_GENERATION: '24MiB' }).ingest.workerYoungGenerationMb).toBe(24);
  });
});

describe('the column limit a flush can write (issue 30 A11)', () => {
  // Measured with DuckDB alone (1 thread, read_json of NDJSON like the WAL's → zstd Parquet; docs/memory.md
  // "Wide datasets"): [storage memory MiB, WAL bytes, columns, flushed]. The derived limit, with that WAL
  // as the flush size, must be below every width that failed.
  const measured: [number, number, number, boolean][] = [
    [48, 2_625_184, 100, false],
    [85, 5_401_750, 200, false],
    [85, 4_089_117, 300, false],
    [85, 6_562_960, 100, false],
    [85, 16_184_310, 74, false],
    [341, 22_060_250, 800, false],
    [48, 821_258, 30, true],
    [85, 15_641_216, 40, true],
    [85, 4_013_580, 150, true],
    [341, 16_507_200, 600, true],
    [85, 17_122_215, 58, true],
    [1365, 9_642_605, 1990, true],
  ];
  it.each(measured)('%d MiB, %d WAL bytes, %d columns (flushed: %s)', (mem, wal, columns, flushed) => {
    const limit = flushableColumns(mem * MiB, wal);
    if (flushed) expect(limit).toBeGreaterThanOrEqual(Math.min(16, columns));
    else expect(limit).toBeLessThan(columns);
  });

  it.each([
    [{ P_MEMORY_BUDGET: '512MiB' }, flushableColumns(85 * MiB, 16 * MiB)],
    [{ P_MEMORY_BUDGET: '512MiB', P_MAX_COLUMNS: '40' }, 40],
    [{ P_MEMORY_BUDGET: '512MiB', P_STORAGE_MEMORY_LIMIT: '341MiB' }, flushableColumns(341 * MiB, 16 * MiB)],
    [{ P_MEMORY_BUDGET: '512MiB', P_FLUSH_BYTES: '4MiB' }, flushableColumns(85 * MiB, 4 * MiB)],
    [{ P_MEMORY_BUDGET: '24GiB' }, 2000],
  ])('%j: the ingest placement and the engine use the same limit', (env, expected) => {
    const c = loadConfig(env);
    expect(c.engine.maxColumns).toBe(expected);
    expect(c.ingest.maxColumns).toBe(expected);
  });
});
