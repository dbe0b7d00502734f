/**
 * Timestamps in JSON events (docs/time.md): the rule that says whether a string is a time, the names
 * under which a new string field is typed TIMESTAMP, and the check of a dataset's time field. Run by
 * the ingest workers on every event of a dataset with a time field, so parsing is by character codes,
 * without a regular expression or a Date object on the common path.
 *
 * Accepted (the forms Parseable reads, seconds required, fraction optional, cut to milliseconds):
 * - RFC 3339 / ISO 8601: `2026-11-25T10:00:00Z`, `…T10:00:00.123456+02:00`, `…+0200`, with `T`, `t`
 *   or a space between date and time; without a zone the time is UTC (`2026-11-25 10:00:00.123`);
 * - RFC 2822: `Wed, 25 Nov 2026 10:00:00 +0200` (also `GMT`, `UT`, `Z` and the US zones).
 * Epoch numbers are not times: Parseable refuses them in its time partition and never infers them.
 */
import { invalidInput } from '../../errors.ts';

/**
 * Parseable's parts of a field name that make a new string field holding a time a TIMESTAMP column
 * (`TIME_FIELD_NAME_PARTS` in its event/format): `created_at`, `event_time`, `ts`, `end`, …
 */
export const TIME_NAME_PARTS = ['time', 'date', 'created', 'received', 'ingested', 'collected', 'start', 'end', 'ts', 'dt'] as const;

/** Whether a (flattened) field name is one whose string values are tried as times. */
export function isTimeName(name: string): boolean {
  const lower = name.toLowerCase();
  for (const part of TIME_NAME_PARTS) if (lower.includes(part)) return true;
  return false;
}

/** Parseable's default of X-P-Time-Partition-Limit: events older than this many days are refused. */
export const DEFAULT_TIME_LIMIT_DAYS = 30;

const DAY_MS = 86_400_000;
const EARLIEST_MS = new Date(Date.UTC(2000, 0, 1)).setUTCFullYear(1);
const LATEST_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

/** Two decimal digits at `i`, or NaN. */
function two(s: string, i: number): number {
  const a = s.charCodeAt(i) - 48;
  const b = s.charCodeAt(i + 1) - 48;
  return a >= 0 && a <= 9 && b >= 0 && b <= 9 ? a * 10 + b : NaN;
}

