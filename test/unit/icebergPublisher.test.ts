import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { openDuckDB, withConnection, type DuckDBSource } from '../../src/duckdb.ts';
import { Catalog, type FileEntry } from '../../src/storage/catalog.ts';
import type { Dataset, StorageContext } from '../../src/storage/dataset/dataset.ts';
import { decodeAvroFile, type ManifestEntry, type ManifestFile } from '../../src/storage/iceberg/avro.ts';
import { decodeTableMetadata } from '../../src/storage/iceberg/metadata.ts';
import { IcebergPublisher } from '../../src/storage/iceberg/publisher.ts';
import { TableReader } from '../../src/storage/iceberg/table.ts';
import { icebergMetadataKey, icebergMetadataPrefix, parseIcebergMetadataVersion } from '../../src/storage/layout.ts';
import { LocalObjectStore, type ObjectStore } from '../../src/storage/objects/objectStore.ts';
import { Quarantine } from '../../src/storage/files/quarantine.ts';
import { tempDir } from '../helpers/server.ts';

/**
 * The publisher's commit rules, with several publishers (workers) over one local store: versions only by
 * conditional creation, strictly increasing; every file published exactly once whoever wins; a worker
 * that has not read another's manifests never removes that worker's files; a failure between the Avro
 * uploads and the commit leaves the table as it was; the GC guard follows retained snapshots; an idle
 * dataset costs no store request until it changes or its recheck is due (reads counted: LIST and GET).
 */

const NAME = 'ds';
const GEN = 'g1';
const HOUR = 3_600_000;
const T0 = Math.floor(Date.parse('2026-01-01T10:00:00Z') / HOUR) * HOUR;
let dir: string;
let duck: DuckDBSource;
let store: LocalObjectStore;

beforeAll(async () => {
  dir = await tempDir('lakehouse-iceberg-');
  duck = await openDuckDB({ dataDir: dir, threads: 1, memoryLimit: '256MB', tempDir: path.join(dir, 'duck') });
  store = new LocalObjectStore(path.join(dir, 'store'));
});
afterAll(() => fs.rm(dir, { recursive: true, force: true }));

/** Writes a real Parquet file of `rows` rows at minute `i` of T0's hour, and returns its catalog entry. */
async function parquet(i: number, rows = 3): Promise<FileEntry> {
  const key = `${NAME}/date=2026-01-01/hour=10/minute=${String(i).padStart(2, '0')}/${GEN}.n1.${String(i).padStart(12, '0')}_0.parquet`;
  const file = path.join(store.root, key);
  await fs.mkdir(path.dirname(file), { recursive: true });
  const at = T0 + i * 60_000;
  await withConnection(duck, (c) =>
    c.run(`COPY (SELECT make_timestamp(${at * 1000}::BIGINT + r * 1000) AS p_timestamp, r::BIGINT AS n FROM range(${rows}) t(r)) TO '${file}' (FORMAT parquet)`),
  );
  return { key, rows, bytes: (await fs.stat(file)).size, minMs: at, maxMs: at + rows - 1, columns: ['p_timestamp', 'n'], nodeId: 'n1' };
}

function worker(s: ObjectStore = store, retentionMs = 3_600_000) {
  const ctx = { store: s, duck, settings: {} as StorageContext['settings'], quarantine: new Quarantine() } as StorageContext;
  const catalog = new Catalog();
  const ds = { meta: { name: NAME, generation: GEN, kind: 'json', timeColumn: 'p_timestamp', createdAt: '' }, schema: { p_timestamp: 'TIMESTAMP', n: 'BIGINT' }, catalog, deleted: false } as unknown as Dataset;
  const publisher = new IcebergPublisher(ctx, { intervalMs: 1000, snapshotRetentionMs: retentionMs, baseUri: `file://${store.root}` });
  let seq = 0;
  const apply = (add: FileEntry[], remove: string[] = []) =>
    catalog.apply(`m${++seq}`, { version: 1, generation: GEN, nodeId: 'n1', seq, createdAt: '', add, remove, walSegments: [], ingestedBytes: 0 });
  return { ds, publisher, apply };
}

/** Every metadata version in the store, and the data files of the newest one's current snapshot (by reading its Avro files). */
async function table() {
  const keys = (await store.list(icebergMetadataPrefix(NAME, GEN))).map((o) => o.key);
  const versions = keys.map(parseIcebergMetadataVersion).filter((v): v is number => v !== undefined).sort((a, b) => a - b);
  const latest = decodeTableMetadata((await store.getBytes(keys.find((k) => parseIcebergMetadataVersion(k) === versions.at(-1))!))!.toString());
  const current = latest.snapshots.find((s) => s['snapshot-id'] === latest['current-snapshot-id']);
  const files: string[] = [];
  const read = async (uri: string) => (await store.getBytes(uri.slice(`file://${store.root}/`.length)))!;
  for (const mf of current ? (await decodeAvroFile<ManifestFile>(await read(current['manifest-list']))).records : []) {
    for (const e of (await decodeAvroFile<ManifestEntry>(await read(mf.manifest_path))).records) if (e.status !== 2) files.push(e.data_file.file_path.split('/').slice(-5).join('/'));
  }
  return { versions, latest, files: files.sort() };
}

