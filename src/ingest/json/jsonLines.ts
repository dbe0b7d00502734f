/**
 * The common case of JSON ingestion in one pass: parsed events straight to WAL lines and their type
 * summary, without building a flat row object per event and serialising it again. It writes exactly
 * the lines and the summary that `jsonEventsToBatch` + `summarizeTypes` + `rowsToLines` would (same
 * key order, same values), so the rest of the pipeline cannot tell which path ran.
 *
 * Anything out of the ordinary gives up (returns undefined) and the row path runs instead, which owns
 * every rule and every error message: a name that occurs twice after flattening or that the service
 * fills itself (both go to the overflow column), nesting over the limit, more distinct names than the
 * request limit. Whether a value must move (a type conflict, a name to clean) is decided by the caller
 * on the summary, as for the row path.
 *
 * Flattened names are resolved through a small trie per batch (object → member → slot), so the
 * prefixed name (`http_method`) and its quoted key are built once per batch, not once per event.
 * Whether a slot's strings are tried as times (its name, docs/time.md) is decided once per batch too;
 * a time is written in its ISO form, and the dataset's time field is checked on every event.
 */
import { eventTimeMs, isoOf, parseTimestamp, type TimeRule } from './eventTime.ts';
import { JSON_KNOWN_TYPES, type EventStamp } from './jsonEvents.ts';
import { isServiceName } from '../names.ts';
import type { TimeGuess } from '../worker/placement.ts';
import type { ColumnType, TimeRange, TypeSummary } from '../../model.ts';

/** One flattened name of the batch: the types seen, the last row that had it. */
interface NameInfo {
  types: ColumnType[];
  mask: number;
  row: number;
}

/** A member of an object at some path: its flattened name, and the members of its nested object. */
interface Slot {
  name: string;
  /** Resolved when the member first holds a value (a member holding objects only is no name). */
  info?: NameInfo;
  prefix: string;
  children?: Map<string, Slot>;
  /** Whether its string values are tried as times (decided once per batch, see TimeGuess). */
  time?: boolean;
}

const TYPE_BITS: Partial<Record<ColumnType, number>> = { VARCHAR: 1, BIGINT: 2, DOUBLE: 4, BOOLEAN: 8, TIMESTAMP: 16 };

/** Thrown inside the walk to give up; never leaves this module. */
const GIVE_UP = Symbol('give up');

/**
 * A parsed number that may not be what was sent: an integral double beyond ±2^53 (an integer literal
 * would have lost digits) or an infinity (a literal beyond the double range). The body's text decides
 * (numbers.ts); normal numbers never get there.
 */
const suspect = (v: number) => !Number.isSafeInteger(v) && (Number.isInteger(v) || !Number.isFinite(v));

class Batch {
  readonly names = new Map<string, NameInfo>();
  /** A number of the batch is suspect (see `suspect`). */
  suspectNumbers = false;
  readonly top = new Map<string, Slot>();
  /** The current event's time from the dataset's time field, once read (NaN until then). */
  rowTimeMs = NaN;
  constructor(
    readonly maxNames: number,
    readonly maxDepth: number,
    readonly guess: TimeGuess | undefined,
    readonly timeField: string | undefined,
  ) {}

  info(name: string): NameInfo {
    let info = this.names.get(name);
    if (info === undefined) {
      if (isServiceName(name) || name === '__proto__' || this.names.size >= this.maxNames) throw GIVE_UP;
      info = { types: [], mask: 0, row: -1 };
      this.names.set(name, info);
    }
    return info;
  }

  slot(members: Map<string, Slot>, prefix: string, key: string): Slot {
    let slot = members.get(key);
    if (slot === undefined) {
      const name = prefix + key;
      slot = { name, prefix: `${name}_` };
      members.set(key, slot);
    }
    return slot;
  }

  leafSlot(members: Map<string, Slot>, prefix: string, key: string): Slot {
    const slot = this.slot(members, prefix, key);
    slot.info ??= this.info(slot.name);
    return slot;
  }
}

/** Marks `info` as present in `row` with a value of `type`; a second value in one row gives up. */
function see(info: NameInfo, row: number, type: ColumnType): void {
  if (info.row === row) throw GIVE_UP;
  info.row = row;
  const bit = TYPE_BITS[type]!;
  if ((info.mask & bit) === 0) {
    info.mask |= bit;
    info.types.push(type);
  }
}

/** Whether nesting inside an array stays within `maxDepth` (the row path reports the error otherwise). */
function withinDepth(b: Batch, value: unknown, depth: number, maxDepth: number): boolean {
  if (typeof value === 'number') {
    if (suspect(value)) b.suspectNumbers = true;
    return true;
  }
  if (value === null || typeof value !== 'object') return true;
  if (depth > maxDepth) return false;
  for (const v of Array.isArray(value) ? value : Object.values(value)) if (!withinDepth(b, v, depth + 1, maxDepth)) return false;
  return true;
}

