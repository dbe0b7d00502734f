import type { DomainError } from '../errors.ts';
import type { EventGroup, GroupResult, ShipperRequest } from './groups.ts';
import type { Ingest, IngestRequest, IngestResult } from './service.ts';
import type { IngestBody } from './bodyDeadline.ts';

/** One request as the fake received it: what the door handed over, its body read whole. */
export interface RecordedIngest {
  call: 'ingest' | 'ingestGroups';
  /** The dataset the door named (`ingest`); undefined for shipper requests, whose groups name theirs. */
  dataset: string | undefined;
  format: IngestRequest['format'] | undefined;
  headers: Headers;
  body: Buffer;
  rights: IngestRequest['rights'];
  /** Shipper requests: the groups the door's own decoder made of the body. */
  groups?: EventGroup[];
  /** The door's abort signal (the client went away: the service stores nothing). */
  signal?: AbortSignal;
}

/** What the next call answers: an error thrown as the service would, or (shipper) per-group errors. */
export type Script = { throws?: DomainError; groupErrors?: Record<string, DomainError>; count?: number; info?: IngestResult['info'] };

async function readAll(body: Uint8Array | IngestBody): Promise<Buffer> {
  if (body instanceof Uint8Array) return Buffer.from(body);
  const chunks: Uint8Array[] = [];
  for await (const chunk of body) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/**
 * A fake of the ingest service for in-process door tests (test/README.md "Where a test goes"): records
 * each request and answers what the test scripted. It does no admission, decompression or storage; a
 * shipper request's body is run through the door's own `decode`, so its groups are what the real
 * service would store.
 */
export class RecordingIngest implements Ingest {
  readonly calls: RecordedIngest[] = [];
  /** The answer of every following call until changed. */
  script: Script = {};

  async ingest(req: IngestRequest): Promise<IngestResult> {
    const body = await readAll(req.body);
    // The service releases a door's reservation (gRPC takes one before reading the message); so does the fake.
    req.lease?.release();
    this.calls.push({ call: 'ingest', dataset: req.dataset, format: req.format, headers: req.headers, body, rights: req.rights, signal: req.signal });
    if (this.script.throws) throw this.script.throws;
    return { dataset: req.dataset ?? '', count: this.script.count ?? 1, info: this.script.info ?? {} };
  }

  async ingestGroups(req: ShipperRequest): Promise<GroupResult[]> {
    const body = await readAll(req.body);
    const record: RecordedIngest = { call: 'ingestGroups', dataset: undefined, format: undefined, headers: req.headers, body, rights: req.rights };
    this.calls.push(record);
    if (this.script.throws) throw this.script.throws;
    record.groups = req.decode(body);
    const errors = this.script.groupErrors ?? {};
    return record.groups.map((g) => (errors[g.dataset] ? { dataset: g.dataset, error: errors[g.dataset] } : { dataset: g.dataset, count: g.events.length }));
  }

  /** The last call, or a failure naming that the door never called the service. */
  last(): RecordedIngest {
    const call = this.calls.at(-1);
    if (!call) throw new Error('the door made no ingest call');
    return call;
  }
}
