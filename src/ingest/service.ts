import type { Config } from '../config.ts';
import { DomainError, forbidden, invalidInput, notFound, tooLarge, unavailable } from '../errors.ts';
import { ingestedBytes, ingestedRows } from '../metrics.ts';
import type { ColumnType, DatasetKind } from '../model.ts';
import type { DatasetMeta, SerializedRows, TimeField } from '../storage/engine.ts';
import { emptySchema, type Schema } from '../storage/dataset/schema.ts';
import { decodeBody, DecodeBudgetExceeded, declaredDecodedSize, isIdentityEncoding } from './compression.ts';
import { stampFromRequest } from './json/jsonEvents.ts';
import { InflightBudget, type InflightLease } from './inflight.ts';
import type { EventGroup, GroupResult, ShipperRequest } from './groups.ts';
import type { IngestPool } from './worker/ingestPool.ts';
import type { RequestLimits } from './limits.ts';
import type { OtlpFormat, OtlpSignal } from './otlp/index.ts';
import { datasetTime, type IngestInfo, type IngestJob, type JobBase, type PlacementTarget } from './worker/pipeline.ts';
import { BodyDeadline, type IngestBody } from './bodyDeadline.ts';

/** How often a batch is placed again because the schema changed under it before giving up (503). */
const MAX_PLACEMENTS = 4;

/**
 * What the ingest service needs of storage: find a dataset and its schema, create one, append one
 * serialised batch durably. The storage engine is the one implementation; the interface keeps the
 * service's dependency to these five calls.
 */
export interface IngestSink {
  find(name: string): DatasetMeta | undefined;
  schemaOf(name: string): { schema: Record<string, ColumnType> };
  resolve(name: string): Promise<DatasetMeta | undefined>;
  /** Creates the dataset; its kind fixes its time column, unless a JSON dataset is given a time field. */
  create(name: string, kind: DatasetKind, time?: TimeField): Promise<{ meta: DatasetMeta }>;
  append(name: string, batch: SerializedRows, rawBytes: number): Promise<{ count: number } | { conflict: string; schema: Schema }>;
}

/** The ingest service's settings: loadConfig's `ingest` group (src/config.ts states each one's meaning and default). */
export type IngestSettings = Omit<Config['ingest'], 'workers' | 'workerIdleMs'>;

/** The format of a request body and the signal it carries, as the front door's endpoint names it. */
export type IngestFormat =
  /** JSON events; `existingOnly`: `POST /api/v1/logstream/{name}` stores into an existing dataset only. */
  | { kind: 'json'; existingOnly?: boolean }
  | { kind: 'otlp'; signal: OtlpSignal; format: OtlpFormat }
  | { kind: 'prometheus'; contentType?: string };

/** What the caller's key may do, as data (the front door authenticated it; the service applies it). */
export interface IngestRights {
  /** A stable id of the key (per-key shares). */
  key: string;
  ingest: boolean;
  create: boolean;
  /** The datasets the key is limited to; undefined means all. */
  datasets?: ReadonlySet<string>;
  /** Datasets the key may not write even when `datasets` allows all (the audit dataset, for all but the service). */
  except?: ReadonlySet<string>;
}

/** Everything a front door (HTTP, gRPC) knows about one ingest request. */
export interface IngestRequest {
  format: IngestFormat;
  /** The dataset the client named; undefined: OTLP's default dataset of the signal (DEFAULT_DATASET), else 400. */
  dataset: string | undefined;
  /** Request headers (HTTP) or metadata (gRPC): Content-Encoding, Content-Length, X-P-Log-Source, JSON's X-P-Meta-* etc. */
  headers: Headers;
  /** The client's address. */
  peer?: string;
  /** The body: a buffer already received (gRPC), or the stream still arriving (HTTP). */
  body: Uint8Array | IngestBody;
  rights: IngestRights;
  /**
   * The reservation a door already took in the in-flight budget for this body (gRPC takes it before
   * reading the message: docs/security.md "The door contract"); the service resizes and releases it.
   */
  lease?: InflightLease;
  /** Aborted when the client goes away: the batch is then not stored. */
  signal?: AbortSignal;
}

export interface IngestResult {
  dataset: string;
  count: number;
  info: IngestInfo;
}

/** The dataset kind each format stores into. */
export function kindOf(format: IngestFormat): DatasetKind {
  if (format.kind === 'json') return 'json';
  if (format.kind === 'prometheus') return 'otel-metrics';
  return OTLP_KIND[format.signal];
}

const OTLP_KIND: Record<OtlpSignal, DatasetKind> = { logs: 'otel-logs', traces: 'otel-traces', metrics: 'otel-metrics' };

