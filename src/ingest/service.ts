import type { Config } from '../config.ts';
import { invalidInput, notFound, unavailable } from '../errors.ts';
import { ingestedBytes, ingestedRows } from '../metrics.ts';
import { TIME_COLUMN, type DatasetKind } from '../model.ts';
import type { StorageEngine } from '../storage/engine.ts';
import { emptySchema } from '../storage/schema.ts';
import type { IngestPool } from './ingestPool.ts';
import type { RequestLimits } from './limits.ts';
import type { IngestInfo, IngestJob } from './pipeline.ts';

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
  constructor(
    private readonly pool: IngestPool,
    private readonly storage: StorageEngine,
    private readonly config: Config,
  ) {}

  /** The per-request work limits of a job (README "Limits"). */
  get limits(): RequestLimits {
    return { maxEvents: this.config.maxEventsPerRequest, maxValues: this.config.maxValuesPerRequest, maxNames: Math.max(1000, 4 * this.config.maxColumns) };
  }

  async store(target: IngestTarget, job: IngestJob): Promise<{ count: number; info: IngestInfo }> {
    const { name } = target;
    const maxColumns = this.config.maxColumns;
    // The body's buffer moves to the ingest worker (transferred, not copied): its length is read first.
    const rawBytes = job.body.byteLength;
    let serialized = await this.pool.serialize(job, { schema: this.storage.find(name) ? this.storage.schemaOf(name).schema : emptySchema(), maxColumns });
    await this.resolve(target);
    for (let placements = 1; ; placements++) {
      const stored = await this.storage.append(name, serialized, rawBytes);
      if ('count' in stored) {
        ingestedRows.inc({ dataset: name }, stored.count);
        ingestedBytes.inc({ dataset: name }, rawBytes);
        return { count: stored.count, info: serialized.info };
      }
      if (placements >= MAX_PLACEMENTS) throw unavailable(`the schema of dataset "${name}" kept changing while this request was stored (${stored.conflict}); retry`, 1);
      serialized = await this.pool.serialize(job, { schema: stored.schema, maxColumns });
    }
  }

  /** Finds (or creates) the dataset; a dataset keeps the one kind it was created with. */
  private async resolve({ name, kind, create, authorizeCreate }: IngestTarget): Promise<void> {
    let meta = await this.storage.resolve(name);
    if (!meta) {
      if (!create) throw notFound(`dataset "${name}" does not exist`);
      authorizeCreate();
      meta = (await this.storage.create(name, kind, TIME_COLUMN[kind])).meta;
    }
    if (meta.kind !== kind) {
      throw invalidInput(kind === 'json' ? `dataset "${name}" holds ${meta.kind} data; send JSON events to a JSON dataset` : `dataset "${name}" holds ${meta.kind} data, not ${kind}`);
    }
  }
}
