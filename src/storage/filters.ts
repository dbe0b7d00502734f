import { z } from 'zod';
import { log } from '../log.ts';
import type { ObjectStore } from './objectStore.ts';

/**
 * Saved queries ("filters", Parseable's name and JSON shape), one object each under `.filters/` in
 * the object store, so every worker on the bucket sees the same set. Reads go to the store each
 * time (there are few, and a cache would go stale across workers); what is read back is checked
 * with zod, and an object that does not parse is skipped with a warning rather than failing the list.
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
const ID_RE = /^[A-Za-z0-9_-]{1,64}$/;
const keyOf = (id: string) => `${PREFIX}${id}.json`;

const Stored = Filter.extend({ filter_id: z.string().regex(ID_RE), user_id: z.string(), version: z.string() });

export class FilterStore {
  constructor(private readonly store: ObjectStore) {}

  async list(): Promise<SavedFilter[]> {
    const out: SavedFilter[] = [];
    for (const { key } of await this.store.list(PREFIX)) {
      if (!key.endsWith('.json')) continue;
      const filter = await this.read(key);
      if (filter) out.push(filter);
    }
    return out;
  }

  /** The filter with this id, or undefined (also for ids that could never name one). */
  async get(id: string): Promise<SavedFilter | undefined> {
    return ID_RE.test(id) ? this.read(keyOf(id)) : undefined;
  }

  async put(filter: SavedFilter): Promise<SavedFilter> {
    if (!ID_RE.test(filter.filter_id)) throw new Error(`invalid filter id "${filter.filter_id}"`);
    await this.store.putBytes(keyOf(filter.filter_id), JSON.stringify(filter));
    return filter;
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