/**
 * Where OTLP goes when the client names no dataset: one per signal, so a Collector or SDK whose only
 * header is the key stores all three signals (one dataset holds one kind).
 */
export const DEFAULT_DATASET: Record<OtlpSignal, string> = { logs: 'otel_logs', traces: 'otel_traces', metrics: 'otel_metrics' };

/**
 * What the front doors call of the ingest service: the seam their in-process tests replace with
 * RecordingIngest (src/ingest/fake.ts, kept beside it so that a changed signature breaks the fake at
 * compile time).
 */
export interface Ingest {
  ingest(req: IngestRequest): Promise<IngestResult>;
  ingestGroups(req: ShipperRequest): Promise<GroupResult[]>;
}

/**
 * The one ingest path every protocol and front door takes (JSON, OTLP over HTTP and gRPC, remote
 * write): admission into the in-flight budget, reading the body, building the job, decoding in the
 * worker pool, resolving or creating the dataset, and handing one serialised batch to the sink. The
 * worker places every value against the dataset's schema as it is now (a conflicting value goes to a
 * typed or overflow column there, so the event loop never decodes or rewrites a body); the dataset is
 * found or created only after decoding, so a body that cannot be decoded never creates one. If another
 * request changed the schema in between so that the batch no longer fits, the worker places it again.
 */
export class IngestService implements Ingest {
  /** Bytes of request bodies being received, decoded and stored at once (P_MAX_INFLIGHT_BYTES). */
  readonly inflight: InflightBudget;

  constructor(
    private readonly pool: IngestPool,
    private readonly sink: IngestSink,
    private readonly config: IngestSettings,
  ) {
    this.inflight = new InflightBudget(config.maxInflightBytes, config.inflightWaitMs, config.keyShare);
  }

  /** The per-request work limits of a job (docs/ingestion.md "Limits per request"). */
  get limits(): RequestLimits {
    return { maxEvents: this.config.maxEventsPerRequest, maxValues: this.config.maxValuesPerRequest, maxNames: this.config.maxNamesPerRequest, eventTimeFutureMs: this.config.eventTimeFutureMs, signalTimePastMs: this.config.signalTimePastMs };
  }

  /**
   * Ingests one request. Everything a client can get wrong without sending a byte (dataset, kind,
   * rights, declared size) is checked before the body is read.
   */
  async ingest(req: IngestRequest): Promise<IngestResult> {
    try {
      return await this.admitAndStore(req);
    } finally {
      // A reservation the door took is the service's from here on, also when a check below refuses.
      req.lease?.release();
    }
  }

  private async admitAndStore(req: IngestRequest): Promise<IngestResult> {
    const { format, headers, rights } = req;
    const kind = kindOf(format);
    // X-P-Log-Source may be omitted (the endpoint names the kind, and some clients cannot send custom
    // headers); when present it must agree with the endpoint.
    const source = headers.get('x-p-log-source');
    if (source !== null && format.kind !== 'json' && source !== kind) {
      throw invalidInput(`X-P-Log-Source "${source}" does not match this endpoint, which takes ${kind}`);
    }
    const name = req.dataset || (format.kind === 'otlp' ? DEFAULT_DATASET[format.signal] : undefined);
    if (!name) throw invalidInput('missing dataset: send the X-P-Stream header (or the ?stream= query parameter)');
    checkRight(rights, 'ingest', name);
    if (format.kind === 'json' && format.existingOnly && !(await this.sink.resolve(name))) throw notFound(`dataset "${name}" does not exist`);
    const declared = declaredLength(headers.get('content-length'), req.body);
    if (declared !== undefined && declared > this.config.maxBodyBytes) throw bodyTooLarge(this.config.maxBodyBytes);

    // A body already received (gRPC) is reserved whole; one still arriving (HTTP) is reserved as it
    // arrives (readBody), so a slow client holds only what it has sent. The reservation is given back
    // when the batch is stored or refused.
    const received = req.body instanceof Uint8Array ? req.body.byteLength : 0;
    let lease: InflightLease;
    if (req.lease) {
      lease = req.lease;
      await lease.resize(received);
    } else lease = await this.inflight.acquire(received, rights.key);
    try {
      req.signal?.throwIfAborted();
      const body = req.body instanceof Uint8Array ? req.body : await this.readBody(req.body, lease, declared);
      const job = this.job(req, body);
      return { dataset: name, ...(await this.store(name, kind, !(format.kind === 'json' && format.existingOnly), rights, job, lease, req.signal)) };
    } finally {
      lease.release();
    }
  }

