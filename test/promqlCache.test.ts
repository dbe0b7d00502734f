import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { s3Env, startS3Server, type S3TestServer } from './helpers/s3server.ts';
import { startServer, tempDir, type TestServer } from './helpers/server.ts';
import { waitFor } from './helpers/wait.ts';
import { remoteWriteV1 } from './helpers/wire.ts';

/**
 * The query workers' PromQL sample cache (docs/promql.md "The sample cache") keeps answers exact: two
 * workers on one bucket (moto), the older samples written through worker B (flushed: files A's cache
 * decodes) and the newer through worker A (left in A's WAL: read by DuckDB, merged with the cached
 * files), every answer asked twice of A (files decoded, then held) and once more after A restarts
 * (empty cache, its WAL flushed to files). Expected values are computed here from the samples sent.
 */
// Recent (remote-write samples older than P_SIGNAL_TIME_PAST_LIMIT are refused), on a minute.
const T0 = Math.floor(Date.now() / 60_000) * 60_000 - 2 * 3_600_000;
const STEP = 15_000;
const SAMPLES = 121; // 30 minutes
const SPLIT = 80; // samples [0, 80) through B, the rest through A
const SERIES = 4;
const value = (n: number, i: number) => n * 1000 + i;
const END = T0 + (SAMPLES - 1) * STEP;

const body = (from: number, to: number, extra = false) =>
  remoteWriteV1([
      ...Array.from({ length: SERIES }, (_, n) => ({
        labels: [['__name__', 'cache_test_total'], ['instance', `i${n}`]] as [string, string][],
        samples: Array.from({ length: to - from }, (_, k) => ({ timestampMs: T0 + (from + k) * STEP, value: value(n, from + k) })),
      })),
      ...(extra ? [{ labels: [['__name__', 'only_b'], ['job', 'b']] as [string, string][], samples: [{ timestampMs: T0, value: 1 }] }] : []),
    ]);

