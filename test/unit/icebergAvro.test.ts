import { describe, expect, it } from 'vitest';
import { MANIFEST_FILE_SCHEMA, decodeAvroFile, encodeAvroFile, manifestEntrySchema, type ManifestEntry, type ManifestFile } from '../../src/storage/iceberg/avro.ts';

/**
 * avsc must keep Iceberg's `field-id` attributes in the file header (readers resolve manifest fields by
 * id): every id the Iceberg spec assigns (the reference list below, from the spec's "Manifests" and
 * "Manifest Lists" tables) must come back from a written file, and the records with it.
 */

/** Field ids of the spec, by Avro field name (nested names as written in the spec). */
const SPEC_ENTRY_IDS: Record<string, number> = {
  status: 0, snapshot_id: 1, sequence_number: 3, file_sequence_number: 4, data_file: 2,
  content: 134, file_path: 100, file_format: 101, partition: 102, record_count: 103, file_size_in_bytes: 104,
  lower_bounds: 125, upper_bounds: 128, 'lower_bounds.key': 126, 'lower_bounds.value': 127, 'upper_bounds.key': 129, 'upper_bounds.value': 130,
  'partition.ts_hour': 1000,
};
const SPEC_LIST_IDS: Record<string, number> = {
  manifest_path: 500, manifest_length: 501, partition_spec_id: 502, content: 517, sequence_number: 515, min_sequence_number: 516,
  added_snapshot_id: 503, added_files_count: 504, existing_files_count: 505, deleted_files_count: 506, added_rows_count: 512,
  existing_rows_count: 513, deleted_rows_count: 514, partitions: 507, key_metadata: 519,
  'partitions.contains_null': 509, 'partitions.contains_nan': 518, 'partitions.lower_bound': 510, 'partitions.upper_bound': 511,
};

/** Every field's id in a parsed Avro schema, by dotted path (maps and lists by their field's name). */
function fieldIds(schema: unknown, prefix = '', out: Record<string, number> = {}): Record<string, number> {
  if (Array.isArray(schema)) {
    for (const s of schema) fieldIds(s, prefix, out);
    return out;
  }
  if (!schema || typeof schema !== 'object') return out;
  const s = schema as { type?: unknown; fields?: { name: string; type: unknown; 'field-id'?: number }[]; items?: unknown };
  if (s.fields) {
    for (const f of s.fields) {
      const path = prefix ? `${prefix}.${f.name}` : f.name;
      if (f['field-id'] !== undefined) out[path] = f['field-id'];
      // data_file's fields are listed at top level in the spec.
      fieldIds(f.type, f.name === 'data_file' ? '' : path, out);
    }
  }
  if (s.items) fieldIds(s.items, prefix, out);
  if (s.type && typeof s.type === 'object') fieldIds(s.type, prefix, out);
  return out;
}

const entry = (i: number): ManifestEntry => ({
  status: 1,
  snapshot_id: 4_503_599_627_370_497 + i,
  sequence_number: 7,
  file_sequence_number: 7,
  data_file: {
    content: 0,
    file_path: `s3://bucket/ds/date=2026-01-01/hour=00/f${i}.parquet`,
    file_format: 'PARQUET',
    partition: { ts_hour: 491_000 + i },
    record_count: 1000 * i,
    file_size_in_bytes: 12_345 + i,
    lower_bounds: [{ key: 4, value: Buffer.from([1, 2, 3, 4, 5, 6, 7, 8]) }],
    upper_bounds: [{ key: 4, value: Buffer.from([8, 7, 6, 5, 4, 3, 2, 1]) }],
  },
});

describe('Iceberg Avro files (avsc)', () => {
  it.each([
    ['manifest', manifestEntrySchema([{ name: 'ts_hour', fieldId: 1000 }]), SPEC_ENTRY_IDS],
    ['manifest list', MANIFEST_FILE_SCHEMA, SPEC_LIST_IDS],
  ])('a %s keeps every field id of the spec in its header', async (_name, schema, spec) => {
    const bytes = await encodeAvroFile(schema, [], { 'format-version': '2' });
    const { metadata } = await decodeAvroFile(bytes);
    const ids = fieldIds(JSON.parse(metadata['avro.schema']));
    expect(ids).toEqual(spec);
    expect(metadata['format-version']).toBe('2');
  });

  it('manifest entries round-trip, longs beyond 2^32 and bounds bytes included', async () => {
    const records = [entry(1), entry(2), entry(3)];
    const bytes = await encodeAvroFile(manifestEntrySchema([{ name: 'ts_hour', fieldId: 1000 }]), records, {});
    const back = await decodeAvroFile<ManifestEntry>(bytes);
    expect(JSON.parse(JSON.stringify(back.records))).toEqual(JSON.parse(JSON.stringify(records)));
  });

  it('manifest list records round-trip, with absent optionals', async () => {
    const record: ManifestFile = {
      manifest_path: 'file:///x/m0.avro', manifest_length: 999, partition_spec_id: 0, content: 0, sequence_number: 3, min_sequence_number: 1,
      added_snapshot_id: 77, added_files_count: 1, existing_files_count: 2, deleted_files_count: 0, added_rows_count: 10, existing_rows_count: 20,
      deleted_rows_count: 0, partitions: [{ contains_null: false, contains_nan: null, lower_bound: Buffer.from([1, 0, 0, 0]), upper_bound: null }], key_metadata: null,
    };
    const back = await decodeAvroFile<ManifestFile>(await encodeAvroFile(MANIFEST_FILE_SCHEMA, [record], {}));
    expect(JSON.parse(JSON.stringify(back.records))).toEqual([JSON.parse(JSON.stringify(record))]);
  });
});
