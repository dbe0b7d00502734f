
const UNIT_MS: Record<string, number> = { s: 1000, sec: 1000, m: 60_000, min: 60_000, h: 3_600_000, hr: 3_600_000, d: 86_400_000, w: 604_800_000 };
import { invalidInput } from '../errors.ts';

/**
 * A query bound as epoch ms. Accepts ISO 8601 (no zone means UTC), `now`, and Parseable's relative
 * forms: `10m`, `1h`, `7d`, `30s`, `2w` (also `now-10m`), meaning that long before now.
 */
export function parseTimeBound(text: string, field: string, now = Date.now()): number {
  const t = text.trim();
  if (t.toLowerCase() === 'now') return now;
  const rel = /^(?:now\s*-\s*)?(\d+)\s*(s|sec|m|min|h|hr|d|w)$/i.exec(t);
  if (rel) return now - Number(rel[1]) * UNIT_MS[rel[2].toLowerCase()];
  const iso = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?$/i.exec(t);
  if (iso) {
    const withZone = iso[1] ? t : `${t.includes(':') ? t : `${t}T00:00:00`}Z`;
    const ms = Date.parse(withZone.replace(' ', 'T'));
    if (!Number.isNaN(ms)) return ms;
  }
  throw invalidInput(`${field} "${text}" is not an ISO 8601 time, "now", or a relative time like "10m"`);
}

/** `TIMESTAMP '…'` literal (UTC) for an epoch-ms bound. */
export function timestampLiteral(ms: number): string {
  return `TIMESTAMP '${new Date(ms).toISOString().replace('T', ' ').replace('Z', '')}'`;
}