function daysIn(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

/** Epoch ms of a UTC wall time already checked to be valid (years 1–9999). */
function utcMs(year: number, month: number, day: number, hour: number, minute: number, second: number, ms: number): number {
  if (year >= 100) return Date.UTC(year, month - 1, day, hour, minute, second, ms);
  // Date.UTC reads years 0–99 as 1900–1999: set the year apart (2000 is a leap year, as the day was checked).
  return new Date(Date.UTC(2000, month - 1, day, hour, minute, second, ms)).setUTCFullYear(year);
}

/**
 * An ISO time's optional fraction at `i` (`.` or `,`, 1 to 9 digits, of which milliseconds keep the first
 * three): its milliseconds and where it ends; undefined if it is malformed.
 */
function fraction(s: string, i: number): { ms: number; end: number } | undefined {
  const dot = s.charCodeAt(i);
  if (dot !== 46 && dot !== 44) return { ms: 0, end: i };
  let ms = 0;
  let digits = 0;
  for (i++; i < s.length; i++, digits++) {
    const d = s.charCodeAt(i) - 48;
    if (d < 0 || d > 9) break;
    if (digits < 3) ms = ms * 10 + d;
  }
  if (digits === 0 || digits > 9) return undefined;
  for (let k = digits; k < 3; k++) ms *= 10;
  return { ms, end: i };
}

/** The zone at `i` to the end (none, `Z`, `±HH:MM` or `±HHMM`) as minutes east of UTC; NaN if malformed. */
function zoneOffset(s: string, i: number): number {
  const n = s.length;
  if (i === n) return 0;
  const z = s.charCodeAt(i);
  if ((z === 90 || z === 122) && i + 1 === n) return 0;
  if (!((z === 43 || z === 45) && (i + 6 === n || i + 5 === n))) return NaN;
  const oh = two(s, i + 1);
  const colon = i + 6 === n;
  if (colon && s.charCodeAt(i + 3) !== 58) return NaN;
  const om = two(s, colon ? i + 4 : i + 3);
  if (!(oh <= 23 && om <= 59)) return NaN;
  return (z === 43 ? 1 : -1) * (oh * 60 + om);
}

/** `YYYY-MM-DD[T ]HH:MM:SS[.f][Z|±HH:MM|±HHMM]`, as epoch ms; NaN if it is not one. */
function parseIso(s: string): number {
  const n = s.length;
  if (n < 19 || s.charCodeAt(4) !== 45 || s.charCodeAt(7) !== 45 || s.charCodeAt(13) !== 58 || s.charCodeAt(16) !== 58) return NaN;
  const sep = s.charCodeAt(10);
  if (sep !== 84 && sep !== 116 && sep !== 32) return NaN; // T, t, space
  const year = two(s, 0) * 100 + two(s, 2);
  const month = two(s, 5);
  const day = two(s, 8);
  const hour = two(s, 11);
  const minute = two(s, 14);
  const second = two(s, 17);
  if (!(year >= 1 && month >= 1 && month <= 12 && day >= 1 && day <= daysIn(year, month) && hour <= 23 && minute <= 59 && second <= 59)) return NaN;
  const frac = fraction(s, 19);
  if (frac === undefined) return NaN;
  const offsetMin = zoneOffset(s, frac.end);
  if (Number.isNaN(offsetMin)) return NaN;
  const ms = frac.ms;
  return utcMs(year, month, day, hour, minute, second, ms) - offsetMin * 60_000;
}

const MONTHS: Record<string, number> = { jan: 1, feb: 2, mar: 3, apr: 4, may: 5, jun: 6, jul: 7, aug: 8, sep: 9, oct: 10, nov: 11, dec: 12 };
const RFC2822_ZONES: Record<string, number> = { ut: 0, gmt: 0, z: 0, est: -300, edt: -240, cst: -360, cdt: -300, mst: -420, mdt: -360, pst: -480, pdt: -420 };
const RFC2822 = /^(?:(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun),\s*)?(\d{1,2})\s+([A-Za-z]{3})\s+(\d{4})\s+(\d{2}):(\d{2})(?::(\d{2}))?\s+([+-]\d{4}|[A-Za-z]{1,3})$/i;

/** RFC 2822's date-time, as epoch ms; NaN if it is not one. */
function parseRfc2822(s: string): number {
  const m = RFC2822.exec(s);
  if (!m) return NaN;
  const month = MONTHS[m[2].toLowerCase()];
  const [day, year, hour, minute] = [Number(m[1]), Number(m[3]), Number(m[4]), Number(m[5])];
  const second = m[6] === undefined ? 0 : Number(m[6]);
  if (!(month && year >= 1 && day >= 1 && day <= daysIn(year, month) && hour <= 23 && minute <= 59 && second <= 59)) return NaN;
  const zone = m[7];
  let offsetMin: number;
  if (zone[0] === '+' || zone[0] === '-') {
    const oh = Number(zone.slice(1, 3));
    const om = Number(zone.slice(3, 5));
    if (oh > 23 || om > 59) return NaN;
    offsetMin = (zone[0] === '+' ? 1 : -1) * (oh * 60 + om);
  } else {
    const known = RFC2822_ZONES[zone.toLowerCase()];
    if (known === undefined) return NaN;
    offsetMin = known;
  }
  return utcMs(year, month, day, hour, minute, second, 0) - offsetMin * 60_000;
}

/** Epoch milliseconds of a timestamp string in one of the accepted forms, or NaN. */
export function parseTimestamp(s: string): number {
  const ms = s.charCodeAt(4) === 45 ? parseIso(s) : s.length <= 40 ? parseRfc2822(s) : NaN;
  // A zone offset can carry a time past the years a TIMESTAMP column holds.
  return ms >= EARLIEST_MS && ms <= LATEST_MS ? ms : NaN;
}

/**
 * How a stored TIMESTAMP value travels to the WAL: ISO 8601 UTC with milliseconds. An input already in
 * that form is kept as it is (no new string).
 */
export function isoOf(s: string, ms: number): string {
  return s.length === 24 && s.charCodeAt(23) === 90 && s.charCodeAt(10) === 84 && s.charCodeAt(19) === 46 ? s : new Date(ms).toISOString();
}

/** What the worker checks on a dataset's time field (docs/time.md). */
export interface TimeRule {
  /** The field (its flattened name, which is also its column). */
  field: string;
  /** Events earlier than this (epoch ms) are refused: the receive time less X-P-Time-Partition-Limit. */
  earliestMs: number;
  /** As days, for the message. */
  limitDays: number;
  /** Events later than this (epoch ms) are refused: the receive time plus P_EVENT_TIME_FUTURE_LIMIT. */
  latestMs: number;
  /** P_EVENT_TIME_FUTURE_LIMIT in ms, for the message. */
  futureMs: number;
}

/** The default of P_EVENT_TIME_FUTURE_LIMIT: a clock an hour ahead still gets its events in. */
export const DEFAULT_FUTURE_LIMIT_MS = 3_600_000;

export function timeFieldRule(field: string, limitDays: number | undefined, receivedMs: number, futureMs = DEFAULT_FUTURE_LIMIT_MS): TimeRule {
  const days = limitDays ?? DEFAULT_TIME_LIMIT_DAYS;
  return { field, limitDays: days, earliestMs: receivedMs - days * DAY_MS, latestMs: receivedMs + futureMs, futureMs };
}

/**
 * The event's time from its time field, as epoch ms; a 400 naming the field when it is missing, not a
 * string, not a time, older than the limit or later than the future limit (nothing of the request is stored).
 */
export function eventTimeMs(value: unknown, rule: TimeRule, index: number): number {
  const at = `event ${index}: time field "${rule.field}"`;
  if (value === undefined || value === null) throw invalidInput(`${at} is missing (the dataset's time partition; every event must carry it)`);
  if (typeof value !== 'string') throw invalidInput(`${at} is a ${Array.isArray(value) ? 'list' : typeof value}, not a timestamp string like "2026-11-25T10:00:00Z"`);
  const ms = parseTimestamp(value);
  if (Number.isNaN(ms)) throw invalidInput(`${at} holds "${value.slice(0, 64)}", which is not a timestamp (RFC 3339, "YYYY-MM-DD HH:MM:SS[.fff]" or RFC 2822)`);
  if (ms < rule.earliestMs) throw invalidInput(`${at} holds ${value.slice(0, 64)}, more than ${rule.limitDays} days ago (the dataset's time partition limit)`);
  // Bounded into the future too: every hour holding events is a file of its own (issue 30 A10).
  if (ms > rule.latestMs) throw invalidInput(`${at} holds ${value.slice(0, 64)}, more than ${rule.futureMs / 1000} s after the request was received (P_EVENT_TIME_FUTURE_LIMIT)`);
  return ms;
}

/** The event's time as the ISO string to store (see eventTimeMs for the refusals). */
export function eventTime(value: unknown, rule: TimeRule, index: number): string {
  return isoOf(value as string, eventTimeMs(value, rule, index));
}
