import * as fs from 'node:fs/promises';
import { unavailable } from '../../errors.ts';
import { log } from '../../log.ts';
import { decodeSchema, encodeSchema, type Schema } from '../codec.ts';
import type { Dataset, StorageContext } from './dataset.ts';
import type { SchemaReadBack } from './datasetState.ts';
import { localSchemaFile, schemaKey, schemaPrefix } from '../layout.ts';
import { writeFileDurable } from '../objects/objectStore.ts';
import { unionSchemas } from './schema.ts';

/**
 * A dataset's schema on this worker: the union of every worker's schema object in the store and this
 * worker's own schema, whose durable copy is the local file beside the WAL (ingestion does not depend
 * on the store being up) and which is uploaded with the next flush.
 */

/** Reads this worker's local copy and every worker's schema object; a damaged one is set aside. */
export async function refreshSchema(ctx: StorageContext, ds: Dataset): Promise<void> {
  const { dataDir, nodeId } = ctx.settings;
  const { name, generation } = ds.meta;
  const file = localSchemaFile(dataDir, name, generation);
  const local = await fs.readFile(file, 'utf8').catch(() => undefined);
  // A damaged local copy is set aside: the store's copy (below) and the WAL's own columns still
  // describe what was acknowledged.
  const own = local ? ctx.quarantine.decode(file, 'schema', name, () => decodeSchema(file, local)) : undefined;
  const read: SchemaReadBack = { local: own, stored: [] };
  const ownKey = schemaKey(name, generation, nodeId);
  const owned: Schema[] = [];
  for (const { key } of await ctx.store.list(schemaPrefix(name, generation))) {
    const body = await ctx.store.getBytes(key);
    if (!body) continue;
    const schema = ctx.quarantine.decode(key, 'schema', name, () => decodeSchema(key, body));
    if (!schema) {
      if (key === ownKey) read.ownDamaged = true; // rewritten whole at the next flush
      continue;
    }
    if (key === ownKey) owned.push(schema);
    read.stored.push(schema);
  }
  read.ownStored = owned.length ? unionSchemas(owned) : undefined;
  ds.schemaState.refreshed(read);
}

/**
 * Makes `next` (the schema a batch needs) durable before any row that depends on it is acknowledged,
 * and only then the dataset's schema in memory: memory follows the disk, so a failed write changes
 * nothing and the next append simply tries again. Changes are serialised, and each write holds the
 * union of everything before it, so concurrent batches with different new columns lose none.
 */
export async function evolveSchema(ctx: StorageContext, ds: Dataset, next: Schema): Promise<void> {
  await ds.schemaState.evolve(next, async (own) => {
    const file = localSchemaFile(ctx.settings.dataDir, ds.meta.name, ds.meta.generation);
    try {
      await writeFileDurable(file, encodeSchema(own));
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      log.error('schema write failed; the batch is not acknowledged', { dataset: ds.meta.name, file, error: e });
      const cause = e.code === 'ENOSPC' || e.code === 'EDQUOT' ? 'the local disk is full' : `the local disk failed (${e.code ?? e.message})`;
      throw unavailable(`dataset schema: ${cause}; nothing of this request was stored, retry later`, 10);
    }
  });
}
