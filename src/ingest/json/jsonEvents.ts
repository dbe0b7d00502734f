import { eventTimeMs, isoOf, type TimeRule } from './eventTime.ts';
import { eventsFromJson, flattenEvent } from './flatten.ts';
import { isServiceName, setField } from '../names.ts';
import type { ColumnType, FlatRow, RowBatch, TimeRange } from '../../model.ts';

/** Columns the service adds to every JSON event. */
export const JSON_KNOWN_TYPES: Record<string, ColumnType> = {
  p_timestamp: 'TIMESTAMP',
  p_metadata: 'VARCHAR',
  p_tags: 'VARCHAR',
  p_src_ip: 'VARCHAR',
  p_user_agent: 'VARCHAR',
};

/** `X-P-*` headers with a meaning of their own, never stored as columns (Parseable's list). */
const NOT_COLUMNS = new Set(['x-p-stream', 'x-p-log-source', 'x-p-extract-log']);
/** Parseable keeps at most 10 custom fields per request, p_user_agent and p_src_ip included. */
export const MAX_HEADER_COLUMNS = 8;
/** Parseable truncates a header column's value to 100 bytes (its values are ASCII: bytes = characters). */
export const MAX_HEADER_VALUE = 100;
/** What Parseable's `HeaderValue::to_str` accepts: visible ASCII and tab. Other values are skipped, as there. */
const VISIBLE_ASCII = /^[\t\x20-\x7e]*$/;

/** `%`, `^` and `=` percent-encoded, so that a value can never add a pair of its own to `k=v^k=v`. */
export const escapePairPart = (s: string) => s.replace(/[%^=]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

/**
 * `X-P-Meta-<key>: v` and `X-P-Tag-<key>: v` headers as `key=v` pairs joined by `^`, the form of
 * `p_metadata` / `p_tags` in earlier Parseable releases, with the separators escaped. A header with
 * an empty name after the prefix is ignored.
 */
export function headerPairs(headers: Headers, prefix: 'x-p-meta-' | 'x-p-tag-'): string | null {
  const pairs: string[] = [];
  headers.forEach((value, name) => {
    const lower = name.toLowerCase();
    const key = lower.startsWith(prefix) ? lower.slice(prefix.length) : '';
    // A header with no name after the prefix (`X-P-Meta-: v`) is ignored: a pair needs a name, and
    // `=v` was a pair no reader could look up (issue 30 L7).
    if (key) pairs.push(`${escapePairPart(key)}=${escapePairPart(value)}`);
  });
  return pairs.length ? pairs.sort().join('^') : null;
}

/**
 * Current Parseable: every `X-P-<name>: v` header but those of NOT_COLUMNS becomes a column `<name>`
 * (lowercase, e.g. `X-P-Environment` → `environment`, `X-P-Meta-Host` → `meta-host`) holding `v` in
 * every event of the request; at most MAX_HEADER_COLUMNS of them (in name order), each value cut to
 * MAX_HEADER_VALUE characters, values that are not visible ASCII skipped. An event's own field of the
 * same name wins. A name the service fills itself (`X-P-P_Timestamp`) is skipped.
 */
export function headerColumns(headers: Headers): [string, string][] {
  const out: [string, string][] = [];
  headers.forEach((value, name) => {
    const lower = name.toLowerCase();
    if (out.length >= MAX_HEADER_COLUMNS || !lower.startsWith('x-p-') || NOT_COLUMNS.has(lower)) return;
    const key = lower.slice(4);
    if (key === '' || isServiceName(key) || !VISIBLE_ASCII.test(value)) return;
    out.push([key, value.slice(0, MAX_HEADER_VALUE)]);
  });
  return out;
}

/**
 * The client's address as Parseable's `p_src_ip` has it (actix's `realip_remote_addr`): the `for=` of
 * a `Forwarded` header, else the first `X-Forwarded-For` entry, else the peer's address. The first two
 * are whatever the client or a proxy wrote.
 */
export function sourceAddress(headers: Headers, peer: string | undefined): string {
  const forwarded = headers.get('forwarded');
  const m = forwarded ? /(?:^|[;,\s])for=(?:"([^"]*)"|([^;,\s]*))/i.exec(forwarded) : null;
  if (m && (m[1] ?? m[2])) return m[1] ?? m[2];
  const xff = headers.get('x-forwarded-for')?.split(',')[0].trim();
  if (xff) return xff;
  return (peer ?? '').replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, '');
}

/** What a JSON ingest request adds to each of its events. */
export interface EventStamp {
  received: string;
  meta: string | null;
  tags: string | null;
  srcIp: string;
  userAgent: string;
  /** Columns from `X-P-*` headers. */
  fields: [string, string][];
}

export function stampFromRequest(headers: Headers, peer: string | undefined, now = new Date()): EventStamp {
  return {
    received: now.toISOString(),
    meta: headerPairs(headers, 'x-p-meta-'),
    tags: headerPairs(headers, 'x-p-tag-'),
    srcIp: sourceAddress(headers, peer),
    userAgent: headers.get('user-agent') ?? '',
    fields: headerColumns(headers),
  };
}

/**
 * JSON events → rows: flattened, stamped with the receive time and what the request's headers say.
 * With the dataset's time field (`rule`), each event's time is checked and stored as its ISO form, and
 * the batch's range of them comes back.
 */
export function jsonEventsToBatch(body: unknown, stamp: EventStamp, maxDepth: number, rule?: TimeRule): RowBatch & { timeRange?: TimeRange } {
  const events = eventsFromJson(body);
  const { received, meta, tags, srcIp, userAgent, fields } = stamp;
  let minMs = Infinity;
  let maxMs = -Infinity;
  const rows: FlatRow[] = events.map((e, i) => {
    const row = flattenEvent(e, maxDepth);
    if (rule !== undefined) {
      const value = Object.hasOwn(row, rule.field) ? row[rule.field] : undefined;
      const ms = eventTimeMs(value, rule, i);
      if (ms < minMs) minMs = ms;
      if (ms > maxMs) maxMs = ms;
      setField(row, rule.field, isoOf(value as string, ms));
    }
    // The service owns p_ columns; a client's own p_timestamp etc. went to the overflow in flattenEvent.
    row.p_timestamp = received;
    if (meta !== null) row.p_metadata = meta;
    if (tags !== null) row.p_tags = tags;
    row.p_src_ip = srcIp;
    row.p_user_agent = userAgent;
    for (const [k, v] of fields) if (!Object.hasOwn(row, k)) setField(row, k, v);
    return row;
  });
  if (rule === undefined) return { rows, knownTypes: JSON_KNOWN_TYPES };
  return { rows, knownTypes: { ...JSON_KNOWN_TYPES, [rule.field]: 'TIMESTAMP' }, timeRange: rows.length ? { minMs, maxMs } : undefined };
}
