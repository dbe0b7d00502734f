import { Readable } from 'node:stream';
import type Avro from 'avsc';

/**
 * Iceberg's Avro files (spec "Manifests" and "Manifest Lists", format version 2): their schemas with
 * Iceberg's `field-id` attributes, and encoding/decoding of Avro object container files through avsc.
 * The schema object is handed to avsc as JSON (not as a parsed Type), so the file header carries it
 * verbatim, field ids included: readers resolve manifest fields by id (test/unit/icebergAvro.test.ts).
 */

/** One data file of a manifest (only what this service writes: Parquet data files, no deletes). */
export interface DataFile {
  content: number;
  file_path: string;
  file_format: string;
  partition: Record<string, number | null>;
  record_count: number;
  file_size_in_bytes: number;
  lower_bounds: { key: number; value: Buffer }[] | null;
  upper_bounds: { key: number; value: Buffer }[] | null;
}

export interface ManifestEntry {
  /** 0 existing, 1 added, 2 deleted. */
  status: number;
  snapshot_id: number | null;
  sequence_number: number | null;
  file_sequence_number: number | null;
  data_file: DataFile;
}

export interface FieldSummary {
  contains_null: boolean;
  contains_nan: boolean | null;
  lower_bound: Buffer | null;
  upper_bound: Buffer | null;
}

export interface ManifestFile {
  manifest_path: string;
  manifest_length: number;
  partition_spec_id: number;
  content: number;
  sequence_number: number;
  min_sequence_number: number;
  added_snapshot_id: number;
  added_files_count: number;
  existing_files_count: number;
  deleted_files_count: number;
  added_rows_count: number;
  existing_rows_count: number;
  deleted_rows_count: number;
  partitions: FieldSummary[] | null;
  key_metadata: Buffer | null;
}

export const ENTRY_EXISTING = 0;
export const ENTRY_ADDED = 1;
export const ENTRY_DELETED = 2;

/** A partition field of the spec: Avro sees it as an optional int (hour transform). */
export interface PartitionField {
  name: string;
  fieldId: number;
}

const opt = (type: unknown) => ['null', type];

/** Iceberg's map<int, binary>: an Avro array of key/value records marked `logicalType: map`. */
function boundsMap(fieldId: number, keyId: number, valueId: number, recordName: string) {
  return {
    type: opt({
      type: 'array',
      logicalType: 'map',
      items: {
        type: 'record',
        name: recordName,
        fields: [
          { name: 'key', type: 'int', 'field-id': keyId },
          { name: 'value', type: 'bytes', 'field-id': valueId },
        ],
      },
    }),
    default: null,
    'field-id': fieldId,
  };
}

/** The manifest entry schema for a partition spec (the `partition` struct follows the spec). */
export function manifestEntrySchema(partition: PartitionField[]): object {
  return {
    type: 'record',
    name: 'manifest_entry',
    fields: [
      { name: 'status', type: 'int', 'field-id': 0 },
      { name: 'snapshot_id', type: opt('long'), default: null, 'field-id': 1 },
      { name: 'sequence_number', type: opt('long'), default: null, 'field-id': 3 },
      { name: 'file_sequence_number', type: opt('long'), default: null, 'field-id': 4 },
      {
        name: 'data_file',
        'field-id': 2,
        type: {
          type: 'record',
          name: 'r2',
          fields: [
            { name: 'content', type: 'int', 'field-id': 134 },
            { name: 'file_path', type: 'string', 'field-id': 100 },
            { name: 'file_format', type: 'string', 'field-id': 101 },
            {
              name: 'partition',
              'field-id': 102,
              type: { type: 'record', name: 'r102', fields: partition.map((p) => ({ name: p.name, type: opt('int'), default: null, 'field-id': p.fieldId })) },
            },
            { name: 'record_count', type: 'long', 'field-id': 103 },
            { name: 'file_size_in_bytes', type: 'long', 'field-id': 104 },
            { name: 'lower_bounds', ...boundsMap(125, 126, 127, 'k126_v127') },
            { name: 'upper_bounds', ...boundsMap(128, 129, 130, 'k129_v130') },
          ],
        },
      },
    ],
  };
}

