import type { Config } from '../config.ts';
import { invalidInput, notFound, unavailable } from '../errors.ts';
import { ingestedBytes, ingestedRows } from '../metrics.ts';
import type { DatasetKind } from '../model.ts';
import type { DatasetMeta, StorageEngine } from '../storage/engine.ts';
import { emptySchema } from '../storage/schema.ts';
import { DecodeBudgetExceeded, declaredDecodedSize, isIdentityEncoding } from './compression.ts';
import { InflightBudget, type InflightLease } from './inflight.ts';
import type { IngestPool } from './ingestPool.ts';
import type { RequestLimits } from './limits.ts';
import { datasetTime, type IngestInfo, type IngestJob, type PlacementTarget } from './pipeline.ts';

/** How often a batch is placed again because the schema changed under it before giving up (503). */
const MAX_PLACEMENTS = 4;

/** Where a batch goes: the dataset, its kind, and whether (and with what permission) it may be created. */
export interface IngestTarget {
  name: string;
  kind: DatasetKind;
  /** `POST /api/v1/logstream/{name}` stores into an existing dataset only; the others create it. */
  create: boolean;
  /** Throws when the caller may not create datasets (checked only when one must be created). */
  authorizeCreate: () => void;
}

/**
 * The one ingest path every protocol takes (JSON, OTLP, remote write): decode in the worker pool,
 * resolve or create the dataset, hand one serialised batch to storage's one sink. The worker places
 * every value against the dataset's schema as it is now (a conflicting value goes to a typed or
 * overflow column there, so the event loop never decodes or rewrites a body); the dataset is found or
 * created only after decoding, so a body that cannot be decoded never creates one. If another request
 * changed the schema in between so that the batch no longer fits, the worker places it again.
 */
export class IngestService {
  /** Bytes of request bodies being received, decoded and stored at once (P_MAX_INFLIGHT_BYTES). */
  readonly inflight: InflightBudget;

  constructor(
    private readonly pool: IngestPool,
    private readonly storage: StorageEngine,
    private readonly config: Config,
  ) {
    this.inflight = new InflightBudget(config.maxInflightBytes, config.inflightWaitMs);
  }

  /**
   * Runs one ingest request inside the in-flight budget: before its body is read it reserves the
   * declared Content-Length (P_MAX_BODY_BYTES when not declared: chunked), and it gives the
   * reservation back when the batch is stored or refused. Waits for room, then 503 (see InflightBudget).
   */
  async admit<T>(contentLength: string | undefined, run: (lease: InflightLease) => Promise<T>): Promise<T> {
    const declared = contentLength === undefined || contentLength.trim() === '' ? NaN : Number(contentLength);
    const bytes = Number.isSafeInteger(declared) && declared >= 0 ? Math.min(declared, this.config.maxBodyBytes) : this.config.maxBodyBytes;
    const lease = await this.inflight.acquire(bytes);
    try {
      return await run(lease);
    } finally {
      lease.release();
    }
  }

  /** The per-request work limits of a job (README "Limits"). */
  get limits(): RequestLimits {
    return { maxEvents: this.config.maxEventsPerRequest, maxValues: this.config.maxValuesPerRequest, maxNames: Math.max(1000, 4 * this.config.maxColumns) };
  }

  /** Stores one request's batch; `lease` is its share of the in-flight budget (from `admit`). */
  async store(target: IngestTarget, job: IngestJob, lease: InflightLease): Promise<{ count: number; info: IngestInfo }> {
    const { name } = target;
    const maxColumns = this.config.maxColumns;
    // The body's buffer moves to the ingest worker (transferred, not copied): its length is read first.
    const rawBytes = job.body.byteLength;
    // Decoding holds the compressed body and the decoded one at once: reserve both before decoding.
    const identity = isIdentityEncoding(job.contentEncoding);
    const decoded = identity ? 0 : Math.min(job.maxDecompressedBytes, declaredDecodedSize(job.body, job.contentEncoding) ?? job.maxDecompressedBytes);
    await lease.resize(rawBytes + decoded);
    if (!identity) job.decodeBudget = decoded;
    const seen = this.storage.find(name);
    const initial: PlacementTarget = { schema: seen ? this.storage.schemaOf(name).schema : emptySchema(), maxColumns, time: datasetTime(seen) };
    let serialized;
    try {
      serialized = await this.pool.serialize(job, initial);
    } catch (err) {
      if (!(err instanceof DecodeBudgetExceeded)) throw err;
      // The gzip trailer understated the body (several members, or forged): reserve the whole limit.
      await lease.resize(rawBytes + job.maxDecompressedBytes);
      job.decodeBudget = undefined;
      serialized = await this.pool.serialize(job, initial);
    }
    const meta = await this.resolve(target);
    // A dataset another worker created with a time field: its events are checked for that field now.
    const time = datasetTime(meta);
    if (time?.field !== initial.time?.field) serialized = await this.pool.serialize(job, { ...initial, time });
    for (let placements = 1; ; placements++) {
      const stored = await this.storage.append(name, serialized, rawBytes);
      if ('count' in stored) {
        ingestedRows.inc({ dataset: name }, stored.count);
        ingestedBytes.inc({ dataset: name }, rawBytes);
        return { count: stored.count, info: serialized.info };
      }
      if (placements >= MAX_PLACEMENTS) throw unavailable(`the schema of dataset "${name}" kept changing while this request was stored (${stored.conflict}); retry`, 1);
      serialized = await this.pool.serialize(job, { schema: stored.schema, maxColumns, time });
    }
  }

  /** Finds (or creates) the dataset; a dataset keeps the one kind it was created with. */
  private async resolve({ name, kind, create, authorizeCreate }: IngestTarget): Promise<DatasetMeta> {
    let meta = await this.storage.resolve(name);
    if (!meta) {
      if (!create) throw notFound(`dataset "${name}" does not exist`);
      authorizeCreate();
      meta = (await this.storage.create(name, kind)).meta;
    }
    if (meta.kind !== kind) {
      throw invalidInput(kind === 'json' ? `dataset "${name}" holds ${meta.kind} data; send JSON events to a JSON dataset` : `dataset "${name}" holds ${meta.kind} data, not ${kind}`);
    }
    return meta;
  }
}
