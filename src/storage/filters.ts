import { z } from 'zod';
import { log } from '../log.ts';
import type { ObjectStore } from './objects/objectStore.ts';

/**
 * Saved queries ("filters", Parseable's name and JSON shape), one object each under `.filters/` in
 * the object store, so every worker on the bucket sees the same set. Reads go to the store each
 * time (there are few, and a cache would go stale across workers); what is read back is checked
 * with zod, and an object that does not parse is skipped with a warning rather than failing the list.
 *
 * Bounded, because any reader may save filters: each object is at most `maxBytes` (a larger one is
 * never read: skipped by its listed size, and moved to `.filters-set-aside/` at start-up), a listing
 * reads them one at a time, and `countOwnedBy` lets the caller bound how many one key saves.
 */

/** Parseable's `FilterQuery`. */
export const FilterQuery = z
  .object({
    filter_type: z.enum(['filter', 'sql', 'search']),
    filter_query: z.string().nullish(),
    filter_builder: z.record(z.string(), z.unknown()).nullish(),
  })
  .loose();

/** Parseable's `Filter` (version "v2"); other keys a console sends are kept as they are. */
export const Filter = z
  .object({
    version: z.string().nullish(),
    user_id: z.string().nullish(),
    stream_name: z.string(),
    filter_name: z.string(),
    filter_id: z.string().nullish(),
    query: FilterQuery,
    time_filter: z.object({ from: z.string(), to: z.string() }).loose().nullish(),
    tenant_id: z.string().nullish(),
  })
  .loose();
export type Filter = z.infer<typeof Filter>;

/** A stored filter: the store sets its id, owner and version. */
export type SavedFilter = Filter & { filter_id: string; user_id: string; version: string };

export const CURRENT_FILTER_VERSION = 'v2';
const PREFIX = '.filters/';
/** Where start-up moves filter objects over the size limit (kept for an operator, never read). */
const SET_ASIDE_PREFIX = '.filters-set-aside/';
const ID_RE = /^[A-Za-z0-9_-]{1,64}$/;
const keyOf = (id: string) => `${PREFIX}${id}.json`;

const Stored = Filter.extend({ filter_id: z.string().regex(ID_RE), user_id: z.string(), version: z.string() });

export interface FilterLimits {
  /** Largest stored filter object, in bytes. */
  maxBytes: number;
}

export class FilterStore {
  constructor(
    private readonly store: ObjectStore,
    readonly limits: FilterLimits,
  ) {}

  /**
   * The stored filters, read one at a time as the caller consumes them, so a listing holds one
   * filter's body at once however many there are. Objects over the size limit are skipped unread.
   */
  async *list(): AsyncGenerator<SavedFilter> {
    for (const { key, size } of await this.store.list(PREFIX)) {
      if (!key.endsWith('.json')) continue;
      if (size > this.limits.maxBytes) {
        log.warn('filters: skipping an object over the size limit', { key, size, limit: this.limits.maxBytes });
        continue;
      }
      const filter = await this.read(key);
      if (filter) yield filter;
    }
  }

  /** How many filters `owner` has saved. */
  async countOwnedBy(owner: string): Promise<number> {
    let n = 0;
    for await (const f of this.list()) if (f.user_id === owner) n++;
    return n;
  }

  /**
   * Moves filter objects over the size limit to `.filters-set-aside/` (one at a time), so no listing
   * ever loads them; returns their keys. Run at start-up: such objects were saved before the limit.
   */
  async setAsideOversized(): Promise<string[]> {
    const moved: string[] = [];
    for (const { key, size } of await this.store.list(PREFIX)) {
      if (size <= this.limits.maxBytes) continue;
      const body = await this.store.getBytes(key);
      if (body) await this.store.putBytes(`${SET_ASIDE_PREFIX}${key.slice(PREFIX.length)}`, body);
      await this.store.delete([key]);
      log.warn('filters: object over the size limit set aside', { key, size, limit: this.limits.maxBytes, to: `${SET_ASIDE_PREFIX}${key.slice(PREFIX.length)}` });
      moved.push(key);
    }
    return moved;
  }

  /** The filter with this id, or undefined (also for ids that could never name one). */
  async get(id: string): Promise<SavedFilter | undefined> {
    return ID_RE.test(id) ? this.read(keyOf(id)) : undefined;
  }

  /** Stores a filter; false (nothing stored) when its JSON is over the size limit. */
  async put(filter: SavedFilter): Promise<boolean> {
    if (!ID_RE.test(filter.filter_id)) throw new Error(`invalid filter id "${filter.filter_id}"`);
    const body = JSON.stringify(filter);
    if (Buffer.byteLength(body) > this.limits.maxBytes) return false;
    await this.store.putBytes(keyOf(filter.filter_id), body);
    return true;
  }

  async delete(id: string): Promise<void> {
    if (ID_RE.test(id)) await this.store.delete([keyOf(id)]);
  }

  private async read(key: string): Promise<SavedFilter | undefined> {
    const body = await this.store.getBytes(key);
    if (!body) return undefined;
    let json: unknown;
    try {
      json = JSON.parse(body.toString());
    } catch {
      json = undefined;
    }
    const parsed = Stored.safeParse(json);
    if (!parsed.success) {
      log.warn('filters: skipping an object that is not a saved filter', { key, error: parsed.error.issues[0]?.message });
      return undefined;
    }
    return parsed.data as SavedFilter;
  }
}