export const MANIFEST_FILE_SCHEMA = {
  type: 'record',
  name: 'manifest_file',
  fields: [
    { name: 'manifest_path', type: 'string', 'field-id': 500 },
    { name: 'manifest_length', type: 'long', 'field-id': 501 },
    { name: 'partition_spec_id', type: 'int', 'field-id': 502 },
    { name: 'content', type: 'int', 'field-id': 517 },
    { name: 'sequence_number', type: 'long', 'field-id': 515 },
    { name: 'min_sequence_number', type: 'long', 'field-id': 516 },
    { name: 'added_snapshot_id', type: 'long', 'field-id': 503 },
    { name: 'added_files_count', type: 'int', 'field-id': 504 },
    { name: 'existing_files_count', type: 'int', 'field-id': 505 },
    { name: 'deleted_files_count', type: 'int', 'field-id': 506 },
    { name: 'added_rows_count', type: 'long', 'field-id': 512 },
    { name: 'existing_rows_count', type: 'long', 'field-id': 513 },
    { name: 'deleted_rows_count', type: 'long', 'field-id': 514 },
    {
      name: 'partitions',
      type: opt({
        type: 'array',
        items: {
          type: 'record',
          name: 'r508',
          fields: [
            { name: 'contains_null', type: 'boolean', 'field-id': 509 },
            { name: 'contains_nan', type: opt('boolean'), default: null, 'field-id': 518 },
            { name: 'lower_bound', type: opt('bytes'), default: null, 'field-id': 510 },
            { name: 'upper_bound', type: opt('bytes'), default: null, 'field-id': 511 },
          ],
        },
        'element-id': 508,
      }),
      default: null,
      'field-id': 507,
    },
    { name: 'key_metadata', type: opt('bytes'), default: null, 'field-id': 519 },
  ],
};

/**
 * Compiled avsc types by schema text: compiling one (avsc generates its reader and writer code) cost
 * more than encoding a manifest, and there are only a few schemas (one per partition field name).
 */
const TYPES = new Map<string, Avro.Type>();
const TYPES_KEPT = 64;

/**
 * avsc is loaded on the first manifest written or read, not at start (~4 MB of an idle process): a
 * service publishes Iceberg tables only after its first flush, and reads them only then.
 */
let loaded: Promise<typeof Avro> | undefined;
const avsc = (): Promise<typeof Avro> => (loaded ??= import('avsc').then((m) => m.default));

function compiled(avro: typeof Avro, schemaText: string, schema: object): Avro.Type {
  let type = TYPES.get(schemaText);
  if (!type) {
    if (TYPES.size >= TYPES_KEPT) TYPES.clear();
    type = avro.Type.forSchema(schema as Avro.Schema);
    TYPES.set(schemaText, type);
  }
  return type;
}

/** Writes records as one Avro object container file (no compression), with string metadata in the header. */
export async function encodeAvroFile(schema: object, records: object[], metadata: Record<string, string>): Promise<Buffer> {
  const avro = await avsc();
  const schemaText = JSON.stringify(schema);
  // The header's schema is the schema as given: avsc exports a compiled type's schema without the
  // fields' `field-id` attributes, and header metadata given here overwrites what it would write.
  const meta = Object.fromEntries([...Object.entries(metadata), ['avro.schema', schemaText]].map(([k, v]) => [k, Buffer.from(v)]));
  // avsc's BlockEncoder takes header metadata (lib/containers.js), which its type declarations omit.
  // 'always': a file of no records (a snapshot of an emptied table) is still a valid Avro file.
  const options = { metadata: meta, writeHeader: 'always' } as unknown as ConstructorParameters<typeof avro.streams.BlockEncoder>[1];
  const encoder = new avro.streams.BlockEncoder(compiled(avro, schemaText, schema), options);
  const chunks: Buffer[] = [];
  const done = new Promise<void>((resolve, reject) => {
    encoder.on('data', (chunk: Buffer) => chunks.push(chunk));
    encoder.on('end', resolve);
    encoder.on('error', reject);
  });
  for (const r of records) encoder.write(r);
  encoder.end();
  await done;
  return Buffer.concat(chunks);
}

/** Reads an Avro object container file: its records and its header's metadata (schema included). */
export async function decodeAvroFile<T>(bytes: Buffer): Promise<{ records: T[]; metadata: Record<string, string> }> {
  const avro = await avsc();
  // The header's schema compiled once per schema text (other workers' manifests share a few schemas).
  const decoder = new avro.streams.BlockDecoder({ parseHook: (schema) => compiled(avro, JSON.stringify(schema), schema as object) });
  const records: T[] = [];
  const metadata: Record<string, string> = {};
  const done = new Promise<void>((resolve, reject) => {
    decoder.on('metadata', (_type: unknown, _codec: string, header: { meta: Record<string, Buffer> }) => {
      for (const [k, v] of Object.entries(header.meta)) metadata[k] = v.toString();
    });
    decoder.on('data', (r: T) => records.push(r));
    decoder.on('end', resolve);
    decoder.on('error', reject);
  });
  Readable.from([bytes]).pipe(decoder);
  await done;
  return { records, metadata };
}
