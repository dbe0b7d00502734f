import * as path from 'node:path';

/**
 * Every object key and every local path the storage layer uses, built and parsed here and nowhere
 * else (docs/storage.md "Layout"). Dataset names start with a letter and hold no "/" or ".", so a
 * dataset's objects never collide with `.streams/` or with another dataset's.
 *
 * ```
 * .streams/{dataset}.json                                   dataset metadata
 * {dataset}/.schema/{generation}/{node}.json                a worker's schema
 * {dataset}/.manifests/{generation}/{node}.{seq}.json       catalog manifests
 * {dataset}/.metric-metadata/{generation}/{node}.json       a worker's remote-write metric metadata
 * {dataset}/date=…/hour=…/minute=…/{generation}.{node}.{seq}_{i}.parquet     flushed files
 * {dataset}/date=…/hour=…/{generation}.{node}.{seq}.compacted.parquet        compacted files
 * {data file key}.series                                    a metrics data file's series index (seriesIndex.ts)
 * {dataset}/.iceberg/{generation}/metadata/v{N}.metadata.json     Iceberg table metadata (storage/iceberg/)
 * {dataset}/.iceberg/{generation}/metadata/{uuid}.avro            Iceberg manifests and manifest lists
 * .sessions/{expiry}-{sha256 of the cookie}.json            a console session (src/access/sessions.ts)
 * .sessions/logins/{expiry}-{sha256 of the cookie}.json     a sign-in under way: state, nonce, PKCE verifier
 * .sessions/key                                             the key session cookies are signed with
 * ```
 */

export const META_PREFIX = '.streams/';

const pad = (seq: number) => String(seq).padStart(12, '0');

export const metaKey = (name: string) => `${META_PREFIX}${name}.json`;

/** Dataset name of a metadata key, or undefined for anything else under `.streams/`. */
export function parseMetaKey(key: string): string | undefined {
  const m = /^\.streams\/([^/]+)\.json$/.exec(key);
  return m?.[1];
}

/**
 * Console sessions and sign-ins under way (src/access/sessions.ts). The expiry (ms since the epoch, base 36)
 * leads the name, so expired objects are found by listing alone; the rest is a hash of the cookie, so a
 * listing of the bucket reveals no cookie.
 */
export const SESSION_PREFIX = '.sessions/';
export const LOGIN_PREFIX = '.sessions/logins/';
export const SESSION_KEY_KEY = '.sessions/key';
export const sessionObjectKey = (prefix: string, expiresAt: number, digest: string) => `${prefix}${expiresAt.toString(36)}-${digest}.json`;
/** The expiry of a session or sign-in object's key, or undefined for another key. */
export function parseSessionObjectKey(key: string): number | undefined {
  const m = /^\.sessions\/(?:logins\/)?([0-9a-z]{1,11})-[0-9a-f]{64}\.json$/.exec(key);
  return m ? parseInt(m[1], 36) : undefined;
}

/** Everything of a dataset, all generations. */
export const datasetPrefix = (name: string) => `${name}/`;

export const schemaPrefix = (name: string, generation: string) => `${name}/.schema/${generation}/`;
export const schemaKey = (name: string, generation: string, nodeId: string) => `${schemaPrefix(name, generation)}${nodeId}.json`;

export const manifestPrefix = (name: string, generation: string) => `${name}/.manifests/${generation}/`;
export const manifestKey = (name: string, generation: string, nodeId: string, seq: number) =>
  `${manifestPrefix(name, generation)}${nodeId}.${pad(seq)}.json`;

export const metricMetadataPrefix = (name: string, generation: string) => `${name}/.metric-metadata/${generation}/`;
export const metricMetadataKey = (name: string, generation: string, nodeId: string) => `${metricMetadataPrefix(name, generation)}${nodeId}.json`;

/** A dataset generation's Iceberg metadata (storage/iceberg/): metadata JSON, manifests, manifest lists. */
export const icebergMetadataPrefix = (name: string, generation: string) => `${name}/.iceberg/${generation}/metadata/`;
export const icebergMetadataKey = (name: string, generation: string, version: number) => `${icebergMetadataPrefix(name, generation)}v${pad(version)}.metadata.json`;
export const icebergAvroKey = (name: string, generation: string, fileName: string) => `${icebergMetadataPrefix(name, generation)}${fileName}`;

