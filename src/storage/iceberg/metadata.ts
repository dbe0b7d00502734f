import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { ColumnType } from '../../model.ts';
import type { Schema } from '../codec.ts';
import { TIME_US_COLUMN } from '../files/parquetWriter.ts';

/**
 * Iceberg v2 table metadata (spec "Table Metadata"): the JSON this service writes and reads back (zod),
 * and the mapping of a dataset's schema to an Iceberg schema whose field ids never change.
 *
 * Types: VARCHAR → string, BIGINT → long, DOUBLE → double, BOOLEAN → boolean, TIMESTAMP → timestamp
 * (microseconds), lists → list<…>. TIMESTAMP_NS columns are left out of the v2 schema: registered as
 * `timestamp`, Java's iceberg-core and Spark read the nanosecond values as microseconds and answer time
 * filters with 0 rows, silently (docs/lake.md "Nanosecond time columns").
 */

const FieldZ = z.object({
  id: z.number().int(),
  name: z.string(),
  required: z.boolean(),
  type: z.union([z.string(), z.object({ type: z.literal('list'), 'element-id': z.number().int(), element: z.string(), 'element-required': z.boolean() })]),
});
export type IcebergField = z.infer<typeof FieldZ>;

const IcebergSchemaZ = z.object({ type: z.literal('struct'), 'schema-id': z.number().int(), fields: z.array(FieldZ) });
export type IcebergSchema = z.infer<typeof IcebergSchemaZ>;

const SnapshotZ = z.object({
  'snapshot-id': z.number(),
  'parent-snapshot-id': z.number().optional(),
  'sequence-number': z.number().int(),
  'timestamp-ms': z.number(),
  'manifest-list': z.string(),
  summary: z.record(z.string(), z.string()),
  'schema-id': z.number().int().optional(),
});
export type IcebergSnapshot = z.infer<typeof SnapshotZ>;

const PartitionSpecZ = z.object({
  'spec-id': z.number().int(),
  fields: z.array(z.object({ name: z.string(), transform: z.string(), 'source-id': z.number().int(), 'field-id': z.number().int() })),
});
export type PartitionSpec = z.infer<typeof PartitionSpecZ>;

export const TableMetadataZ = z
  .object({
    'format-version': z.literal(2),
    'table-uuid': z.string(),
    location: z.string(),
    'last-sequence-number': z.number().int(),
    'last-updated-ms': z.number(),
    'last-column-id': z.number().int(),
    schemas: z.array(IcebergSchemaZ),
    'current-schema-id': z.number().int(),
    'partition-specs': z.array(PartitionSpecZ),
    'default-spec-id': z.number().int(),
    'last-partition-id': z.number().int(),
    properties: z.record(z.string(), z.string()),
    'current-snapshot-id': z.number().nullable().optional(),
    snapshots: z.array(SnapshotZ),
    'snapshot-log': z.array(z.object({ 'snapshot-id': z.number(), 'timestamp-ms': z.number() })),
    'metadata-log': z.array(z.object({ 'metadata-file': z.string(), 'timestamp-ms': z.number() })),
    'sort-orders': z.array(z.object({ 'order-id': z.number().int(), fields: z.array(z.unknown()) })),
    'default-sort-order-id': z.number().int(),
    refs: z.record(z.string(), z.object({ 'snapshot-id': z.number(), type: z.string() })).optional(),
  })
  .passthrough();
export type TableMetadata = z.infer<typeof TableMetadataZ>;

const PRIMITIVE: Partial<Record<ColumnType, string>> = { VARCHAR: 'string', BIGINT: 'long', DOUBLE: 'double', BOOLEAN: 'boolean', TIMESTAMP: 'timestamp' };
const ELEMENT: Partial<Record<ColumnType, string>> = { 'VARCHAR[]': 'string', 'BIGINT[]': 'long', 'DOUBLE[]': 'double' };

/**
 * The columns the table shows and the one it is partitioned by: a nanosecond-timed dataset's files
 * carry the microsecond copy TIME_US_COLUMN, which is the table's time column.
 */
export function lakeColumns(columns: Schema, timeColumn: string): { columns: Schema; timeColumn: string } {
  if (columns[timeColumn] !== 'TIMESTAMP_NS') return { columns, timeColumn };
  return { columns: { ...columns, [TIME_US_COLUMN]: 'TIMESTAMP' }, timeColumn: TIME_US_COLUMN };
}

/** Whether a dataset column type has an Iceberg v2 type every reader gets right (not TIMESTAMP_NS). */
export const publishable = (type: ColumnType): boolean => type in PRIMITIVE || type in ELEMENT;

/** The Iceberg type of a column, new element ids taken from `nextId`. */
function icebergType(type: ColumnType, nextId: () => number, previous?: IcebergField): IcebergField['type'] {
  const p = PRIMITIVE[type];
  if (p) return p;
  const element = ELEMENT[type]!;
  const prevList = previous && typeof previous.type === 'object' && previous.type.element === element ? previous.type : undefined;
  return { type: 'list', 'element-id': prevList?.['element-id'] ?? nextId(), element, 'element-required': false };
}

/** A column in the files that the table does not show (TIMESTAMP_NS): named in the name mapping only. */
export interface HiddenColumn {
  name: string;
  id: number;
}

/**
 * The Iceberg schema of a dataset schema: columns that keep their Iceberg type keep their field id;
 * a new column, or one whose type changed (BIGINT widened to DOUBLE, a legal change for us but not an
 * Iceberg promotion), gets a new id. Columns without a v2 type are `hidden`: they keep an id in the
 * name mapping (readers such as pyiceberg require every column of a file to be mapped) but are not in
 * the schema, so no reader reads them.
 */
