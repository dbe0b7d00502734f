/**
 * Splunk's HTTP Event Collector bodies, bytes in, JSON events per dataset out. `/services/collector`
 * and `/event` take JSON event objects one after another (concatenated, with or without whitespace or
 * newlines between them); `/raw` takes lines of text. A body with any bad event is refused whole, with
 * Splunk's error code and the number of the first bad event.
 */
import { DomainError } from '../../errors.ts';

/** The time field of HEC events. */
export const HEC_TIME_FIELD = 'time';

/** A refusal in Splunk's terms: its code (6 invalid data format, 12 event field is required, 13 event field cannot be blank). */
export class HecError extends DomainError {
  constructor(
    readonly code: number,
    text: string,
    readonly invalidEventNumber?: number,
  ) {
    super('invalid', text);
  }
}

/** Where each JSON value of a concatenation starts and ends, found by a scan of strings and brackets. */
export function splitConcatenated(text: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = -1;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x7b || c === 0x5b) {
      if (depth++ === 0) start = i;
    } else if (c === 0x7d || c === 0x5d) {
      if (--depth === 0) out.push(text.slice(start, i + 1));
      if (depth < 0) throw new HecError(6, 'Invalid data format', out.length);
    } else if (depth === 0 && c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) {
      throw new HecError(6, 'Invalid data format', out.length);
    }
  }
  if (depth !== 0 || inString) throw new HecError(6, 'Invalid data format', out.length);
  return out;
}

/** Epoch seconds (a number or its text, with a fraction) as ISO; undefined when absent. */
function timeOf(value: unknown, n: number): string | undefined {
  if (value === undefined || value === null) return undefined;
  const seconds = typeof value === 'string' ? Number(value) : value;
  if (typeof seconds !== 'number' || !Number.isFinite(seconds) || seconds < 0 || seconds > 253402300799) throw new HecError(6, 'Invalid data format', n);
  return new Date(Math.round(seconds * 1000)).toISOString();
}

export interface HecDefaults {
  /** The dataset of events that name no `index`. */
  dataset: string;
  receivedIso: string;
}

/** One HEC event object → its dataset and the JSON text to store. */
function eventOf(text: string, n: number, defaults: HecDefaults): { dataset: string; json: string } {
  let e: unknown;
  try {
    e = JSON.parse(text);
  } catch {
    throw new HecError(6, 'Invalid data format', n);
  }
  if (e === null || typeof e !== 'object' || Array.isArray(e)) throw new HecError(6, 'Invalid data format', n);
  const { event, time, host, source, sourcetype, index, fields } = e as Record<string, unknown>;
  if (event === undefined || event === null) throw new HecError(12, 'Event field is required', n);
  if (event === '' || (typeof event === 'object' && Object.keys(event).length === 0)) throw new HecError(13, 'Event field cannot be blank', n);
  if (fields !== undefined && (fields === null || typeof fields !== 'object' || Array.isArray(fields))) throw new HecError(6, 'Invalid data format', n);
  const row: Record<string, unknown> = { ...(fields as Record<string, unknown> | undefined) };
  for (const [k, v] of Object.entries({ host, source, sourcetype })) if (typeof v === 'string') row[k] = v;
  row.event = event;
  row[HEC_TIME_FIELD] = timeOf(time, n) ?? defaults.receivedIso;
  return { dataset: typeof index === 'string' && index !== '' ? index : defaults.dataset, json: JSON.stringify(row) };
}

/** `/services/collector` and `/event`: every event, by dataset, in order within each. */
export function decodeEvents(body: Buffer, defaults: HecDefaults): Map<string, string[]> {
  const text = body.toString('utf8');
  if (text.trim() === '') throw new HecError(5, 'No data');
  const groups = new Map<string, string[]>();
  splitConcatenated(text).forEach((t, n) => {
    const { dataset, json } = eventOf(t, n, defaults);
    const list = groups.get(dataset);
    if (list) list.push(json);
    else groups.set(dataset, [json]);
  });
  return groups;
}

/** What `/raw` takes besides its body, from the query string. */
export interface RawMeta {
  host?: string;
  source?: string;
  sourcetype?: string;
}

/** `/services/collector/raw`: one event per non-empty line, its text as `event`, stamped with the receive time. */
export function decodeRaw(body: Buffer, meta: RawMeta, receivedIso: string): string[] {
  const lines = body.toString('utf8').split(/\r?\n/).filter((l) => l.trim() !== '');
  if (lines.length === 0) throw new HecError(5, 'No data');
  const extra: Record<string, string> = {};
  for (const [k, v] of Object.entries(meta)) if (typeof v === 'string' && v !== '') extra[k] = v;
  return lines.map((line) => JSON.stringify({ ...extra, event: line, [HEC_TIME_FIELD]: receivedIso }));
}
