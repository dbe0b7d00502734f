import type { DomainError } from '../errors.ts';
import type { IngestRequest } from './service.ts';

/**
 * A log shipper's request (Elasticsearch bulk, Loki push, Splunk HEC): one body that a protocol decoder
 * (src/ingest/esbulk, loki, hec) splits into JSON events per dataset. `decode` gets the body as sent
 * after Content-Encoding; it throws a DomainError for a body it cannot read at all.
 */
export interface ShipperRequest extends Omit<IngestRequest, 'format' | 'dataset'> {
  decode: (body: Buffer) => EventGroup[];
}

/** JSON events (each one JSON object's text) bound for one dataset. */
export interface EventGroup {
  dataset: string;
  events: string[];
  /** The time field a dataset created by this request gets (its events' own time). */
  time: string;
  /**
   * The same group decoded exactly, when `events` were only looked at, not parsed (a decoder's fast
   * path): tried once when the group is refused as invalid, so that a bad event fails alone.
   */
  exact?: () => EventGroup;
}

/** Per group, in order: stored, or the error that refused all of that group (nothing of it is stored). */
export type GroupResult = { dataset: string; count: number } | { dataset: string; error: DomainError };