  /**
   * Ingests a shipper's request: admitted and read like any other, then decoded by the protocol into
   * groups, each stored into its dataset as JSON events (created on first use with the group's time
   * field). A group that is refused (rights, kind, limits, a bad event) fails alone; an error of the
   * whole body (size, encoding, syntax) is thrown.
   */
  async ingestGroups(req: ShipperRequest): Promise<GroupResult[]> {
    const declared = declaredLength(req.headers.get('content-length'), req.body);
    if (declared !== undefined && declared > this.config.maxBodyBytes) throw bodyTooLarge(this.config.maxBodyBytes);
    const lease = await this.inflight.acquire(req.body instanceof Uint8Array ? req.body.byteLength : 0, req.rights.key);
    try {
      req.signal?.throwIfAborted();
      const raw = req.body instanceof Uint8Array ? Buffer.from(req.body.buffer, req.body.byteOffset, req.body.byteLength) : await this.readBody(req.body, lease, declared);
      const encoding = req.headers.get('content-encoding') ?? undefined;
      // Decoding holds the compressed body and the decoded one at once (a bomb stops at the limit).
      const max = this.config.maxDecompressedBytes;
      await lease.resize(raw.byteLength + (isIdentityEncoding(encoding) ? 0 : Math.min(max, declaredDecodedSize(raw, encoding) ?? max)));
      const groups = req.decode(decodeBody(raw, encoding, max));
      const results: GroupResult[] = [];
      for (const group of groups) results.push(await this.storeGroup(req, group, lease));
      return results;
    } finally {
      lease.release();
    }
  }

  private async storeGroup(req: ShipperRequest, group: EventGroup, lease: InflightLease): Promise<GroupResult> {
    const result = await this.storeGroupOnce(req, group, lease);
    return 'error' in result && result.error.kind === 'invalid' && group.exact ? this.storeGroupOnce(req, group.exact(), lease) : result;
  }

  private async storeGroupOnce(req: ShipperRequest, group: EventGroup, lease: InflightLease): Promise<GroupResult> {
    const { dataset, events, time } = group;
    if (events.length === 0) return { dataset, count: 0 };
    try {
      checkRight(req.rights, 'ingest', dataset);
      const body = Buffer.from(`[${events.join(',')}]`);
      const job: IngestJob = { body, maxDecompressedBytes: this.config.maxDecompressedBytes, limits: this.limits, kind: 'json', stamp: stampFromRequest(req.headers, req.peer), maxDepth: this.config.maxNesting };
      // A document that was only looked at could hide two objects (`{…},{…}` on one line): the count must match.
      const stored = await this.store(dataset, 'json', true, req.rights, job, lease, req.signal, { newTime: { field: time }, rows: events.length });
      return { dataset, count: stored.count };
    } catch (err) {
      if (err instanceof DomainError && err.kind !== 'unavailable' && err.kind !== 'storage' && err.kind !== 'too_many_requests') return { dataset, error: err };
      throw err;
    }
  }

  /**
   * Reads a body as it arrives, growing its reservation in steps of RESERVE_STEP (never past what it
   * declared); a body larger than P_MAX_BODY_BYTES is 413 without being buffered. A request the
   * budget refuses mid-body reads the rest without keeping it (so its answer reaches the client) and
   * holds nothing meanwhile. A body slower than P_INGEST_MIN_BODY_RATE after P_INGEST_BODY_TIMEOUT is
   * cut: its stream is destroyed (closing the connection), as a client that trickles bytes to hold a
   * connection deserves no answer.
   */
  private async readBody(source: IngestBody, lease: InflightLease, declared: number | undefined): Promise<Buffer> {
    const max = this.config.maxBodyBytes;
    const ceiling = declared ?? max;
    const chunks: Uint8Array[] = [];
    let size = 0;
    let refusal: unknown;
    const deadline = new BodyDeadline(source, this.config.bodyTimeoutMs, this.config.minBodyRate, () => size);
    try {
      for await (const chunk of source) {
        size += chunk.byteLength;
        if (refusal !== undefined || size > max) continue;
        if (size > lease.bytes) {
          try {
            await lease.resize(Math.max(size, Math.min(ceiling, Math.ceil(size / RESERVE_STEP) * RESERVE_STEP)));
          } catch (err) {
            refusal = err;
            chunks.length = 0;
            await lease.resize(0);
            continue;
          }
        }
        chunks.push(chunk);
      }
    } catch (err) {
      throw deadline.expired ?? err;
    } finally {
      deadline.stop();
    }
    if (refusal !== undefined) throw refusal;
    if (size > max) throw bodyTooLarge(max);
    return Buffer.concat(chunks, size);
  }

