import { invalidInput } from '../../errors.ts';
import { SPAN_KIND_NAMES, type SpanKind } from '../../query/traces/model.ts';
import type { TraceSearch } from '../../query/traces/sql.ts';
import type { TimeWindow } from '../../query/traces/store.ts';

/** Go's time.ParseDuration units in nanoseconds (Jaeger's minDuration/maxDuration are Go durations). */
const GO_UNITS: Record<string, number> = { ns: 1, us: 1e3, µs: 1e3, μs: 1e3, ms: 1e6, s: 1e9, m: 60e9, h: 3600e9 };

/** A Go duration (`1.5s`, `100ms`, `1h30m`, `0`) in nanoseconds; undefined when not one. */
export function parseGoDuration(text: string): bigint | undefined {
  const s = text.trim();
  if (s === '0') return 0n;
  if (!/^(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|μs|ms|s|m|h)(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))*$/.test(s)) return undefined;
  let total = 0;
  for (const m of s.matchAll(/(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/g)) total += Number(m[1]) * GO_UNITS[m[2]];
  return BigInt(Math.round(total));
}

/** Jaeger's span kinds are OTel's, lower case; an empty one means any. */
export function parseSpanKind(text: string | undefined): SpanKind | undefined {
  if (text === undefined || text === '') return undefined;
  if (!SPAN_KIND_NAMES.includes(text as SpanKind)) throw invalidInput(`unsupported span kind: '${text}'`);
  return text as SpanKind;
}

const integer = (name: string, text: string | undefined): number | undefined => {
  if (text === undefined || text === '') return undefined;
  if (!/^-?\d+$/.test(text.trim())) throw invalidInput(`unable to parse param '${name}': not an integer: ${text.slice(0, 40)}`);
  return Number(text);
};

/** `tag=k:v` (repeated) and `tags={"k":"v"}` (JSON), as Jaeger's query parser reads them. */
export function parseTags(simple: string[], json: string[]): Record<string, string> {
  const tags: Record<string, string> = {};
  for (const t of simple) {
    const at = t.indexOf(':');
    if (at < 0) throw invalidInput(`malformed 'tag' parameter, expecting key:value, received: ${t}`);
    tags[t.slice(0, at)] = t.slice(at + 1);
  }
  for (const text of json) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw invalidInput("malformed 'tags' parameter, cannot unmarshal JSON");
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw invalidInput("malformed 'tags' parameter: expected a JSON object");
    for (const [k, v] of Object.entries(parsed)) {
      if (typeof v !== 'string') throw invalidInput(`malformed 'tags' parameter: the value of ${k} is not a string`);
      tags[k] = v;
    }
  }
  return tags;
}

export interface SearchParams {
  window: TimeWindow;
  search: TraceSearch & { service: string };
}

/**
 * `/api/traces`'s search parameters as Jaeger reads them: `start`/`end` in µs (default: the trace lookback
 * before now, and now), `limit` (default 100), Go durations; `lookback` is the UI's and is ignored, as Jaeger does.
 */
export function parseSearch(q: (name: string) => string | undefined, all: (name: string) => string[], lookbackMs: number, now = Date.now()): SearchParams {
  const service = q('service') ?? '';
  if (service === '') throw invalidInput("parameter 'service' is required");
  const endUs = integer('end', q('end')) ?? now * 1000;
  const startUs = integer('start', q('start')) ?? (now - lookbackMs) * 1000;
  const duration = (name: string) => {
    const text = q(name);
    if (text === undefined || text === '') return undefined;
    const ns = parseGoDuration(text);
    if (ns === undefined) throw invalidInput(`unable to parse param '${name}': time: invalid duration "${text.slice(0, 40)}"`);
    return ns === 0n ? undefined : ns;
  };
  const minDurationNs = duration('minDuration');
  const maxDurationNs = duration('maxDuration');
  if (minDurationNs !== undefined && maxDurationNs !== undefined && maxDurationNs < minDurationNs) throw invalidInput("'maxDuration' should be greater than 'minDuration'");
  const operation = q('operation') || undefined;
  return {
    // Microseconds bound span start times; the window is in ms, end exclusive: one more ms keeps `end` itself.
    window: { startMs: Math.floor(startUs / 1000), endMs: Math.floor(endUs / 1000) + 1 },
    search: { service, operation, tags: parseTags(all('tag'), all('tags')), minDurationNs, maxDurationNs, limit: integer('limit', q('limit')) || 100 },
  };
}
