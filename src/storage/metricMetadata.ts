import { decodeMetricMetadata, encodeMetricMetadata, type DatasetMeta, type StoredMetricFamily } from './codec.ts';
import type { StorageContext } from './dataset/dataset.ts';
import { metricMetadataKey, metricMetadataPrefix } from './layout.ts';

/**
 * What a metric family is (type, help, unit), remembered per dataset from Prometheus remote-write 1.0
 * metadata. Prometheus sends that metadata in requests of its own, without samples (every
 * metadata_config.send_interval), so it cannot be put on the rows it describes; it is kept beside them
 * and read by whoever draws or queries the metrics (docs/console.md "Metric metadata").
 *
 * Several workers may receive it: each writes only its own object (`{dataset}/.metric-metadata/
 * {generation}/{node}.json`, like the schema objects), so no write can lose another's, and readers
 * merge every worker's object. Within a worker one write at a time holds everything it has received.
 * Objects belong to the dataset's generation: a deleted dataset's go with it, and a dataset created
 * again under the same name starts with none.
 */

export interface MetricFamilyMeta {
  /** Prometheus' name for it: counter, gauge, histogram, gaugehistogram, summary, info, stateset, unknown. */
  type: string;
  help: string;
  unit: string;
}

export interface IncomingFamily extends MetricFamilyMeta {
  family: string;
}

/**
 * Bounds that keep one dataset's metadata small whatever a sender claims: a real Prometheus has a few
 * thousand families with help texts of a line or two. Families beyond the limit are not remembered
 * (their samples are stored as always); longer texts are cut.
 */
export interface MetricMetadataLimits {
  families: number;
  helpChars: number;
  unitChars: number;
  nameChars: number;
}

export const METRIC_METADATA_LIMITS: MetricMetadataLimits = { families: 10_000, helpChars: 1024, unitChars: 64, nameChars: 512 };

const TYPES = new Set(['counter', 'gauge', 'histogram', 'gaugehistogram', 'summary', 'info', 'stateset', 'unknown']);

/** One family as it will be kept, or undefined when it cannot be (no name, or a name past the bound). */
export function boundFamily(f: IncomingFamily, limits: MetricMetadataLimits): IncomingFamily | undefined {
  if (!f.family || f.family.length > limits.nameChars) return undefined;
  return {
    family: f.family,
    type: TYPES.has(f.type) ? f.type : 'unknown',
    help: f.help.slice(0, limits.helpChars),
    unit: f.unit.slice(0, limits.unitChars),
  };
}

const same = (a: MetricFamilyMeta, b: MetricFamilyMeta) => a.type === b.type && a.help === b.help && a.unit === b.unit;

/**
 * `incoming` applied to one worker's families: a new family is added while there is room, a changed one
 * replaced (stamped `now`), an unchanged one left as it is (so Prometheus' repeats cost no write).
 * Returns the new table when anything changed, and how many families found no room.
 */
export function applyFamilies(
  own: ReadonlyMap<string, StoredMetricFamily>,
  incoming: IncomingFamily[],
  now: number,
  limits: MetricMetadataLimits,
): { next?: Map<string, StoredMetricFamily>; dropped: number } {
  let next: Map<string, StoredMetricFamily> | undefined;
  let dropped = 0;
  for (const raw of incoming) {
    const f = boundFamily(raw, limits);
    if (!f) {
      dropped++;
      continue;
    }
    const table = next ?? own;
    const have = table.get(f.family);
    if (have && same(have, f)) continue;
    if (!have && table.size >= limits.families) {
      dropped++;
      continue;
    }
    next ??= new Map(own);
    next.set(f.family, { type: f.type, help: f.help, unit: f.unit, at: now });
  }
  return { next, dropped };
}

/**
 * Every worker's families merged: for a family several workers know, the one received last wins (ties
 * go to the first table, callers pass them in key order). At most `limits.families` families, by name.
 */
export function mergeFamilies(tables: ReadonlyMap<string, StoredMetricFamily>[], limits: MetricMetadataLimits): Map<string, MetricFamilyMeta> {
  const best = new Map<string, StoredMetricFamily>();
  for (const t of tables) {
    for (const [name, f] of t) {
      const have = best.get(name);
      if (!have || f.at > have.at) best.set(name, f);
    }
  }
  const names = [...best.keys()].sort().slice(0, limits.families);
  return new Map(names.map((n) => {
    const { type, help, unit } = best.get(n)!;
    return [n, { type, help, unit }];
  }));
}

/** What one family costs in memory, roughly: its strings (UTF-16) and a map entry's overhead. */
export function familyBytes(name: string, f: MetricFamilyMeta): number {
  return 2 * (name.length + f.type.length + f.help.length + f.unit.length) + 96;
}

const tableBytes = (t: ReadonlyMap<string, StoredMetricFamily>) => {
  let n = 0;
  for (const [name, f] of t) n += familyBytes(name, f);
  return n;
};

/** Default of the memory all datasets' remembered tables may hold together (P_METRIC_METADATA_MEMORY). */
export const DEFAULT_METRIC_METADATA_BYTES = 16 * 1024 * 1024;