  private job(req: IngestRequest, body: Uint8Array): IngestJob {
    const base: JobBase = {
      body,
      contentEncoding: req.headers.get('content-encoding') ?? undefined,
      maxDecompressedBytes: this.config.maxDecompressedBytes,
      limits: this.limits,
    };
    const f = req.format;
    switch (f.kind) {
      case 'json':
        return { ...base, kind: 'json', stamp: stampFromRequest(req.headers, req.peer), maxDepth: this.config.maxNesting };
      case 'otlp':
        return { ...base, kind: 'otlp', signal: f.signal, format: f.format, received: new Date().toISOString() };
      case 'prometheus':
        return { ...base, kind: 'prometheus', contentType: f.contentType, received: new Date().toISOString() };
    }
  }

  /** Stores one request's batch; `lease` is its share of the in-flight budget. */
  private async store(
    name: string,
    kind: DatasetKind,
    create: boolean,
    rights: IngestRights,
    job: IngestJob,
    lease: InflightLease,
    signal: AbortSignal | undefined,
    expect: { newTime?: TimeField; rows?: number } = {},
  ): Promise<{ count: number; info: IngestInfo }> {
    const maxColumns = this.config.maxColumns;
    // The body's buffer moves to the ingest worker (transferred, not copied): its length is read first.
    const rawBytes = job.body.byteLength;
    // Decoding holds the compressed body and the decoded one at once: reserve both before decoding.
    const identity = isIdentityEncoding(job.contentEncoding);
    const decoded = identity ? 0 : Math.min(job.maxDecompressedBytes, declaredDecodedSize(job.body, job.contentEncoding) ?? job.maxDecompressedBytes);
    await lease.resize(rawBytes + decoded);
    if (!identity) job.decodeBudget = decoded;
    const seen = this.sink.find(name);
    const initial: PlacementTarget = { schema: seen ? this.sink.schemaOf(name).schema : emptySchema(), maxColumns, time: datasetTime(seen) };
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
    // A client that went away is not answered: no dataset is created and nothing of its batch is stored
    // (it will send it again).
    signal?.throwIfAborted();
    if (expect.rows !== undefined && serialized.rows !== expect.rows) throw invalidInput(`the batch decoded to ${serialized.rows} events, not the ${expect.rows} sent`);
    const meta = await this.resolve(name, kind, create, rights, expect.newTime);
    // A dataset another worker created with a time field: its events are checked for that field now.
    const time = datasetTime(meta);
    if (time?.field !== initial.time?.field) serialized = await this.pool.serialize(job, { ...initial, time });
    for (let placements = 1; ; placements++) {
      signal?.throwIfAborted();
      const stored = await this.sink.append(name, serialized, rawBytes);
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
  private async resolve(name: string, kind: DatasetKind, create: boolean, rights: IngestRights, time?: TimeField): Promise<DatasetMeta> {
    let meta = await this.sink.resolve(name);
    if (!meta) {
      if (!create) throw notFound(`dataset "${name}" does not exist`);
      checkRight(rights, 'create', name);
      meta = (await this.sink.create(name, kind, time)).meta;
    }
    if (meta.kind !== kind) {
      throw invalidInput(kind === 'json' ? `dataset "${name}" holds ${meta.kind} data; send JSON events to a JSON dataset` : `dataset "${name}" holds ${meta.kind} data, not ${kind}`);
    }
    return meta;
  }
}

/** The same refusals, in the same words, as the HTTP routes' role checks (src/doors/shared/auth.ts). */
function checkRight(rights: IngestRights, action: 'ingest' | 'create', dataset: string): void {
  if (!rights[action]) throw forbidden(`this key may not ${action}`);
  if (rights.datasets && !rights.datasets.has(dataset)) throw forbidden(`this API key may not access dataset "${dataset}"`);
  if (rights.except?.has(dataset)) throw forbidden(`dataset "${dataset}" is written by the service only`);
}

function declaredLength(header: string | null, body: IngestRequest['body']): number | undefined {
  if (body instanceof Uint8Array) return body.byteLength;
  const declared = header === null || header.trim() === '' ? NaN : Number(header);
  return Number.isSafeInteger(declared) && declared >= 0 ? declared : undefined;
}

/** Bodies are reserved in steps of this much as they arrive: a request takes the budget a few times, not per chunk. */
const RESERVE_STEP = 64 * 1024;

const bodyTooLarge = (maxBytes: number) => tooLarge(`request body is larger than the limit of ${maxBytes} bytes (P_MAX_BODY_BYTES)`);
