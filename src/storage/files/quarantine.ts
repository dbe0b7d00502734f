import { log } from '../../log.ts';
import { isCorruptObject } from '../codec.ts';

export type DamagedKind = 'metadata' | 'manifest' | 'schema' | 'metric-metadata' | 'parquet' | 'wal';

export interface QuarantinedObject {
  /** Object key in the store, or the local file for WAL segments. */
  key: string;
  kind: DamagedKind;
  dataset?: string;
  reason: string;
  /** When this worker first found it. */
  since: string;
  /** Where the damaged part was moved to (local WAL data), when it was moved. */
  setAsideTo?: string;
}

/**
 * Damaged objects this worker has set aside. A damaged object never stops the service or another
 * dataset: it is logged once with its key, left out of what is served, and listed here for readiness
 * details and the dataset's stats. Store objects stay where they are (other workers read the same
 * bucket, and an operator may restore them); each is checked again when next read, and leaves this
 * list when it reads well (restored) or is gone with its dataset.
 */
export class Quarantine {
  private items = new Map<string, QuarantinedObject>();

  add(item: Omit<QuarantinedObject, 'since'>): void {
    const have = this.items.get(item.key);
    if (have && have.reason === item.reason) return;
    this.items.set(item.key, { ...item, since: have?.since ?? new Date().toISOString() });
    log.error('damaged object set aside', { ...item });
  }

  /** The object read well again (restored by an operator). */
  clear(key: string): void {
    if (this.items.delete(key)) log.info('damaged object readable again', { key });
  }

  /**
   * Decodes one stored object with `decode` (a codec function, which names the key in its errors): a
   * damaged object is set aside here and comes back undefined, a sound one leaves this list (restored).
   * Any other failure propagates.
   */
  decode<T>(key: string, kind: DamagedKind, dataset: string, decode: () => T): T | undefined {
    try {
      const value = decode();
      this.clear(key);
      return value;
    } catch (err) {
      if (!isCorruptObject(err)) throw err;
      this.add({ key, kind, dataset, reason: err.reason });
      return undefined;
    }
  }

  has(key: string): boolean {
    return this.items.has(key);
  }

  forgetDataset(name: string): void {
    for (const [key, q] of this.items) if (q.dataset === name) this.items.delete(key);
  }

  list(dataset?: string): QuarantinedObject[] {
    const all = [...this.items.values()];
    return dataset === undefined ? all : all.filter((q) => q.dataset === dataset);
  }
}
