import { z } from 'zod';
import { DomainError } from '../errors.ts';
import { COLUMN_TYPES, DATASET_KINDS, type ColumnType, type DatasetKind } from '../model.ts';

/**
 * The one codec for every object the service stores and reads back: dataset metadata, catalog
 * manifests and schemas (in the store, and the local schema copy). What is read back is validated with
 * zod, its format version checked, and every error names the object's key, so a damaged object can be
 * found, set aside and reported (see quarantine.ts) instead of failing somewhere far from it.
 */

/** An object that cannot be decoded: truncated, not JSON, wrong shape or an unknown format version. */
export class CorruptObjectError extends DomainError {
  constructor(
    readonly key: string,
    readonly reason: string,
  ) {
    super('storage', `stored object ${key} is damaged: ${reason}`);
    this.name = 'CorruptObjectError';
  }
}

export const isCorruptObject = (err: unknown): err is CorruptObjectError => err instanceof CorruptObjectError;

const ColumnTypeZ = z.enum(COLUMN_TYPES);

const DatasetKindZ = z.enum(DATASET_KINDS);
export type { DatasetKind };

const RetentionRuleZ = z.object({ description: z.string().optional(), action: z.literal('delete'), duration: z.string() });
/** Parseable's retention shape: `[{"description":…, "action":"delete", "duration":"30d"}]`. */
export type RetentionRule = z.infer<typeof RetentionRuleZ>;

/** Format versions this build reads; objects written before versions existed count as version 1. */
const version = z.literal(1, { error: (i) => `unsupported format version ${JSON.stringify(i.input)} (this build reads version 1)` });

const DatasetMetaZ = z.object({
  version: version.default(1),
  name: z.string().min(1),
  /** Changes every time a dataset of this name is created, so nothing of a deleted one ever returns. */
  generation: z.string().regex(/^[0-9a-z]+$/),
  kind: DatasetKindZ,
  timeColumn: z.string().min(1),
  /**
   * A JSON dataset created with a time field (X-P-Time-Partition-Limit): events older than this many
   * days are refused. Absent: Parseable's default (30 days) when the dataset has a time field.
   */
  timeLimitDays: z.number().int().positive().optional(),
  createdAt: z.string(),
  retention: z.array(RetentionRuleZ).optional(),
});
export type DatasetMeta = Omit<z.infer<typeof DatasetMetaZ>, 'version'>;

const FileEntryZ = z.object({
  key: z.string().min(1),
  rows: z.number().int().nonnegative(),
  bytes: z.number().int().nonnegative(),
  /** Time column range of the file in epoch milliseconds (floor of min and max). */
  minMs: z.number(),
  maxMs: z.number(),
  columns: z.array(z.string()),
  nodeId: z.string(),
  /**
   * Raw request bytes behind the file's rows: the flush's bytes split over its files by row count,
   * summed when files are merged. Absent in files written before it was recorded (counted as 0).
   */
  rawBytes: z.number().nonnegative().optional(),
  /**
   * The file's series index (seriesIndex.ts), stored beside it: its size and the columns it holds.
   * Absent: the file has none (not a metrics dataset's, written before indexes existed, or its index
   * could not be built), and series calls read the file itself.
   */
  seriesIndex: z.object({ bytes: z.number().int().nonnegative(), columns: z.array(z.string()) }).optional(),
  /** A traces file's Bloom filter of its trace ids (traceIndex.ts), base64. Absent: the file is always read. */
  traceBloom: z.string().optional(),
});
export type FileEntry = z.infer<typeof FileEntryZ>;

/** A file removed by retention (not replaced by a merge), with what it held, for the lifetime stats. */
const DeletedFileZ = z.object({ key: z.string(), rows: z.number().nonnegative(), bytes: z.number().nonnegative(), rawBytes: z.number().nonnegative() });
export type DeletedFile = z.infer<typeof DeletedFileZ>;

const ManifestZ = z.object({
  version,
  generation: z.string(),
  nodeId: z.string(),
  seq: z.number().int().nonnegative(),
  createdAt: z.string(),
  add: z.array(FileEntryZ),
  remove: z.array(z.string()),
  /** WAL segments of `nodeId` whose rows this manifest stored (so recovery never stores them twice). */
  walSegments: z.array(z.number().int()),
  /** Raw request bytes behind the added rows (ingestion stats). */
  ingestedBytes: z.number().nonnegative(),
  /** Files of `remove` that retention deleted; they count as deleted data in the stats. */
  deleted: z.array(DeletedFileZ).optional(),
});
export type Manifest = z.infer<typeof ManifestZ>;

/** Column name → type, in the order columns were first seen. */
export type Schema = Record<string, ColumnType>;
const SchemaColumnsZ = z.record(z.string(), ColumnTypeZ);
/** Written as `{"version":1,"columns":{…}}`; a bare column map is the format before versions. */
const SchemaObjectZ = z.union([z.object({ version, columns: SchemaColumnsZ }), SchemaColumnsZ.transform((columns) => ({ version: 1 as const, columns }))]);

function decode<T extends z.ZodType>(type: T, key: string, bytes: Buffer | string): z.output<T> {
  const text = typeof bytes === 'string' ? bytes : bytes.toString('utf8');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new CorruptObjectError(key, `not JSON (${text.length} bytes): ${(err as Error).message}`);
  }
  const parsed = type.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new CorruptObjectError(key, `${issue.path.join('.') || 'object'}: ${issue.message}`);
  }
  return parsed.data;
}

export function encodeMeta(meta: DatasetMeta): string {
  return JSON.stringify({ version: 1, ...meta });
}

export function decodeMeta(key: string, bytes: Buffer | string): DatasetMeta {
  const { version: _v, ...meta } = decode(DatasetMetaZ, key, bytes);
  return meta;
}

export function encodeManifest(m: Manifest): string {
  return JSON.stringify(m);
}

export function decodeManifest(key: string, bytes: Buffer | string): Manifest {
  return decode(ManifestZ, key, bytes);
}

export function encodeSchema(columns: Schema): string {
  return JSON.stringify({ version: 1, columns });
}

export function decodeSchema(key: string, bytes: Buffer | string): Schema {
  return decode(SchemaObjectZ, key, bytes).columns;
}

/** One metric family's remote-write metadata as a worker last received it (see metricMetadata.ts). */
const MetricFamilyZ = z.object({
  type: z.string(),
  help: z.string(),
  unit: z.string(),
  /** Epoch ms when this worker received this content (unchanged repeats keep the first time). */
  at: z.number(),
});
export type StoredMetricFamily = z.infer<typeof MetricFamilyZ>;
/** Families as a list, not an object keyed by name: any name (even `__proto__`) reads back as written. */
const MetricMetadataZ = z.object({ version, families: z.array(MetricFamilyZ.extend({ family: z.string() })) });

export function encodeMetricMetadata(families: Map<string, StoredMetricFamily>): string {
  return JSON.stringify({ version: 1, families: [...families].map(([family, f]) => ({ family, ...f })) });
}

export function decodeMetricMetadata(key: string, bytes: Buffer | string): Map<string, StoredMetricFamily> {
  return new Map(decode(MetricMetadataZ, key, bytes).families.map(({ family, ...f }) => [family, f]));
}
