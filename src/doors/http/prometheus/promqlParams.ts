/**
 * Parameters of the Prometheus HTTP query API, parsed as Prometheus parses them (web/api/v1/api.go):
 * times are Unix seconds (with a fraction) or RFC 3339; durations are seconds (with a fraction) or a
 * Prometheus duration (`1h30m`, `15s`, `1d`). Failures are `PromqlParamError`s: bad_data, 400.
 */

export class PromqlParamError extends Error {}

/** Prometheus' bounds for an open `start`/`end` (the earliest and latest times it can represent, in ms). */
export const MIN_TIME_MS = -9223372036854776;
export const MAX_TIME_MS = 9223372036854775;

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i;

/** A time parameter → epoch ms; `fallback` when absent (or an error naming the parameter). */
export function parseTime(value: string | undefined, name: string, fallback?: number): number {
  if (value === undefined || value === '') {
    if (fallback === undefined) throw new PromqlParamError(`invalid parameter "${name}": missing`);
    return fallback;
  }
  const v = value.trim();
  if (/^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(v)) {
    const seconds = Number(v);
    // Like Go's math.Round(s*1000): ms resolution, half away from zero.
    const ms = Math.sign(seconds) * Math.round(Math.abs(seconds) * 1000);
    if (Number.isFinite(ms)) return Math.min(MAX_TIME_MS, Math.max(MIN_TIME_MS, ms));
  }
  if (RFC3339.test(v)) {
    const ms = Date.parse(v);
    if (!Number.isNaN(ms)) return ms;
  }
  // What Prometheus clients send for "no bound" (Go's time.Time min/max in RFC 3339).
  if (v === '0001-01-01T00:00:00Z' || v === '-292273086-05-16T16:47:06Z') return MIN_TIME_MS;
  if (v === '292277025-08-18T07:12:54.999999999Z') return MAX_TIME_MS;
  throw new PromqlParamError(`invalid parameter "${name}": cannot parse "${value}" to a valid timestamp`);
}

const UNITS: [string, number][] = [
  ['y', 365 * 86_400_000],
  ['w', 7 * 86_400_000],
  ['d', 86_400_000],
  ['h', 3_600_000],
  ['ms', 1],
  ['m', 60_000],
  ['s', 1000],
];

/** A Prometheus duration (`1h30m`, `5m`, `100ms`) → ms, or undefined if it is not one. */
export function parsePromDuration(text: string): number | undefined {
  if (text === '0') return 0;
  const re = /(\d+)(y|w|d|h|ms|m|s)/gy;
  let total = 0;
  let pos = 0;
  let last = -1;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    const rank = UNITS.findIndex(([u]) => u === m![2]);
    // Units must come largest first, each once (as Prometheus' model.ParseDuration requires).
    if (rank <= last) return undefined;
    last = rank;
    total += Number(m[1]) * UNITS[rank][1];
    pos = re.lastIndex;
  }
  return pos === text.length && pos > 0 ? total : undefined;
}

/** A duration parameter (seconds with a fraction, or a Prometheus duration) → ms. */
export function parseDurationParam(value: string | undefined, name: string): number {
  if (value === undefined || value === '') throw new PromqlParamError(`invalid parameter "${name}": missing`);
  const v = value.trim();
  if (/^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(v)) {
    const ms = Math.round(Number(v) * 1000);
    if (Number.isFinite(ms) && Math.abs(ms) < 2 ** 53) return ms;
    throw new PromqlParamError(`invalid parameter "${name}": cannot parse "${value}" to a valid duration. It overflows int64`);
  }
  const d = parsePromDuration(v);
  if (d === undefined) throw new PromqlParamError(`invalid parameter "${name}": cannot parse "${value}" to a valid duration`);
  return d;
}

/** Checks of a range query's bounds and step, with Prometheus' wording. */
export function checkRange(startMs: number, endMs: number, stepMs: number): void {
  if (endMs < startMs) throw new PromqlParamError('invalid parameter "end": end timestamp must not be before start time');
  if (stepMs <= 0) throw new PromqlParamError('invalid parameter "step": zero or negative query resolution step widths are not accepted. Try a positive integer');
  // Prometheus' limit on points per series, so that a mistaken step cannot ask for millions.
  if ((endMs - startMs) / stepMs > 11000) throw new PromqlParamError('exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)');
}
