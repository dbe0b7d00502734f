import { log } from '../log.ts';
import type { Catalog } from './catalog.ts';
import { decodeManifest, encodeManifest, type DatasetMeta, type Manifest } from './codec.ts';
import type { Dataset, StorageContext } from './dataset/dataset.ts';
import { manifestKey, manifestPrefix, parseKey } from './layout.ts';

/**
 * This worker's side of the catalog manifests: reading every worker's manifests into a dataset's
 * catalog (a damaged one is set aside and the rest still read), numbering and writing its own.
 */
export class Manifests {
  /** Highest manifest number this worker has used or seen of its own; also used in file names. */
  private seq = 0;

  constructor(
    private readonly ctx: StorageContext,
    /** Told of files this worker's manifests removed, to delete them after the grace period. */
    private readonly onRemoved: (keys: string[], at: number) => void,
  ) {}

  /** The highest manifest number of this worker seen so far (segment numbers start above it). */
  get highest(): number {
    return this.seq;
  }

  /** Reads the manifests not yet applied to a dataset's catalog. */
  async read(meta: DatasetMeta, catalog: Catalog): Promise<void> {
    const { name, generation } = meta;
    for (const { key } of await this.ctx.store.list(manifestPrefix(name, generation))) {
      if (catalog.hasManifest(key)) continue;
      // The number is in the key: even an unreadable own manifest keeps its number from being reused.
      const parsed = parseKey(key);
      if (parsed?.nodeId === this.ctx.settings.nodeId && parsed.seq !== undefined) this.seq = Math.max(this.seq, parsed.seq);
      const body = await this.ctx.store.getBytes(key);
      if (!body) continue;
      // A damaged one is not applied, so it is read again at the next refresh: a restored object is picked up.
      const manifest = this.ctx.quarantine.decode(key, 'manifest', name, () => decodeManifest(key, body));
      if (manifest) this.apply(catalog, key, manifest);
    }
  }

  private apply(catalog: Catalog, key: string, m: Manifest): void {
    if (!catalog.apply(key, m)) return;
    const own = m.nodeId === this.ctx.settings.nodeId;
    if (own) this.seq = Math.max(this.seq, m.seq);
    if (own && m.remove.length) this.onRemoved(m.remove, Date.parse(m.createdAt) + this.ctx.settings.deleteGraceMs);
  }

  /**
   * Reserves a manifest number (also used in file names), unique for this worker: at least `atLeast`,
   * above every number used so far. Taken before any await, so a flush and a compaction running at
   * the same time never share one (they would overwrite each other's manifest).
   */
  reserve(atLeast = 0): number {
    this.seq = Math.max(this.seq + 1, atLeast);
    return this.seq;
  }

  /**
   * Writes a manifest, then applies it to the local catalog and runs `alsoNow` in the same tick, so
   * no query can see the catalog change without what goes with it (the WAL segments it replaces).
   */
  async commit(
    ds: Dataset,
    seq: number,
    m: Omit<Manifest, 'version' | 'generation' | 'nodeId' | 'seq' | 'createdAt'>,
    alsoNow?: (manifest: Manifest) => void,
  ): Promise<Manifest> {
    const { nodeId } = this.ctx.settings;
    const manifest: Manifest = { version: 1, generation: ds.meta.generation, nodeId, seq, createdAt: new Date().toISOString(), ...m };
    const key = manifestKey(ds.meta.name, ds.meta.generation, nodeId, seq);
    await this.ctx.store.putBytes(key, encodeManifest(manifest));
    this.apply(ds.catalog, key, manifest);
    alsoNow?.(manifest);
    log.debug('manifest written', { key });
    return manifest;
  }
}
