import { eventsFromJson, flattenEvent } from './flatten.ts';
import type { ColumnType, FlatRow, RowBatch } from '../model.ts';

/** Columns the service adds to every JSON event. */
export const JSON_KNOWN_TYPES: Record<string, ColumnType> = { p_timestamp: 'TIMESTAMP', p_metadata: 'VARCHAR', p_tags: 'VARCHAR' };

/**
 * `X-P-Meta-<key>: v` and `X-P-Tag-<key>: v` headers become `key=v` pairs joined by `^` in the
 * `p_metadata` / `p_tags` columns, as Parseable stores them.
 */
export function headerPairs(headers: Headers, prefix: 'x-p-meta-' | 'x-p-tag-'): string | null {
  const pairs: string[] = [];
  headers.forEach((value, name) => {
    if (name.toLowerCase().startsWith(prefix)) pairs.push(`${name.slice(prefix.length).toLowerCase()}=${value}`);
  });
  return pairs.length ? pairs.sort().join('^') : null;
}

/** What a JSON ingest request adds to each of its events. */
export interface EventStamp {
  received: string;
  meta: string | null;
  tags: string | null;
}

export function stampFromRequest(headers: Headers, now = new Date()): EventStamp {
  return { received: now.toISOString(), meta: headerPairs(headers, 'x-p-meta-'), tags: headerPairs(headers, 'x-p-tag-') };
}

/** JSON events → rows: flattened, stamped with the receive time and the request's metadata/tags. */
export function jsonEventsToBatch(body: unknown, stamp: EventStamp, maxDepth: number): RowBatch {
  const events = eventsFromJson(body);
  const { received, meta, tags } = stamp;
  const rows: FlatRow[] = events.map((e) => {
    const row = flattenEvent(e, maxDepth);
    // The service owns p_ columns: a client's own p_timestamp never overrides the receive time.
    row.p_timestamp = received;
    // `delete` turns a V8 object into a slow dictionary (measured: +60% flatten time): only when needed.
    if (meta !== null) row.p_metadata = meta;
    else if ('p_metadata' in row) delete row.p_metadata;
    if (tags !== null) row.p_tags = tags;
    else if ('p_tags' in row) delete row.p_tags;
    return row;
  });
  return { rows, knownTypes: JSON_KNOWN_TYPES };
}
