/** Time ranges of the console: relative (`15m` back from now) or absolute, kept in the URL as text. */

export interface TimeRange {
  /** `15m`, `1h`, … (relative, ends now) or an ISO time. */
  from: string;
  /** `now` or an ISO time. */
  to: string;
}

export const RELATIVE_PRESETS = ['5m', '15m', '30m', '1h', '3h', '6h', '12h', '24h', '2d', '7d', '30d'] as const;

const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** Epoch ms of a bound: `now`, a relative duration back from now (`15m`, `now-15m`), or ISO (no zone = UTC). */
export function resolveBound(text: string, now: number): number {
  const t = text.trim();
  if (t === 'now') return now;
  const rel = /^(?:now-)?(\d+)([smhdw])$/.exec(t);
  if (rel) return now - Number(rel[1]) * UNIT_MS[rel[2]];
  const ms = parseTimestamp(t);
  if (ms === undefined) throw new Error(`"${text}" is not a time: use 15m, now, or an ISO time`);
  return ms;
}

export function resolveRange(r: TimeRange, now = Date.now()): { startMs: number; endMs: number } {
  const startMs = resolveBound(r.from, now);
  const endMs = resolveBound(r.to, now);
  if (startMs >= endMs) throw new Error('the start of the time range must be before its end');
  return { startMs, endMs };
}

/**
 * Epoch ms of a timestamp as the API returns it: ISO with `Z` or an offset, or zone-less (Parseable's
 * layout, meaning UTC), with any number of fraction digits (nanoseconds are cut to ms).
 */
export function parseTimestamp(v: unknown): number | undefined {
  if (typeof v === 'number') return Number.isFinite(v) ? v : undefined;
  if (typeof v !== 'string') return undefined;
  const m = /^(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2}(?::\d{2})?)(?:\.(\d+))?)?(Z|[+-]\d{2}:?\d{2})?$/i.exec(v.trim());
  if (!m) return undefined;
  const frac = m[3] ? `.${m[3].slice(0, 3).padEnd(3, '0')}` : '';
  const zone = m[4] ? (m[4].toUpperCase() === 'Z' ? 'Z' : m[4].length === 5 ? `${m[4].slice(0, 3)}:${m[4].slice(3)}` : m[4]) : 'Z';
  const ms = Date.parse(`${m[1]}T${m[2] ?? '00:00'}${m[2] && m[2].length === 5 ? ':00' : ''}${frac}${zone}`);
  return Number.isNaN(ms) ? undefined : ms;
}

/** Nanoseconds since the epoch of an API timestamp, keeping digits past the millisecond. */
export function parseTimestampNs(v: unknown): bigint | undefined {
  const ms = parseTimestamp(v);
  if (ms === undefined) return undefined;
  const frac = typeof v === 'string' ? /\.(\d+)/.exec(v)?.[1] ?? '' : '';
  const subMs = frac.length > 3 ? BigInt(frac.slice(3, 9).padEnd(6, '0')) : 0n;
  return BigInt(ms) * 1_000_000n + subMs;
}

/** Bucket sizes a histogram may use, in seconds: "nice" steps a person reads at a glance. */
export const BUCKETS_S = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800];

/** The smallest nice bucket that splits the range into at most `maxBars` bars. */
export function autoBucketSeconds(startMs: number, endMs: number, maxBars = 80): number {
  const span = Math.max(1, (endMs - startMs) / 1000);
  return BUCKETS_S.find((b) => span / b <= maxBars) ?? BUCKETS_S[BUCKETS_S.length - 1];
}

/**
 * The histogram's bars: every bucket of [startMs, endMs) on the epoch's grid (empty ones as zero, so
 * bars sit where their time is), counted from rows of `t` (a bucket's start) and `n` as
 * sql.ts `histogramSql` answers. Times in epoch seconds.
 */
export function histogramBars(rows: { t?: unknown; n?: unknown }[], startMs: number, endMs: number, bucket: number): { times: number[]; counts: number[] } {
  const byT = new Map(rows.map((r) => [Math.floor((parseTimestamp(r.t) ?? 0) / 1000), Number(r.n)]));
  const times: number[] = [];
  const counts: number[] = [];
  for (let t = Math.floor(startMs / 1000 / bucket) * bucket; t < endMs / 1000; t += bucket) {
    times.push(t);
    counts.push(byT.get(t) ?? 0);
  }
  return { times, counts };
}

export function formatBucket(seconds: number): string {
  if (seconds % 86400 === 0) return `${seconds / 86400}d`;
  if (seconds % 3600 === 0) return `${seconds / 3600}h`;
  if (seconds % 60 === 0) return `${seconds / 60}m`;
  return `${seconds}s`;
}

export function describeRange(r: TimeRange): string {
  if (r.to === 'now' && /^\d+[smhdw]$/.test(r.from)) return `Last ${r.from}`;
  const fmt = (s: string) => (s === 'now' ? 'now' : formatTime(resolveBound(s, Date.now())));
  return `${fmt(r.from)} → ${fmt(r.to)}`;
}

/** `2026-11-23 10:04:05` in UTC (the data's zone; the API speaks UTC). */
export function formatTime(ms: number, withMs = false): string {
  const iso = new Date(ms).toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11, withMs ? 23 : 19)}`;
}

export function formatDurationNs(ns: number): string {
  if (!Number.isFinite(ns)) return '—';
  if (ns < 1_000) return `${ns} ns`;
  if (ns < 1_000_000) return `${(ns / 1_000).toFixed(1)} µs`;
  if (ns < 1_000_000_000) return `${(ns / 1_000_000).toFixed(ns < 10_000_000 ? 2 : 1)} ms`;
  return `${(ns / 1_000_000_000).toFixed(2)} s`;
}