describe('the newest metadata version', () => {
  it.each([
    // [versions in the store, the version the worker knows, requests: LIST, GET]
    [[1, 2, 3], 3, 0, 1],
    [[1, 2, 3], 1, 1, 1],
    [[1, 2, 3], undefined, 1, 0],
    [[], undefined, 1, 0],
  ])('versions %j, known %s: LIST %i, GET %i', async (versions, known, lists, gets) => {
    const own = new LocalObjectStore(path.join(dir, `versions-${versions.length}-${known}`));
    for (const v of versions) await own.putIfAbsent(icebergMetadataKey('t', 'g', v), '{}');
    const seen = { list: 0, get: 0 };
    const counting: ObjectStore = Object.assign(Object.create(Object.getPrototypeOf(own)), own, {
      list: (prefix: string) => (seen.list++, own.list(prefix)),
      getBytes: (key: string) => (seen.get++, own.getBytes(key)),
    });
    const reader = new TableReader(counting, (u) => u);
    expect(await reader.latestVersion('t', 'g', known)).toBe(Math.max(0, ...versions));
    expect(seen).toEqual({ list: lists, get: gets });
  });
});

describe('Iceberg publisher', () => {
  it('three workers racing commit every file exactly once, in strictly increasing versions', async () => {
    const workers = [worker(), worker(), worker()];
    const all: FileEntry[] = [];
    for (let round = 0; round < 4; round++) {
      const f = await parquet(round);
      all.push(f);
      for (const w of workers) w.apply([f]);
      await Promise.all(workers.map((w) => w.publisher.publish(w.ds)));
    }
    const t = await table();
    expect(t.versions).toEqual(t.versions.map((_, i) => i + 1));
    expect(t.files).toEqual(all.map((f) => f.key).sort());
    const seqs = t.latest.snapshots.map((s) => s['sequence-number']);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(new Set(seqs).size).toBe(seqs.length);
    expect(Number(t.latest.snapshots.at(-1)!.summary['total-records'])).toBe(all.reduce((n, f) => n + f.rows, 0));
  });

  it("never removes a file a worker has not read yet; removes what its catalog removed (compaction → overwrite)", async () => {
    const behind = worker();
    const before = await table();
    expect(await behind.publisher.publish(behind.ds)).toBe(false); // an empty catalog: nothing to add, nothing it may remove
    expect((await table()).files).toEqual(before.files);
    const ahead = worker();
    const [a, b] = [await parquet(0), await parquet(1)];
    const merged = await parquet(30, 6);
    ahead.apply([a, b]);
    ahead.apply([merged], [a.key, b.key]);
    for (const f of before.files) if (![a.key, b.key].includes(f)) ahead.apply([{ ...a, key: f }]);
    await ahead.publisher.publish(ahead.ds);
    const after = await table();
    expect(after.files).toContain(merged.key);
    expect(after.files).not.toContain(a.key);
    expect(after.latest.snapshots.at(-1)!.summary.operation).toBe('overwrite');
    // The files the overwritten snapshots list stay protected from the GC while those snapshots are retained.
    expect(ahead.publisher.referenced(a.key)).toBe(true);
  });

  it('a failure between the Avro uploads and the commit leaves the table as it was', async () => {
    const failing: ObjectStore = Object.assign(Object.create(Object.getPrototypeOf(store)), store, {
      putIfAbsent: async () => {
        throw new Error('crash before commit');
      },
    });
    const w = worker(failing);
    const before = await table();
    for (const f of before.files) w.apply([{ ...(await parquet(0)), key: f }]);
    w.apply([await parquet(40)]);
    await expect(w.publisher.publish(w.ds)).rejects.toThrow('crash before commit');
    expect(await table()).toEqual(before);
  });

  it('expired snapshots no longer protect their files', async () => {
    const w = worker(store, 0);
    const t = await table();
    for (const f of t.files) w.apply([{ ...(await parquet(0)), key: f }]);
    const extra = await parquet(41);
    w.apply([extra]);
    await w.publisher.publish(w.ds);
    const after = await table();
    expect(after.latest.snapshots).toHaveLength(1);
    expect(w.publisher.referenced(extra.key)).toBe(true);
    // Minute 0's file was merged away two tests ago: only expired snapshots listed it.
    const merged = (await parquet(0)).key;
    expect(after.files).not.toContain(merged);
    expect(w.publisher.referenced(merged)).toBe(false);
  });

  it('skips idle rounds: no store request while the catalog and schema are unchanged, until a change or the recheck', async () => {
    let lists = 0;
    const counting: ObjectStore = Object.assign(Object.create(Object.getPrototypeOf(store)), store, {
      list: (prefix: string) => {
        lists++;
        return store.list(prefix);
      },
      getBytes: (key: string) => {
        lists++;
        return store.getBytes(key);
      },
    });
    const w = worker(counting);
    for (const f of (await table()).files) w.apply([{ ...(await parquet(0)), key: f }]);
    await w.publisher.publishAll([w.ds]);
    const inStep = lists;
    expect(inStep).toBeGreaterThan(0);
    await w.publisher.publishAll([w.ds]);
    expect(lists).toBe(inStep);
    // A new file in the catalog: the next round lists, plans and commits it.
    const added = await parquet(43);
    w.apply([added]);
    await w.publisher.publishAll([w.ds]);
    expect(lists).toBeGreaterThan(inStep);
    expect((await table()).files).toContain(added.key);
    const committed = lists;
    await w.publisher.publishAll([w.ds]);
    expect(lists).toBe(committed);
    // Ten intervals later it looks again (other workers' versions, snapshot expiry).
    const now = Date.now();
    const clock = vi.spyOn(Date, 'now').mockReturnValue(now + 10_001);
    try {
      await w.publisher.publishAll([w.ds]);
    } finally {
      clock.mockRestore();
    }
    expect(lists).toBeGreaterThan(committed);
  });
});
