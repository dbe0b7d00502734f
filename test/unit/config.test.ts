import * as fs from 'node:fs/promises';
import { describe, expect, test } from 'vitest';
import { envSchema, loadConfig, parseDurationMs, settingGroups } from '../../src/config.ts';
import { configDocPath, renderConfigDocs } from '../../scripts/gen-config-docs.ts';

describe('settings', () => {
  test('docs/configuration.md is what `npm run docs:config` generates from the schema', async () => {
    const committed = await fs.readFile(configDocPath, 'utf8');
    expect(committed, 'docs/configuration.md is stale: run `npm run docs:config`').toBe(renderConfigDocs());
  });

  test('every setting is described and belongs to exactly one group', () => {
    const seen = new Map<string, string>();
    for (const group of settingGroups) {
      for (const [name, schema] of Object.entries(group.settings)) {
        expect(seen.get(name), `${name} is in ${seen.get(name)} and ${group.title}`).toBeUndefined();
        seen.set(name, group.title);
        expect(schema.description?.length ?? 0, `${name} needs .describe()`).toBeGreaterThan(10);
      }
    }
    expect([...seen.keys()].sort()).toEqual(Object.keys(envSchema.shape).sort());
  });

  test.each([
    ['500ms', 500],
    ['30s', 30_000],
    ['10m', 600_000],
    ['2h', 7_200_000],
    ['1d', 86_400_000],
    ['250', 250],
    ['1.5s', 1500],
  ])('duration %s is %i ms', (text, ms) => {
    expect(parseDurationMs(text)).toBe(ms);
  });

  test.each([
    [{ P_MAX_BODY_BYTES: '512KB' }, (c: ReturnType<typeof loadConfig>) => c.server.maxBodyBytes, 512 * 1024],
    [{ P_MAX_BODY_BYTES: '2MiB' }, (c: ReturnType<typeof loadConfig>) => c.ingest.maxBodyBytes, 2 * 1024 ** 2],
    [{ P_MAX_BODY_BYTES: '2MiB' }, (c: ReturnType<typeof loadConfig>) => c.otlpGrpc.maxMessageBytes, 2 * 1024 ** 2],
    [{ P_MAX_NESTING: '3' }, (c: ReturnType<typeof loadConfig>) => c.ingest.maxNesting, 3],
    [{ P_INGEST_MIN_BODY_RATE: '0' }, (c: ReturnType<typeof loadConfig>) => c.ingest.minBodyRate, 1],
    [{ P_MAX_COLUMNS: '3000' }, (c: ReturnType<typeof loadConfig>) => c.ingest.maxNamesPerRequest, 12_000],
    [{ P_MAX_COLUMNS: '10' }, (c: ReturnType<typeof loadConfig>) => c.ingest.maxNamesPerRequest, 1000],
    [{ P_HEADERS_TIMEOUT: '3s' }, (c: ReturnType<typeof loadConfig>) => c.server.headersTimeoutMs, 3000],
    [{ P_FILTER_MAX_BYTES: '1KiB' }, (c: ReturnType<typeof loadConfig>) => c.filters.maxBytes, 1024],
    [{ P_FILTERS_PER_KEY: '7' }, (c: ReturnType<typeof loadConfig>) => c.filters.perKey, 7],
    [{ P_FLUSH_BYTES: '1GiB' }, (c: ReturnType<typeof loadConfig>) => c.engine.flushBytes, 1024 ** 3],
    [{ P_CATALOG_REFRESH: '1s' }, (c: ReturnType<typeof loadConfig>) => c.engine.catalogRefreshMs, 1000],
    [{ P_QUERY_TIMEOUT: '5s' }, (c: ReturnType<typeof loadConfig>) => c.queryLimits.timeoutMs, 5000],
    [{ P_QUERY_TIMEOUT: '5s' }, (c: ReturnType<typeof loadConfig>) => c.queryPool.queueWaitMs, 5000],
    [{ P_QUERY_WORKER_HEAP: '1MiB' }, (c: ReturnType<typeof loadConfig>) => c.queryPool.heapMb, 64],
    [{ P_ADDR: ':9000' }, (c: ReturnType<typeof loadConfig>) => c.host, '0.0.0.0'],
    [{ P_ADDR: '127.0.0.1:9000' }, (c: ReturnType<typeof loadConfig>) => c.port, 9000],
    [{ P_INGEST_WORKERS: '0' }, (c: ReturnType<typeof loadConfig>) => c.ingest.workers, 0],
    [{ P_INGEST_WORKER_IDLE: '0' }, (c: ReturnType<typeof loadConfig>) => c.ingest.workerIdleMs, 0],
    [{ P_QUERY_WORKER_IDLE: '2m' }, (c: ReturnType<typeof loadConfig>) => c.queryPool.idleMs, 120_000],
    [{ P_QUERY_WARM_WORKERS: '2' }, (c: ReturnType<typeof loadConfig>) => c.queryPool.warm, 2],
  ])('%j reaches its subsystem', (env, pick, expected) => {
    expect(pick(loadConfig(env))).toBe(expected);
  });

  test('the defaults, each stated once in the schema, reach the groups', () => {
    // The memory-sized defaults at a budget where each reaches its ceiling (memoryBudget.test.ts has the rest).
    const c = loadConfig({ P_MEMORY_BUDGET: '24GiB' });
    expect(c.engine).toMatchObject({ flushIntervalMs: 20_000, flushBytes: 16 * 1024 ** 2, catalogRefreshMs: 5000, maxColumns: 2000 });
    expect(c.queryPool).toMatchObject({ concurrency: 4, perKey: 2, queue: 16, warm: 0, idleMs: 45_000, heapMb: 512 });
    expect(c.queryLimits).toMatchObject({ timeoutMs: 30_000, maxRows: 500_000, maxDepth: 16 });
    expect(c.storageDuckDB).toEqual({ threads: 1, memoryLimit: '2048MiB', idleMs: 30_000 });
    expect(c.ingest).toMatchObject({ workerIdleMs: 5_000, maxBodyBytes: 10 * 1024 ** 2, maxNesting: 10, maxInflightBytes: 64 * 1024 ** 2, inflightWaitMs: 2000, keyShare: 0.5, maxNamesPerRequest: 8000 });
    expect(c.filters).toEqual({ maxBytes: 256 * 1024, perKey: 100 });
  });

  test.each([
    [{ P_MAX_BODY_BYTES: 'ten' }, /P_MAX_BODY_BYTES: not a size/],
    [{ P_FLUSH_INTERVAL: '5 fortnights' }, /P_FLUSH_INTERVAL: not a duration/],
    [{ P_ADDR: 'localhost' }, /P_ADDR must be host:port/],
    [{ P_STORAGE: 's3' }, /P_STORAGE=s3 needs P_S3_URL and P_S3_BUCKET/],
    [{ P_LOG_LEVEL: 'loud' }, /P_LOG_LEVEL/],
    [{ P_NODE_ID: 'a/b' }, /P_NODE_ID/],
  ])('%j is refused at start, naming the variable', (env, message) => {
    expect(() => loadConfig(env)).toThrow(message);
  });

  test('unknown variables are ignored (other programs share the environment)', () => {
    expect(() => loadConfig({ P_SOMETHING_ELSE: 'x', PATH: '/bin' })).not.toThrow();
  });
});
