import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import snappy from 'snappy';
import { afterEach, describe, expect, it } from 'vitest';
import { WriteRequestV1 } from '../src/ingest/prometheus/decode.ts';
import { listFiles } from './helpers/files.ts';
import { startServer, type TestServer } from './helpers/server.ts';
import { waitFor } from './helpers/wait.ts';

/**
 * A data file damaged under a running service (docs/guarantees.md "Damaged files"): a PromQL query
 * answers from the other files and the damaged one is set aside, whether the snapshot finds it (a
 * size that is not the catalog's, once the store looks again: src/storage/objects/recentSizes.ts) or the query
 * worker does (a file overwritten at its size, or damaged since the store last looked), read through
 * DuckDB's view or decoded into the worker's sample cache.
 */

// Three minutes of samples, four a minute: three per-minute files.
const T0 = Math.floor(Date.now() / 60_000) * 60_000 - 30 * 60_000;
const AT = [0, 15, 30, 45, 60, 75, 90, 105, 120, 135, 150, 165].map((s) => T0 + s * 1000);

function body(): Buffer {
  const timeseries = [{ labels: [{ name: '__name__', value: 'm' }], samples: AT.map((t) => ({ timestamp: t, value: 1 })) }];
  return snappy.compressSync(Buffer.from(WriteRequestV1.encode(WriteRequestV1.fromObject({ timeseries })).finish()));
}

async function count(server: TestServer): Promise<{ status: number; value?: string }> {
  const res = await server.request(`/prometheus/dmg/api/v1/query?query=${encodeURIComponent('count_over_time(m[10m])')}&time=${(T0 + 180_000) / 1000}`);
  const b = (await res.json()) as { data?: { result: { value: [number, string] }[] } };
  return { status: res.status, value: b.data?.result[0]?.value[1] };
}

async function quarantined(server: TestServer): Promise<{ key: string; kind: string }[]> {
  return ((await (await server.request('/api/v1/logstream/dmg/stats')).json()) as { quarantined: { key: string; kind: string }[] }).quarantined;
}

const DAMAGE: [string, (file: string) => Promise<void>][] = [
  ['overwritten at its size', async (f) => fs.writeFile(f, Buffer.alloc((await fs.stat(f)).size, 0x5a))],
  ['truncated', (f) => fs.truncate(f, 100)],
];

describe('PromQL over a data file damaged while the service runs', () => {
  let server: TestServer | undefined;
  afterEach(async () => server?.kill());

  for (const cache of ['0', '64MiB'])
    for (const [how, damage] of DAMAGE)
      it(`${how}, sample cache ${cache}: answered from the other files, the file set aside`, async () => {
        server = await startServer({ env: { P_PROMQL_CACHE_BYTES: cache, P_FLUSH_INTERVAL: '100ms', P_COMPACTION_INTERVAL: '1h' } });
        const res = await server.request('/v1/prometheus/write?stream=dmg', {
          method: 'POST',
          body: new Uint8Array(body()),
          headers: { 'content-encoding': 'snappy', 'content-type': 'application/x-protobuf' },
        });
        expect(res.status).toBe(200);
        const store = path.join(server.dataDir, 'store', 'dmg');
        await waitFor('three files', async () => (await listFiles(store, '.parquet')).length === 3);
        // Without the cache, a first answer has the store look at every file (its size kept a while).
        if (cache === '0') expect(await count(server)).toEqual({ status: 200, value: '12' });
        const files = (await listFiles(store, '.parquet')).sort();
        await damage(files[1]);
        expect(await count(server)).toEqual({ status: 200, value: '8' });
        const aside = await quarantined(server);
        expect(aside.map((q) => [q.key.split('/').pop(), q.kind])).toEqual([[path.basename(files[1]), 'parquet']]);
        // Asked again: the same answer, without the file.
        expect(await count(server)).toEqual({ status: 200, value: '8' });
      }, 120_000);
});
