/**
 * Parseable's JSON shapes for what storage reports as plain numbers and metadata: Arrow schemas,
 * stream stats, stream info. Field names and nesting follow Parseable's source (arrow-rs's serde
 * form of `Schema`, `QueriedStats`, `StreamInfo`); our own extra facts are extra keys, which
 * Parseable's clients ignore.
 */
import { DEFAULT_TIME_LIMIT_DAYS } from '../../ingest/json/eventTime.ts';
import { datasetTime } from '../../ingest/worker/pipeline.ts';
import type { ColumnType } from '../../model.ts';
import type { DatasetKind, DatasetMeta, DatasetStats, Totals } from '../../storage/engine.ts';
import type { Schema } from '../../storage/dataset/schema.ts';

/** arrow-rs's serde form of a `Field`. */
export interface ArrowField {
  name: string;
  data_type: ArrowType;
  nullable: boolean;
  dict_id: number;
  dict_is_ordered: boolean;
  metadata: Record<string, string>;
}
export type ArrowType = string | { Timestamp: [string, null] } | { List: ArrowField };

const field = (name: string, data_type: ArrowType): ArrowField => ({ name, data_type, nullable: true, dict_id: 0, dict_is_ordered: false, metadata: {} });

/**
 * Our column types as Arrow types. `TIMESTAMP` columns hold millisecond times (`p_timestamp`, as in
 * Parseable); `TIMESTAMP_NS` the OTel record times.
 */
export function arrowType(type: ColumnType): ArrowType {
  switch (type) {
    case 'VARCHAR':
      return 'Utf8';
    case 'BIGINT':
      return 'Int64';
    case 'DOUBLE':
      return 'Float64';
    case 'BOOLEAN':
      return 'Boolean';
    case 'TIMESTAMP':
      return { Timestamp: ['Millisecond', null] };
    case 'TIMESTAMP_NS':
      return { Timestamp: ['Nanosecond', null] };
    case 'VARCHAR[]':
      return { List: field('item', 'Utf8') };
    case 'BIGINT[]':
      return { List: field('item', 'Int64') };
    case 'DOUBLE[]':
      return { List: field('item', 'Float64') };
  }
}

/** `{"fields":[…],"metadata":{}}` plus our extras: the dataset's name, kind and time column. */
export function arrowSchema(meta: DatasetMeta, schema: Schema) {
  return {
    fields: Object.entries(schema).map(([name, type]) => field(name, arrowType(type))),
    metadata: {} as Record<string, string>,
    name: meta.name,
    kind: meta.kind,
    time_column: meta.timeColumn,
  };
}

/** Parseable's telemetry type of each kind of dataset. */
export const TELEMETRY_TYPE: Record<DatasetKind, 'logs' | 'traces' | 'metrics'> = {
  json: 'logs',
  'otel-logs': 'logs',
  'otel-traces': 'traces',
  'otel-metrics': 'metrics',
};

/**
 * Parseable's `QueriedStats`. `format` is the dataset's log source (`json`, `otel-logs`, …); lifetime
 * counts everything ever stored, deleted what retention removed. `storage.files` and `wal` are ours.
 */
export function queriedStats(stats: DatasetStats, now = new Date()) {
  const { current, deleted, wal, meta } = stats;
  return {
    stream: meta.name,
    time: now.toISOString(),
    ingestion: {
      count: current.rows,
      size: current.rawBytes,
      format: meta.kind,
      lifetime_count: current.rows + deleted.rows,
      lifetime_size: current.rawBytes + deleted.rawBytes,
      deleted_count: deleted.rows,
      deleted_size: deleted.rawBytes,
    },
    storage: {
      size: current.storageBytes,
      format: 'parquet',
      lifetime_size: current.storageBytes + deleted.storageBytes,
      deleted_size: deleted.storageBytes,
      files: current.files,
    },
    wal: { count: wal.rows, size: wal.bytes, segments: wal.segments },
    // Ours: damaged objects of this dataset set aside (docs/operations.md "Damaged objects").
    quarantined: stats.quarantined.map(({ key, kind, reason, since, setAsideTo }) => ({ key, kind, reason, since, ...(setAsideTo ? { set_aside_to: setAsideTo } : {}) })),
  };
}

/** Parseable's per-day `Stats` (`?date=`): events, raw bytes ingested, bytes stored. */
export function datedStats(name: string, date: string, t: Totals) {
  return { events: t.rows, ingestion: t.rawBytes, storage: t.storageBytes, stream: name, date };
}

/** Parseable's `StreamInfo` (camelCase; absent optional fields left out, as its serde does). */
export function streamInfo(stats: DatasetStats) {
  const { meta, timeRange } = stats;
  const time = datasetTime(meta);
  return {
    createdAt: meta.createdAt,
    ...(timeRange ? { firstEventAt: new Date(timeRange.minMs).toISOString(), latestEventAt: new Date(timeRange.maxMs).toISOString() } : {}),
    // Parseable names a time column other than p_timestamp the dataset's time partition.
    ...(meta.timeColumn !== 'p_timestamp' ? { timePartition: meta.timeColumn } : {}),
    // The limit enforced on a time field's events, given at creation or the 30-day default, in
    // Parseable's form (whole days as a string, "30"); OTel datasets' time columns have none.
    ...(time ? { timePartitionLimit: String(time.limitDays ?? DEFAULT_TIME_LIMIT_DAYS) } : {}),
    streamType: 'UserDefined',
    logSource: [{ log_source_format: meta.kind, fields: [] as string[] }],
    telemetryType: TELEMETRY_TYPE[meta.kind],
    hotTierEnabled: false,
    // JSON events' strings holding times become TIMESTAMP columns (docs/time.md).
    inferTimestamp: meta.kind === 'json',
  };
}
