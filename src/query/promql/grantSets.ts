/**
 * The file-set half of a PromQL grant (issue 37: a dashboard's panels ask for the same files one after
 * the other), sent to a query worker once and named by an id after that.
 *
 * A grant is two parts: what depends only on which files and WAL segments the snapshot holds (the
 * links, the sample cache's groups, the label columns: 126 links and groups for an hour of minute
 * files) and what depends on the asked range too (the view over the files left to DuckDB, minMs/maxMs).
 * The first part is a pure function of its inputs — a data file's key never names other bytes (a
 * compaction writes new keys; a damaged file set aside leaves the snapshot), a sealed WAL segment's
 * path never names other rows while it is held, and the schema and dataset name are in the key — so
 * two snapshots with the same inputs give the same part. The service numbers each part it builds; a
 * worker keeps the last few it was sent and says which with its `need`; a part the worker holds goes
 * by its id alone. Exact by construction: any difference in the inputs (a file compacted away, another
 * worker's file arriving through sync, a file set aside, an index found damaged, a new segment, a
 * widened column) is a different key, so a new part with its full content.
 */

/** What a snapshot's file-set part depends on. */
export interface FileSetInputs {
  dataset: string;
  labelsOnly: boolean;
  /** The dataset's schema as JSON (a type change or a new column changes the templates and labels). */
  schemaJson: string;
  timeColumn: string;
  /** Each file: its local path (the key's copy), read through its series index or not. */
  files: readonly { key: string; path: string; index?: boolean }[];
  /** Sealed WAL segments, by path. */
  segments: readonly { path: string }[];
  /** The worker's sample-cache budget (which files are cached depends on it). */
  cacheBytes: number;
}

/** The text two snapshots share exactly when their file-set parts are equal. */
export function fileSetKey(x: FileSetInputs): string {
  const parts = [x.dataset, x.labelsOnly ? 'L' : 'S', x.timeColumn, String(x.cacheBytes), x.schemaJson];
  for (const f of x.files) parts.push(`${f.index ? 'i' : 'f'}${f.key}\u0001${f.path}`);
  for (const s of x.segments) parts.push(`w${s.path}`);
  return parts.join('\u0000');
}

/** A file-set part as the service keeps it: its id and content. */
export interface FileSet<T> {
  id: number;
  content: T;
}

/**
 * The service's recent file-set parts by key, each with an id no other part of this process has,
 * bounded (least recently used go first). `ref` is what a grant sends: the id alone when the worker
 * says it holds that part, else the id with the content.
 */
export class GrantSets<T> {
  private readonly byKey = new Map<string, FileSet<T>>();
  private nextId = 1;

  constructor(private readonly max = 32) {}

  /** The part for these inputs: the one built before for the same key, or `build()`'s under a new id. */
  get(key: string, build: () => T): FileSet<T> {
    const known = this.byKey.get(key);
    return remember(this.byKey, key, known ?? { id: this.nextId++, content: build() }, this.max);
  }

  get size(): number {
    return this.byKey.size;
  }
}

/**
 * Puts `value` under `key` as the most recently used (a Map iterates in insertion order), then drops the
 * least recently used past `max`; answers `value`. Both sides' bounded maps below.
 */
function remember<K, V>(map: Map<K, V>, key: K, value: V, max: number): V {
  map.delete(key);
  map.set(key, value);
  if (map.size > max) map.delete(map.keys().next().value!);
  return value;
}

/** What a grant carries of a part: its content only when the worker does not hold it. */
export function setRef<T>(set: FileSet<T>, workerHas: readonly number[] | undefined): { setId: number; set?: T } {
  return workerHas?.includes(set.id) ? { setId: set.id } : { setId: set.id, set: set.content };
}

/**
 * A worker's side: the parts it was sent, the last `max` kept (a dashboard's panels alternate between a
 * few ranges: `[1m]`, `[5m]`, `[10m]`, an offset…). `resolve` takes a grant's part (content or id) and answers the content.
 */
export class HeldSets<T> {
  private readonly byId = new Map<number, T>();

  constructor(private readonly max = 8) {}

  /** The ids held, for the next `need`. */
  ids(): number[] {
    return [...this.byId.keys()];
  }

  /** The parts held, with their ids (least recently used first). */
  entries(): [number, T][] {
    return [...this.byId];
  }

  resolve(ref: { setId: number; set?: T }): T | undefined {
    const content = ref.set ?? this.byId.get(ref.setId);
    return content === undefined ? undefined : remember(this.byId, ref.setId, content, this.max);
  }
}