describe('PromQL sample cache: exact over another worker\'s files, its own WAL, and a restart', () => {
  let s3: S3TestServer;
  let a: TestServer;
  let b: TestServer;
  let aDir: string;
  let env: Record<string, string>;

  beforeAll(async () => {
    s3 = await startS3Server();
    env = { ...s3Env(s3), P_CATALOG_REFRESH: '1s' };
    aDir = await tempDir();
    // A keeps what it receives in its WAL (a flush only at its stop); B flushes at once and has no cache.
    a = await startServer({ dataDir: aDir, env: { ...env, P_FLUSH_INTERVAL: '1h' } });
    b = await startServer({ env: { ...env, P_FLUSH_INTERVAL: '500ms', P_PROMQL_CACHE_BYTES: '0' } });
    const write = (w: TestServer, data: Buffer) =>
      w.request('/v1/prometheus/write?stream=cachetest', { method: 'POST', body: new Uint8Array(data), headers: { 'content-encoding': 'snappy', 'content-type': 'application/x-protobuf' } });
    expect((await write(b, body(0, SPLIT, true))).status).toBe(200);
    await waitFor('B flushed', async () => ((await (await b.request('/api/v1/logstream/cachetest/stats')).json()) as { wal: { count: number } }).wal.count === 0, 30_000);
    expect((await write(a, body(SPLIT, SAMPLES))).status).toBe(200);
  });
  afterAll(async () => {
    await a?.kill();
    await b?.kill();
    await s3?.close();
  });

  const promql = async (w: TestServer, path: string) => {
    const res = await w.request(`/prometheus/cachetest/api/v1/${path}`);
    const text = await res.text();
    expect(res.status, text).toBe(200);
    return (JSON.parse(text) as { data: unknown }).data;
  };
  const byInstance = (result: { metric: Record<string, string>; value?: [number, string]; values?: [number, string][] }[]) =>
    Object.fromEntries(result.map((r) => [r.metric.instance, r.value?.[1] ?? r.values!.map(([t, v]) => `${t}:${v}`).join(' ')]));
  const expected = (f: (n: number) => string) => Object.fromEntries(Array.from({ length: SERIES }, (_, n) => [`i${n}`, f(n)]));

  /** Every answer as computed from the samples sent, asked twice (cold, then from the cache). */
  async function expectExact(w: TestServer): Promise<void> {
    for (let round = 0; round < 2; round++) {
      const at = `time=${END / 1000}`;
      const count = (await promql(w, `query?query=${encodeURIComponent('count_over_time(cache_test_total[31m])')}&${at}`)) as { result: never[] };
      expect(byInstance(count.result)).toEqual(expected(() => String(SAMPLES)));
      const sum = (await promql(w, `query?query=${encodeURIComponent('sum_over_time(cache_test_total[31m])')}&${at}`)) as { result: never[] };
      expect(byInstance(sum.result)).toEqual(expected((n) => String(Array.from({ length: SAMPLES }, (_, i) => value(n, i)).reduce((x, y) => x + y, 0))));
      const range = (await promql(w, `query_range?query=cache_test_total&start=${T0 / 1000}&end=${END / 1000}&step=15`)) as { result: never[] };
      expect(byInstance(range.result)).toEqual(expected((n) => Array.from({ length: SAMPLES }, (_, i) => `${(T0 + i * STEP) / 1000}:${value(n, i)}`).join(' ')));
      // A selector of part of the range: the cached files cut exactly at its bounds.
      for (const i of [60, 85]) {
        const part = (await promql(w, `query?query=${encodeURIComponent('count_over_time(cache_test_total{instance="i2"}[5m])')}&time=${(T0 + i * STEP) / 1000}`)) as { result: never[] };
        expect(byInstance(part.result)).toEqual({ i2: '20' });
      }
      expect(await promql(w, `series?match[]=only_b&start=${T0 / 1000}&end=${END / 1000}`)).toEqual([{ __name__: 'only_b', job: 'b' }]);
      expect(await promql(w, `label/instance/values?start=${T0 / 1000}&end=${END / 1000}`)).toEqual(['i0', 'i1', 'i2', 'i3']);
      // labels and label values (reduced label sets from the cache, whole ones from the WAL), with match[] and a range.
      expect(await promql(w, `labels?start=${T0 / 1000}&end=${END / 1000}`)).toEqual(['__name__', 'instance', 'job']);
      expect(await promql(w, `label/__name__/values?start=${T0 / 1000}&end=${END / 1000}`)).toEqual(['cache_test_total', 'only_b']);
      expect(await promql(w, `labels?match[]=${encodeURIComponent('{instance=~"i[12]"}')}&start=${T0 / 1000}&end=${END / 1000}`)).toEqual(['__name__', 'instance']);
      // Only A's WAL holds samples after SPLIT; only B's file holds only_b (at T0).
      const late = `start=${(T0 + (SPLIT + 1) * STEP) / 1000}&end=${END / 1000}`;
      expect(await promql(w, `label/__name__/values?${late}`)).toEqual(['cache_test_total']);
      expect(await promql(w, `label/job/values?start=${T0 / 1000}&end=${T0 / 1000}`)).toEqual(['b']);
    }
  }

  it('A reads B\'s files through its cache and its own WAL through DuckDB: exact answers, cold and warm', async () => {
    // A learns of B's files at a catalog refresh.
    await waitFor('A sees B\'s samples', async () => {
      const r = (await promql(a, `query?query=${encodeURIComponent('count(count_over_time(only_b[1h]))')}&time=${END / 1000}`)) as { result: unknown[] };
      return r.result.length === 1;
    });
    await expectExact(a);
  });

  it('B (no cache) gives the same once A has flushed, and A after its restart (an empty cache) too', async () => {
    await a.stop();
    a = await startServer({ dataDir: aDir, env: { ...env, P_FLUSH_INTERVAL: '1h' } });
    await waitFor('B sees A\'s flushed samples', async () => {
      const r = (await promql(b, `query?query=${encodeURIComponent('count_over_time(cache_test_total{instance="i0"}[31m])')}&time=${END / 1000}`)) as { result: { value: [number, string] }[] };
      return r.result[0]?.value[1] === String(SAMPLES);
    });
    await expectExact(b);
    await expectExact(a);
  });
});