/** The version of an Iceberg metadata key, or undefined for another key. */
export function parseIcebergMetadataVersion(key: string): number | undefined {
  const m = /\/\.iceberg\/[^/]+\/metadata\/v(\d{12})\.metadata\.json$/.exec(key);
  return m ? Number(m[1]) : undefined;
}

/** Stem of the files one flush writes (DuckDB appends `_{i}.parquet`). */
export const flushFileStem = (generation: string, nodeId: string, seq: number) => `${generation}.${nodeId}.${pad(seq)}`;
export const compactedFileName = (generation: string, nodeId: string, seq: number) => `${generation}.${nodeId}.${pad(seq)}.compacted.parquet`;
/** A data file's key from its partition (`date=…/hour=…[/minute=…]`) and file name. */
export const dataFileKey = (name: string, partition: string, fileName: string) => `${name}/${partition}/${fileName}`;

/**
 * The series index beside a data file (a small Parquet file, see seriesIndex.ts). Its name does not end
 * in `.parquet`, so a reader globbing a dataset's `*.parquet` never takes it for data.
 */
export const seriesIndexKey = (dataKey: string) => `${dataKey}.series`;

/** `date=…/hour=…` of a data file key. */
export function hourPartition(key: string): string | undefined {
  return /\/(date=[^/]+\/hour=[^/]+)\//.exec(key)?.[1];
}

export type ObjectRole = 'metadata' | 'schema' | 'manifest' | 'metric-metadata' | 'data' | 'series-index' | 'iceberg';

export interface ParsedKey {
  role: ObjectRole;
  dataset: string;
  /** Undefined for metadata, which names its generation in its body. */
  generation?: string;
  nodeId?: string;
  seq?: number;
}

/** What an object key is, or undefined for a key this service never writes. */
export function parseKey(key: string): ParsedKey | undefined {
  const meta = parseMetaKey(key);
  if (meta !== undefined) return { role: 'metadata', dataset: meta };
  let m = /^([^/.][^/]*)\/\.schema\/([^/]+)\/([^/]+)\.json$/.exec(key);
  if (m) return { role: 'schema', dataset: m[1], generation: m[2], nodeId: m[3] };
  m = /^([^/.][^/]*)\/\.metric-metadata\/([^/]+)\/([^/]+)\.json$/.exec(key);
  if (m) return { role: 'metric-metadata', dataset: m[1], generation: m[2], nodeId: m[3] };
  m = /^([^/.][^/]*)\/\.iceberg\/([^/]+)\/metadata\/[^/]+$/.exec(key);
  if (m) return { role: 'iceberg', dataset: m[1], generation: m[2] };
  m = /^([^/.][^/]*)\/\.manifests\/([^/]+)\/([^/]+)\.(\d{12})\.json$/.exec(key);
  if (m) return { role: 'manifest', dataset: m[1], generation: m[2], nodeId: m[3], seq: Number(m[4]) };
  m = /^([^/.][^/]*)\/date=[^/]+\/hour=[^/]+\/(?:minute=[^/]+\/)?([^/.]+)\.([^/]+)\.(\d{12})(?:_\d+|\.compacted)\.parquet(\.series)?$/.exec(key);
  if (m) return { role: m[5] ? 'series-index' : 'data', dataset: m[1], generation: m[2], nodeId: m[3], seq: Number(m[4]) };
  return undefined;
}

// Local paths (one worker's disk).

export const walRoot = (dataDir: string) => path.join(dataDir, 'wal');
export const walDir = (dataDir: string, name: string, generation: string) => path.join(walRoot(dataDir), name, generation);
/** This worker's schema of a dataset generation, kept beside its WAL and uploaded with the next flush. */
export const localSchemaFile = (dataDir: string, name: string, generation: string) => path.join(walDir(dataDir, name, generation), 'schema.json');
/** Staging for files being written (Parquet before upload). */
export const stagingDir = (dataDir: string, label: string) => path.join(dataDir, 'tmp', label);
/** Damaged local data set aside (WAL lines and segments that cannot be stored). */
export const quarantineDir = (dataDir: string) => path.join(dataDir, 'quarantine');
export const walQuarantineFile = (dataDir: string, name: string, generation: string, fileName: string) =>
  path.join(quarantineDir(dataDir), 'wal', name, generation, fileName);
