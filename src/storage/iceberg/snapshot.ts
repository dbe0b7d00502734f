import { randomUUID } from 'node:crypto';
import type { FileEntry } from '../catalog.ts';
import { ENTRY_ADDED, ENTRY_EXISTING, MANIFEST_FILE_SCHEMA, encodeAvroFile, manifestEntrySchema, type DataFile, type ManifestEntry, type ManifestFile } from './avro.ts';
import { currentSchema, newSnapshotId, timestampBound, type IcebergSnapshot, type TableMetadata } from './metadata.ts';
import type { TableState } from './table.ts';

/**
 * One new Iceberg snapshot from a table state and the files to add and remove: the manifests it writes
 * (one of the added files; each earlier manifest that lists a removed file rewritten without it; all of
 * them merged into one once there are more than MAX_MANIFESTS) and its manifest list. Nothing here
 * touches the store: the publisher uploads `uploads`, then commits `metadata` conditionally.
 */

const HOUR_MS = 3_600_000;
/** Past this many manifests a snapshot's live files are rewritten into one (bounded planning cost). */
export const MAX_MANIFESTS = 16;

export interface SnapshotPlan {
  add: FileEntry[];
  remove: Set<string>;
}

export interface BuiltSnapshot {
  metadata: TableMetadata;
  /** Avro files to upload before committing, by object key. */
  uploads: { key: string; body: Buffer; list?: ManifestFile[]; entries?: ManifestEntry[] }[];
  snapshot: IcebergSnapshot;
}

/** How the publisher names and locates objects. */
export interface SnapshotNaming {
  /** The URI readers see for an object key. */
  uri: (key: string) => string;
  /** The object key of a new Avro file of the table's metadata directory. */
  avroKey: (fileName: string) => string;
  /** Object key of a data file URI. */
  keyOf: (uri: string) => string;
}

/** The hour partition (hours since the epoch) of a file, or undefined when it spans two hours. */
export function fileHour(f: Pick<FileEntry, 'minMs' | 'maxMs'>): number | undefined {
  const h = Math.floor(f.minMs / HOUR_MS);
  return Math.floor(f.maxMs / HOUR_MS) === h ? h : undefined;
}

/** The Iceberg data file of a catalog file: its hour partition and the time column's bounds. */
export function dataFile(f: FileEntry, uri: string, timeFieldId: number | undefined, partitionName = 'hour'): DataFile {
  const partitioned = timeFieldId !== undefined;
  // The catalog keeps ms floors: the bounds widen to whole milliseconds, so they always contain the rows.
  const bounds = (ms: number, end: boolean) => [{ key: timeFieldId!, value: timestampBound(BigInt(ms) * 1000n + (end ? 999n : 0n)) }];
  return {
    content: 0,
    file_path: uri,
    file_format: 'PARQUET',
    partition: partitioned ? { [partitionName]: fileHour(f) ?? null } : {},
    record_count: f.rows,
    file_size_in_bytes: f.bytes,
    lower_bounds: partitioned ? bounds(f.minMs, false) : null,
    upper_bounds: partitioned ? bounds(f.maxMs, true) : null,
  };
}

function hourSummary(entries: ManifestEntry[], partitionName: string | undefined): ManifestFile['partitions'] {
  if (partitionName === undefined) return [];
  const hours = entries.map((e) => e.data_file.partition[partitionName]).filter((h): h is number => typeof h === 'number');
  const int = (n: number) => {
    const b = Buffer.alloc(4);
    b.writeInt32LE(n);
    return b;
  };
  const any = hours.length > 0;
  return [
    { contains_null: hours.length < entries.length, contains_nan: false, lower_bound: any ? int(Math.min(...hours)) : null, upper_bound: any ? int(Math.max(...hours)) : null },
  ];
}

interface ManifestDraft {
  entries: ManifestEntry[];
  snapshotId: number;
  sequence: number;
}

async function writeManifest(m: TableMetadata, draft: ManifestDraft, naming: SnapshotNaming, out: BuiltSnapshot['uploads']): Promise<ManifestFile> {
  const spec = m['partition-specs'][0];
  const partition = spec.fields.map((f) => ({ name: f.name, fieldId: f['field-id'] }));
  const schema = manifestEntrySchema(partition);
  const body = await encodeAvroFile(schema, draft.entries, {
    schema: JSON.stringify(currentSchema(m)),
    'schema-id': String(m['current-schema-id']),
    'partition-spec': JSON.stringify(spec.fields),
    'partition-spec-id': String(spec['spec-id']),
    'format-version': '2',
    content: 'data',
  });
  const key = naming.avroKey(`${randomUUID()}-m0.avro`);
  out.push({ key, body, entries: draft.entries });
  const added = draft.entries.filter((e) => e.status === ENTRY_ADDED);
  const existing = draft.entries.filter((e) => e.status === ENTRY_EXISTING);
  const rows = (es: ManifestEntry[]) => es.reduce((n, e) => n + e.data_file.record_count, 0);
  return {
    manifest_path: naming.uri(key),
    manifest_length: body.length,
    partition_spec_id: spec['spec-id'],
    content: 0,
    sequence_number: draft.sequence,
    min_sequence_number: Math.min(draft.sequence, ...draft.entries.map((e) => e.sequence_number ?? draft.sequence)),
    added_snapshot_id: draft.snapshotId,
    added_files_count: added.length,
    existing_files_count: existing.length,
    deleted_files_count: 0,
    added_rows_count: rows(added),
    existing_rows_count: rows(existing),
    deleted_rows_count: 0,
    partitions: hourSummary(draft.entries, spec.fields[0]?.name),
    key_metadata: null,
  };
}