export function mapSchema(columns: Schema, previous: IcebergField[], previousHidden: HiddenColumn[], lastColumnId: number) {
  let last = lastColumnId;
  const nextId = () => ++last;
  const byName = new Map(previous.map((f) => [f.name, f]));
  const hiddenByName = new Map(previousHidden.map((h) => [h.name, h.id]));
  const fields: IcebergField[] = [];
  const hidden: HiddenColumn[] = [];
  for (const [name, type] of Object.entries(columns)) {
    if (!publishable(type)) {
      hidden.push({ name, id: hiddenByName.get(name) ?? nextId() });
      continue;
    }
    const prev = byName.get(name);
    const probe = icebergType(type, () => -1, prev);
    if (prev && JSON.stringify(prev.type) === JSON.stringify(probe)) {
      fields.push(prev);
      continue;
    }
    const id = nextId();
    fields.push({ id, name, required: false, type: icebergType(type, nextId) });
  }
  return { fields, hidden, lastColumnId: last };
}

/**
 * `schema.name-mapping.default`: our Parquet files carry no field ids, so readers find columns by name
 * (any name, dots and odd characters included: a mapping entry names the column exactly). List elements
 * are mapped under the names Parquet writers give them.
 */
export function nameMapping(fields: IcebergField[], hidden: HiddenColumn[]): string {
  const shown = fields.map((f) =>
    typeof f.type === 'object' ? { 'field-id': f.id, names: [f.name], fields: [{ 'field-id': f.type['element-id'], names: ['element', 'item'] }] } : { 'field-id': f.id, names: [f.name] },
  );
  return JSON.stringify([...shown, ...hidden.map((h) => ({ 'field-id': h.id, names: [h.name] }))]);
}

/** A table's name mapping (built once: zod compiles a schema's checks at its first parse). */
const NameMappingZ = z.array(z.object({ 'field-id': z.number().int(), names: z.array(z.string()) }));

/** The hidden columns of a table, read back from its name mapping (ids of mapped names not in the schema). */
export function hiddenColumns(m: TableMetadata): HiddenColumn[] {
  const inSchema = new Set(m.schemas.flatMap((s) => s.fields.map((f) => f.id)));
  const mapping = NameMappingZ.parse(JSON.parse(m.properties['schema.name-mapping.default'] ?? '[]'));
  return mapping.filter((e) => !inSchema.has(e['field-id'])).map((e) => ({ name: e.names[0], id: e['field-id'] }));
}

/** The partition spec: hour(time column) when the time column is in the schema, else unpartitioned. */
export function partitionSpec(fields: IcebergField[], timeColumn: string): PartitionSpec {
  const time = fields.find((f) => f.name === timeColumn && f.type === 'timestamp');
  return { 'spec-id': 0, fields: time ? [{ name: `${timeColumn.replace(/[^A-Za-z0-9_]/g, '_')}_hour`, transform: 'hour', 'source-id': time.id, 'field-id': 1000 }] : [] };
}

/** The metadata of a table before its first snapshot. */
export function emptyTable(location: string, columns: Schema, timeColumn: string, now: number): TableMetadata {
  const { fields, hidden, lastColumnId } = mapSchema(columns, [], [], 0);
  const spec = partitionSpec(fields, timeColumn);
  return {
    'format-version': 2,
    'table-uuid': randomUUID(),
    location,
    'last-sequence-number': 0,
    'last-updated-ms': now,
    'last-column-id': lastColumnId,
    schemas: [{ type: 'struct', 'schema-id': 0, fields }],
    'current-schema-id': 0,
    'partition-specs': [spec],
    'default-spec-id': 0,
    'last-partition-id': spec.fields.length ? 1000 : 999,
    properties: { 'schema.name-mapping.default': nameMapping(fields, hidden), 'write.parquet.compression-codec': 'zstd' },
    'current-snapshot-id': null,
    snapshots: [],
    'snapshot-log': [],
    'metadata-log': [],
    'sort-orders': [{ 'order-id': 0, fields: [] }],
    'default-sort-order-id': 0,
    refs: {},
  };
}

export const currentSchema = (m: TableMetadata): IcebergSchema => m.schemas.find((s) => s['schema-id'] === m['current-schema-id'])!;

/**
 * Brings a table's schema up to a dataset schema: a new schema (next id) when a column was added or
 * changed type, with the name mapping to match. The partition spec never changes (its source column is
 * the time column, which never changes type).
 */
export function evolveSchema(m: TableMetadata, columns: Schema): TableMetadata {
  const cur = currentSchema(m);
  const before = hiddenColumns(m);
  const { fields, hidden, lastColumnId } = mapSchema(columns, cur.fields, before, m['last-column-id']);
  const mapping = nameMapping(fields, hidden);
  if (mapping === m.properties['schema.name-mapping.default']) return m;
  const schemaChanged = JSON.stringify(fields) !== JSON.stringify(cur.fields);
  const id = schemaChanged ? Math.max(...m.schemas.map((s) => s['schema-id'])) + 1 : cur['schema-id'];
  return {
    ...m,
    'last-column-id': lastColumnId,
    schemas: schemaChanged ? [...m.schemas, { type: 'struct', 'schema-id': id, fields }] : m.schemas,
    'current-schema-id': id,
    properties: { ...m.properties, 'schema.name-mapping.default': mapping },
  };
}

export function decodeTableMetadata(text: string): TableMetadata {
  return TableMetadataZ.parse(JSON.parse(text));
}

/** Iceberg's single-value serialisation of a timestamp (µs since the epoch, 8 bytes little-endian). */
export function timestampBound(micros: bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigInt64LE(micros);
  return b;
}

/** A new snapshot id: a positive integer JavaScript numbers and Avro longs both hold exactly. */
export const newSnapshotId = (): number => Math.floor(Math.random() * 2 ** 52) + 1;
