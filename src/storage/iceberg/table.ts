import type { ObjectStore } from '../objects/objectStore.ts';
import { icebergMetadataKey, icebergMetadataPrefix, parseIcebergMetadataVersion } from '../layout.ts';
import { decodeAvroFile, type ManifestEntry, type ManifestFile } from './avro.ts';
import { decodeTableMetadata, type TableMetadata } from './metadata.ts';

/**
 * A dataset's Iceberg table as the store holds it: the newest metadata version (the highest
 * `v{N}.metadata.json`: versions are only ever created by a conditional write of the next number, so
 * the highest is the current one) and the live data files of its current snapshot, by manifest.
 * Manifests and manifest lists never change once written, so their contents are cached by key.
 */
export interface TableState {
  version: number;
  metadata: TableMetadata;
  /** The current snapshot's manifests (empty before the first snapshot). */
  manifests: ManifestFile[];
  /** Live entries of each manifest of the current snapshot, by manifest key. */
  entries: Map<string, ManifestEntry[]>;
}

export class TableReader {
  private readonly lists = new Map<string, ManifestFile[]>();
  private readonly manifests = new Map<string, ManifestEntry[]>();

  constructor(
    private readonly store: ObjectStore,
    /** Object key of a location URI this service wrote (and only those). */
    private readonly keyOf: (uri: string) => string,
  ) {}

  /**
   * The highest metadata version of a table generation, or 0 when it has none yet. With `known` (a
   * version this worker has seen), one GET of the next version answers it when no worker committed
   * since — the usual case: versions are only ever created as the next number, so without `known + 1`
   * `known` is the newest — where a LIST of the metadata folder would (on local disk) stat every Avro
   * file in it. When `known + 1` exists, the LIST finds how far the others went.
   */
  async latestVersion(name: string, generation: string, known?: number): Promise<number> {
    if (known && !(await this.store.getBytes(icebergMetadataKey(name, generation, known + 1)))) return known;
    let max = 0;
    for (const { key } of await this.store.list(icebergMetadataPrefix(name, generation))) {
      const v = parseIcebergMetadataVersion(key);
      if (v !== undefined && v > max) max = v;
    }
    return max;
  }

  async metadata(name: string, generation: string, version: number): Promise<TableMetadata | undefined> {
    const body = await this.store.getBytes(icebergMetadataKey(name, generation, version));
    return body ? decodeTableMetadata(body.toString('utf8')) : undefined;
  }

  /** The table state at `version` (`previous`, when it is that version already, is reused). */
  async load(name: string, generation: string, version: number, previous?: TableState): Promise<TableState | undefined> {
    if (previous?.version === version) return previous;
    const metadata = await this.metadata(name, generation, version);
    return metadata && this.fromMetadata(version, metadata);
  }

  /** The table state of metadata in hand (what this worker just committed: nothing is read back). */
  async fromMetadata(version: number, metadata: TableMetadata): Promise<TableState> {
    const current = metadata.snapshots.find((s) => s['snapshot-id'] === metadata['current-snapshot-id']);
    const manifests = current ? await this.manifestList(current['manifest-list']) : [];
    const entries = new Map<string, ManifestEntry[]>();
    for (const m of manifests) entries.set(m.manifest_path, await this.manifestEntries(m.manifest_path));
    return { version, metadata, manifests, entries };
  }

  async manifestList(uri: string): Promise<ManifestFile[]> {
    let list = this.lists.get(uri);
    if (!list) {
      list = await this.readAvro<ManifestFile>(uri);
      this.lists.set(uri, list);
    }
    return list;
  }

  /** A manifest's entries that are live (added or existing). */
  async manifestEntries(uri: string): Promise<ManifestEntry[]> {
    let entries = this.manifests.get(uri);
    if (!entries) {
      entries = (await this.readAvro<ManifestEntry>(uri)).filter((e) => e.status !== 2);
      this.manifests.set(uri, entries);
    }
    return entries;
  }

  /** Remembers what this worker just wrote, so it is not read back. */
  remember(uri: string, value: { list?: ManifestFile[]; entries?: ManifestEntry[] }): void {
    if (value.list) this.lists.set(uri, value.list);
    if (value.entries) this.manifests.set(uri, value.entries.filter((e) => e.status !== 2));
  }

  forget(uris: string[]): void {
    for (const u of uris) {
      this.lists.delete(u);
      this.manifests.delete(u);
    }
  }

  private async readAvro<T>(uri: string): Promise<T[]> {
    const key = this.keyOf(uri);
    const body = await this.store.getBytes(key);
    if (!body) throw new Error(`iceberg: ${key} is missing`);
    return (await decodeAvroFile<T>(body)).records;
  }
}