/** Existing entries of earlier snapshots keep their snapshot and sequence numbers. */
const asExisting = (e: ManifestEntry): ManifestEntry => ({ ...e, status: ENTRY_EXISTING });

/** The manifests of the new snapshot: kept as they are, rewritten without removed files, or merged. */
async function nextManifests(state: TableState | undefined, m: TableMetadata, plan: SnapshotPlan, ids: { snapshotId: number; sequence: number }, naming: SnapshotNaming, uploads: BuiltSnapshot['uploads']) {
  const kept: ManifestFile[] = [];
  const rewrite: ManifestEntry[][] = [];
  for (const mf of state?.manifests ?? []) {
    const entries = state!.entries.get(mf.manifest_path) ?? [];
    const live = entries.filter((e) => !plan.remove.has(naming.keyOf(e.data_file.file_path)));
    if (live.length === entries.length) kept.push(mf);
    else if (live.length) rewrite.push(live.map(asExisting));
  }
  let manifests = kept;
  if (kept.length + rewrite.length + 1 > MAX_MANIFESTS) {
    for (const mf of kept) rewrite.push((state!.entries.get(mf.manifest_path) ?? []).map(asExisting));
    manifests = [];
    const merged = rewrite.flat();
    rewrite.length = 0;
    if (merged.length) rewrite.push(merged);
  }
  for (const entries of rewrite) manifests.push(await writeManifest(m, { entries, ...ids }, naming, uploads));
  return manifests;
}

/** Builds the next snapshot (operation append, delete or overwrite) over `m`, the table's metadata with its schema already evolved. */
export async function buildSnapshot(state: TableState | undefined, m: TableMetadata, plan: SnapshotPlan, naming: SnapshotNaming, now: number): Promise<BuiltSnapshot> {
  const snapshotId = newSnapshotId();
  const sequence = m['last-sequence-number'] + 1;
  const uploads: BuiltSnapshot['uploads'] = [];
  const spec = m['partition-specs'][0];
  const timeFieldId = spec.fields[0]?.['source-id'];
  const partitionName = spec.fields[0]?.name;
  const manifests = await nextManifests(state, m, plan, { snapshotId, sequence }, naming, uploads);
  if (plan.add.length) {
    const entries = plan.add.map((f) => ({ status: ENTRY_ADDED, snapshot_id: snapshotId, sequence_number: sequence, file_sequence_number: sequence, data_file: dataFile(f, naming.uri(f.key), timeFieldId, partitionName) }));
    manifests.push(await writeManifest(m, { entries, snapshotId, sequence }, naming, uploads));
  }
  const parent = m['current-snapshot-id'] ?? undefined;
  const listKey = naming.avroKey(`snap-${snapshotId}-1-${randomUUID()}.avro`);
  const listBody = await encodeAvroFile(MANIFEST_FILE_SCHEMA, manifests, {
    'snapshot-id': String(snapshotId),
    'parent-snapshot-id': parent === undefined ? 'null' : String(parent),
    'sequence-number': String(sequence),
    'format-version': '2',
  });
  uploads.push({ key: listKey, body: listBody, list: manifests });
  const snapshot: IcebergSnapshot = {
    'snapshot-id': snapshotId,
    ...(parent === undefined ? {} : { 'parent-snapshot-id': parent }),
    'sequence-number': sequence,
    'timestamp-ms': now,
    'manifest-list': naming.uri(listKey),
    summary: summary(state, manifests, plan, naming.keyOf),
    'schema-id': m['current-schema-id'],
  };
  return { metadata: m, uploads, snapshot };
}

function summary(state: TableState | undefined, manifests: ManifestFile[], plan: SnapshotPlan, keyOf: (uri: string) => string): Record<string, string> {
  const removedRows = [...(state?.entries.values() ?? [])].flat().filter((e) => plan.remove.has(keyOf(e.data_file.file_path)));
  const totalFiles = manifests.reduce((n, mf) => n + mf.added_files_count + mf.existing_files_count, 0);
  const totalRows = manifests.reduce((n, mf) => n + mf.added_rows_count + mf.existing_rows_count, 0);
  const operation = plan.add.length && plan.remove.size ? 'overwrite' : plan.add.length ? 'append' : 'delete';
  return {
    operation,
    'added-data-files': String(plan.add.length),
    'added-records': String(plan.add.reduce((n, f) => n + f.rows, 0)),
    'added-files-size': String(plan.add.reduce((n, f) => n + f.bytes, 0)),
    'deleted-data-files': String(removedRows.length),
    'deleted-records': String(removedRows.reduce((n, e) => n + e.data_file.record_count, 0)),
    'total-data-files': String(totalFiles),
    'total-records': String(totalRows),
    'total-delete-files': '0',
    'total-position-deletes': '0',
    'total-equality-deletes': '0',
  };
}
