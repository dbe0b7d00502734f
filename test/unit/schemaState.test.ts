import * as fs from 'node:fs/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { DomainError } from '../../src/errors.ts';
import { decodeSchema } from '../../src/storage/codec.ts';
import { localSchemaFile } from '../../src/storage/layout.ts';
import { createDataset, openEngine, rows, type EngineFixture } from '../helpers/engine.ts';

// evolveSchema (through the engine's append): the local schema copy is written before a row that needs a
// new column is acknowledged, and memory follows the disk.

let f: EngineFixture | undefined;
afterEach(async () => {
  await f?.cleanup();
  f = undefined;
});

async function withDataset() {
  f = await openEngine();
  const { meta } = await createDataset(f.engine, 'app');
  const file = localSchemaFile(f.settings.dataDir, 'app', meta.generation);
  return { engine: f.engine, file };
}

const onDisk = async (file: string) => decodeSchema(file, await fs.readFile(file, 'utf8'));

describe('evolveSchema', () => {
  it('a schema write that fails half-way stores nothing, changes nothing, and the next append succeeds', async () => {
    const { engine, file } = await withDataset();
    await engine.append('app', rows([{ a: 1 }]), 10);
    const before = { ...engine.schemaOf('app').schema };
    // The write goes to a temp file and is renamed over the schema file: a non-empty directory in its
    // place makes the rename (the last step) fail, after the temp file was written.
    await fs.rm(file);
    await fs.mkdir(`${file}/blocked`, { recursive: true });
    const err = await engine.append('app', rows([{ a: 2, b: 'new column' }]), 10).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DomainError);
    expect((err as DomainError).kind).toBe('unavailable');
    expect(engine.schemaOf('app').schema).toEqual(before);
    expect(engine.stats('app').wal.rows).toBe(1);
    // A batch that needs no new column is not affected.
    expect(await engine.append('app', rows([{ a: 3 }]), 10)).toEqual({ count: 1 });
    await fs.rm(file, { recursive: true });
    expect(await engine.append('app', rows([{ a: 4, b: 'now it fits' }]), 10)).toEqual({ count: 1 });
    expect(await onDisk(file)).toMatchObject({ a: 'BIGINT', b: 'VARCHAR' });
  });

  it('concurrent batches with different new columns: the durable schema holds every one', async () => {
    const { engine, file } = await withDataset();
    const names = ['c1', 'c2', 'c3', 'c4', 'c5', 'c6'];
    await Promise.all(names.map((n) => engine.append('app', rows([{ [n]: n }]), 10)));
    const durable = await onDisk(file);
    for (const n of names) expect(durable[n], n).toBe('VARCHAR');
    expect(engine.stats('app').wal.rows).toBe(names.length);
  });

  it('a widened column is written as widened', async () => {
    const { engine, file } = await withDataset();
    await engine.append('app', rows([{ n: 1 }]), 10);
    await engine.append('app', rows([{ n: 0.5 }]), 10);
    expect((await onDisk(file)).n).toBe('DOUBLE');
  });
});
