import { log } from '../../log.ts';
import type { StorageContext } from '../dataset/dataset.ts';
import { datasetPrefix, parseKey } from '../layout.ts';

/**
 * Everything that removes objects from the store once nothing can read them any more:
 * - files this worker's manifests removed (compaction, retention), after the grace period;
 * - every object of a deleted dataset generation, by whichever worker learns of the delete (the
 *   deleting worker, and each other worker once its own late flush is over);
 * - a sweep for objects of generations no dataset has any more (left by a worker that crashed or
 *   was removed before it learned of a delete), deleted only when two sweeps in a row find them.
 */
export class GarbageCollector {
  private pending: { key: string; at: number }[] = [];
  /** Keys the last sweep found orphaned: deleted if the next sweep finds them orphaned again. */
  private suspects = new Set<string>();

  /** A file this says is still needed (an Iceberg snapshot lists it) waits for a later collection. */
  keep: (key: string) => boolean = () => false;

  constructor(private readonly ctx: StorageContext) {}

  /** Deletes `keys` once `at` has passed. */
  schedule(keys: string[], at: number): void {
    for (const key of keys) this.pending.push({ key, at });
  }

  async collect(now = Date.now()): Promise<void> {
    const due = this.pending.filter((d) => d.at <= now && !this.keep(d.key));
    if (!due.length) return;
    const doomed = new Set(due);
    this.pending = this.pending.filter((d) => !doomed.has(d));
    await this.ctx.store.delete(due.map((d) => d.key)).catch((err) => {
      this.pending.push(...due);
      log.warn('deleting removed files failed; will retry', { error: (err as Error).message });
    });
  }

  /** Deletes every object of one generation of a dataset (never another generation's). */
  async purgeGeneration(name: string, generation: string): Promise<number> {
    const keys = (await this.ctx.store.list(datasetPrefix(name))).map((o) => o.key).filter((k) => parseKey(k)?.generation === generation);
    if (keys.length) {
      await this.ctx.store.delete(keys);
      log.info('deleted objects of a removed dataset generation', { dataset: name, generation, objects: keys.length });
    }
    return keys.length;
  }

  /**
   * One sweep over the whole store: objects whose dataset generation is not the current one of any
   * dataset (`live`: name → generation, from a listing taken *before* the objects were listed) are
   * suspects; suspects of the previous sweep still orphaned now are deleted. A generation created
   * between two sweeps is in the second sweep's `live`, so nothing current is ever deleted.
   */
  async sweep(live: Map<string, string>, damagedMeta: Set<string>): Promise<number> {
    const orphans = new Set<string>();
    for (const { key } of await this.ctx.store.list('')) {
      const parsed = parseKey(key);
      if (!parsed || parsed.role === 'metadata' || parsed.generation === undefined) continue;
      // A dataset whose metadata cannot be read keeps everything until an operator has looked.
      if (damagedMeta.has(parsed.dataset)) continue;
      if (live.get(parsed.dataset) !== parsed.generation) orphans.add(key);
    }
    const doomed = [...orphans].filter((k) => this.suspects.has(k));
    this.suspects = orphans;
    if (doomed.length) {
      await this.ctx.store.delete(doomed);
      for (const k of doomed) this.suspects.delete(k);
      log.info('deleted orphaned objects of removed datasets', { objects: doomed.length });
    }
    return doomed.length;
  }
}