interface Own {
  name: string;
  generation: string;
  families: Map<string, StoredMetricFamily>;
  /** familyBytes of `families`. */
  bytes: number;
  /** Logical clock of the last use, for eviction. */
  used: number;
  /** Requests holding or waiting for this table: never evicted meanwhile. */
  users: number;
  /** This worker's object read back from the store; every write waits for it (and fails with it). */
  loaded: Promise<void>;
  /** Serialises this worker's writes, so each holds everything received before it. */
  lock: Promise<void>;
}

/**
 * Each worker keeps its own table of every dataset it received metadata for, so a request writes its
 * object without reading it first. The tables together are bounded (`maxBytes`, counted in the memory
 * budget): past it the least recently used tables no request holds are dropped from memory, and read
 * back from the store by their next request. Unbounded, 117 metadata-only requests to new datasets
 * (10,000 families of 1 KiB help each) ran the heap out of memory (issue 30 A9).
 */
export class MetricMetadataStore {
  private own = new Map<string, Own>();
  private clock = 0;
  private total = 0;

  constructor(
    private readonly ctx: StorageContext,
    private readonly limits: MetricMetadataLimits = METRIC_METADATA_LIMITS,
    private readonly maxBytes: number = ctx.settings.metricMetadataBytes ?? DEFAULT_METRIC_METADATA_BYTES,
  ) {}

  /** Bytes the tables in memory hold (familyBytes), and how many datasets they are for. */
  get memory(): { bytes: number; datasets: number } {
    return { bytes: this.total, datasets: this.own.size };
  }

  private setFamilies(own: Own, families: Map<string, StoredMetricFamily>): void {
    const bytes = tableBytes(families);
    // Counted only while in memory: a table forgotten meanwhile (evicted, its load failed) is not.
    if (this.own.get(own.name) === own) this.total += bytes - own.bytes;
    own.families = families;
    own.bytes = bytes;
  }

  private forget(name: string, own: Own): void {
    if (this.own.get(name) !== own) return;
    this.own.delete(name);
    this.total -= own.bytes;
  }

  /** Drops the least recently used tables no request holds until the rest fit in maxBytes. */
  private evict(): void {
    if (this.total <= this.maxBytes) return;
    const idle = [...this.own].filter(([, o]) => o.users === 0).sort((a, b) => a[1].used - b[1].used);
    for (const [name, o] of idle) {
      if (this.total <= this.maxBytes) break;
      this.forget(name, o);
    }
  }

  /**
   * Remembers families for a dataset generation; resolves once whatever changed is in the store (the
   * caller acknowledges only then). Returns how many families found no room (or had no usable name).
   */
  async remember(meta: DatasetMeta, incoming: IncomingFamily[]): Promise<{ dropped: number }> {
    if (!incoming.length) return { dropped: 0 };
    const { name, generation } = meta;
    let own = this.own.get(name);
    if (!own || own.generation !== generation) {
      if (own) this.forget(name, own);
      const fresh: Own = { name, generation, families: new Map(), bytes: 0, used: 0, users: 0, loaded: Promise.resolve(), lock: Promise.resolve() };
      this.own.set(name, (own = fresh));
      fresh.loaded = this.load(fresh, name);
      fresh.loaded.catch(() => undefined); // awaited below; this only keeps a failure from counting as unhandled
    }
    const state = own;
    state.users++;
    state.used = ++this.clock;
    const previous = state.lock;
    let unlock!: () => void;
    state.lock = new Promise<void>((r) => (unlock = r));
    try {
      await previous;
      await state.loaded;
      const { next, dropped } = applyFamilies(state.families, incoming, Date.now(), this.limits);
      // Memory follows the store: a failed write changes nothing here, and the caller answers an error.
      if (next) {
        await this.ctx.store.putBytes(metricMetadataKey(name, generation, this.ctx.settings.nodeId), encodeMetricMetadata(next));
        this.setFamilies(state, next);
      }
      return { dropped };
    } finally {
      unlock();
      state.users--;
      this.evict();
    }
  }

  /** This worker's own object as stored (a restart keeps what it had); a damaged one is set aside and rewritten whole. */
  private async load(own: Own, name: string): Promise<void> {
    const key = metricMetadataKey(name, own.generation, this.ctx.settings.nodeId);
    try {
      const body = await this.ctx.store.getBytes(key);
      const families = body && this.ctx.quarantine.decode(key, 'metric-metadata', name, () => decodeMetricMetadata(key, body));
      if (families) this.setFamilies(own, families);
    } catch (err) {
      // Not loaded: writing now would drop what the object holds. Requests waiting fail; the next one reads again.
      this.forget(name, own);
      throw err;
    }
  }

  /** Every worker's families of a dataset generation, merged (read from the store, so every worker sees the same). */
  async read(meta: DatasetMeta): Promise<Map<string, MetricFamilyMeta>> {
    const tables: Map<string, StoredMetricFamily>[] = [];
    for (const { key } of await this.ctx.store.list(metricMetadataPrefix(meta.name, meta.generation))) {
      const body = await this.ctx.store.getBytes(key);
      if (!body) continue;
      const t = this.ctx.quarantine.decode(key, 'metric-metadata', meta.name, () => decodeMetricMetadata(key, body));
      if (t) tables.push(t);
    }
    return mergeFamilies(tables, this.limits);
  }
}