/** Appends the members of `obj` to `line` (each preceded by a comma), depth-first as flattenEvent walks. */
function walk(b: Batch, obj: Record<string, unknown>, members: Map<string, Slot>, prefix: string, depth: number, row: number, out: Record<string, unknown>): void {
  if (depth > b.maxDepth) throw GIVE_UP;
  const keys = Object.keys(obj);
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i];
    const value = obj[key];
    if (value === null || value === undefined) continue;
    switch (typeof value) {
      case 'string':
        {
          const slot = b.leafSlot(members, prefix, key);
          slot.time ??= slot.name === b.timeField || (b.guess !== undefined && b.guess(slot.name));
          if (slot.time) {
            const ms = parseTimestamp(value);
            if (ms === ms) {
              see(slot.info!, row, 'TIMESTAMP');
              out[slot.name] = isoOf(value, ms);
              if (slot.name === b.timeField) b.rowTimeMs = ms;
              break;
            }
          }
          see(slot.info!, row, 'VARCHAR');
          out[slot.name] = value;
        }
        break;
      case 'number':
        {
          const slot = b.leafSlot(members, prefix, key);
          if (Number.isSafeInteger(value)) see(slot.info!, row, 'BIGINT');
          else {
            if (suspect(value)) b.suspectNumbers = true;
            see(slot.info!, row, 'DOUBLE');
          }
          out[slot.name] = value;
        }
        break;
      case 'boolean':
        {
          const slot = b.leafSlot(members, prefix, key);
          see(slot.info!, row, 'BOOLEAN');
          out[slot.name] = value;
        }
        break;
      default:
        if (Array.isArray(value)) {
          if (!withinDepth(b, value, depth + 1, b.maxDepth)) throw GIVE_UP;
          const slot = b.leafSlot(members, prefix, key);
          see(slot.info!, row, 'VARCHAR');
          out[slot.name] = JSON.stringify(value);
        } else {
          const slot = b.slot(members, prefix, key);
          walk(b, value as Record<string, unknown>, (slot.children ??= new Map()), slot.prefix, depth + 1, row, out);
        }
    }
  }
}

/**
 * Events (already checked to be objects) → WAL lines (without the lone-surrogate fix) and the type
 * summary; undefined when the row path must run (see the module comment).
 */
export function jsonEventsToLines(
  events: Record<string, unknown>[],
  stamp: EventStamp,
  maxDepth: number,
  maxNames: number,
  times: { guess?: TimeGuess; rule?: TimeRule } = {},
): { text: string; types: TypeSummary; suspectNumbers: boolean; timeRange?: TimeRange } | undefined {
  const { rule } = times;
  const b = new Batch(maxNames, maxDepth, times.guess, rule?.field);
  // What every row gets after its own fields, in the order jsonEventsToBatch sets them.
  const stampCols: [string, string][] = [['p_timestamp', stamp.received]];
  if (stamp.meta !== null) stampCols.push(['p_metadata', stamp.meta]);
  if (stamp.tags !== null) stampCols.push(['p_tags', stamp.tags]);
  stampCols.push(['p_src_ip', stamp.srcIp], ['p_user_agent', stamp.userAgent]);
  const stampInfos: [NameInfo, ColumnType][] = [];
  const stampText = stampCols.map(([k, v]) => `,${JSON.stringify(k)}:${JSON.stringify(v)}`).join('');
  const fields = stamp.fields.map(([k, v]): [string, string] => [k, `,${JSON.stringify(k)}:${JSON.stringify(v)}`]);
  let text = '';
  // The range of the events' times in the time field, for the flush (see TimeRange).
  let minMs = Infinity;
  let maxMs = -Infinity;
  try {
    for (let row = 0; row < events.length; row++) {
      const out: Record<string, unknown> = {};
      walk(b, events[row], b.top, '', 1, row, out);
      if (rule !== undefined) {
        // Missing, not a time, too old or too far ahead: eventTimeMs says which, as a 400 naming the field.
        if (!(b.rowTimeMs >= rule.earliestMs && b.rowTimeMs <= rule.latestMs)) b.rowTimeMs = eventTimeMs(out[rule.field], rule, row);
        if (b.rowTimeMs < minMs) minMs = b.rowTimeMs;
        if (b.rowTimeMs > maxMs) maxMs = b.rowTimeMs;
        b.rowTimeMs = NaN;
      }
      if (row === 0) {
        // Service columns cannot come from an event (it would have given up): registered directly.
        for (const [k] of stampCols) {
          const info: NameInfo = { types: [], mask: 0, row: -1 };
          b.names.set(k, info);
          stampInfos.push([info, JSON_KNOWN_TYPES[k]]);
        }
        if (b.names.size > maxNames) return undefined;
      }
      for (let i = 0; i < stampInfos.length; i++) see(stampInfos[i][0], row, stampInfos[i][1]);
      let tail = stampText;
      for (const [k, v] of fields) {
        const info = b.info(k);
        if (info.row === row) continue; // the event's own field of that name wins
        see(info, row, 'VARCHAR');
        tail += v;
      }
      // The row's own fields, then the service's: `{"a":1` + `,"p_timestamp":…}`.
      const own = JSON.stringify(out);
      text += own.length === 2 ? `{${tail.slice(1)}}\n` : `${own.slice(0, -1)}${tail}}\n`;
    }
  } catch (err) {
    if (err === GIVE_UP) return undefined;
    throw err;
  }
  const types: TypeSummary = new Map();
  for (const [name, info] of b.names) if (info.types.length) types.set(name, info.types);
  return { text, types, suspectNumbers: b.suspectNumbers, timeRange: rule !== undefined && events.length ? { minMs, maxMs } : undefined };
}
