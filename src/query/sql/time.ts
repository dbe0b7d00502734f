import { invalidInput } from '../../errors.ts';

const UNIT_MS: Record<string, number> = { s: 1000, sec: 1000, m: 60_000, min: 60_000, h: 3_600_000, hr: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** Bounds a query may name: years 1 to 9999 (a relative bound beyond them is a client error, not a 500). */
const EARLIEST_MS = new Date('0001-01-01T00:00:00Z').getTime();
const LATEST_MS = new Date('9999-12-31T23:59:59.999Z').getTime();

const ISO = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?)?(Z|[+-]\d{2}:?\d{2})?$/i;

/**
 * A query bound as epoch ms. Accepts ISO 8601 (no zone means UTC), `now`, and Parseable's relative
 * forms: `10m`, `1h`, `7d`, `30s`, `2w` (also `now-10m`), meaning that long before now. Dates that do
 * not exist (`2026-02-30`, hour 24) and bounds outside years 1–9999 are refused.
 */
export function parseTimeBound(text: string, field: string, now = Date.now()): number {
  const t = text.trim();
  const bad = (why: string) => invalidInput(`${field} "${text}" ${why}`);
  if (t.toLowerCase() === 'now') return now;
  const rel = /^(?:now\s*-\s*)?(\d{1,15})\s*(s|sec|m|min|h|hr|d|w)$/i.exec(t);
  if (rel) {
    const ms = now - Number(rel[1]) * UNIT_MS[rel[2].toLowerCase()];
    if (!(ms >= EARLIEST_MS)) throw bad('reaches before the year 1');
    return ms;
  }
  const m = ISO.exec(t);
  if (!m) throw bad('is not an ISO 8601 time, "now", or a relative time like "10m"');
  const [year, month, day, hour = 0, minute = 0, second = 0] = m.slice(1, 7).map((v) => (v === undefined ? undefined : Number(v))) as number[];
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, 0);
  if (date.getUTCFullYear() !== year || date.getUTCMonth() !== month - 1 || date.getUTCDate() !== day || date.getUTCHours() !== hour || date.getUTCMinutes() !== minute || date.getUTCSeconds() !== second) {
    throw bad('is not a real date and time');
  }
  let ms = date.getTime() + (m[7] ? Number(m[7].slice(0, 3).padEnd(3, '0')) : 0);
  const zone = m[8];
  if (zone && zone.toUpperCase() !== 'Z') {
    const z = /^([+-])(\d{2}):?(\d{2})$/.exec(zone)!;
    const offset = (Number(z[2]) * 60 + Number(z[3])) * 60_000;
    if (Number(z[2]) > 23 || Number(z[3]) > 59) throw bad('has an invalid time zone offset');
    ms -= (z[1] === '+' ? 1 : -1) * offset;
  }
  if (ms < EARLIEST_MS || ms > LATEST_MS) throw bad('is outside the years 1–9999');
  return ms;
}
