import type { Json } from '@duckdb/node-api';

type Convert = (v: Json) => Json;

const INT_TYPES = new Set(['BIGINT', 'HUGEINT', 'UBIGINT', 'UHUGEINT']);

/** 64-bit integers become JSON numbers when they fit in a double exactly; otherwise strings. */
function int64(v: Json): Json {
  if (typeof v !== 'string') return v;
  const n = Number(v);
  return Number.isSafeInteger(n) ? n : v;
}

/**
 * DuckDB prints '2026-11-22 23:34:36.12' (trailing zeros dropped, UTC here) → ISO 8601 with at least
 * millisecond digits: '2026-11-22T23:34:36.120Z'; micro/nanosecond digits are kept.
 */
function isoTime(text: string): string {
  const m = /^([^ ]+) (\d{2}:\d{2}:\d{2})(?:\.(\d+))?(.*)$/.exec(text);
  if (!m) return text;
  const frac = (m[3] ?? '').padEnd(3, '0');
  return `${m[1]}T${m[2]}.${frac}${m[4]}`;
}

function timestamp(v: Json): Json {
  return typeof v === 'string' ? `${isoTime(v)}Z` : v;
}

function timestampTz(v: Json): Json {
  if (typeof v !== 'string') return v;
  const iso = isoTime(v);
  return iso.endsWith('+00') ? `${iso.slice(0, -3)}Z` : /[+-]\d{2}$/.test(iso) ? `${iso}:00` : iso;
}

function converterFor(type: string): Convert | undefined {
  if (INT_TYPES.has(type)) return int64;
  if (type.startsWith('DECIMAL')) return (v) => (typeof v === 'string' ? Number(v) : v);
  if (type === 'TIMESTAMP' || type === 'TIMESTAMP_NS' || type === 'TIMESTAMP_MS' || type === 'TIMESTAMP_S') return timestamp;
  if (type === 'TIMESTAMP WITH TIME ZONE') return timestampTz;
  const list = /^(.*)\[\]$/.exec(type);
  if (list) {
    const inner = converterFor(list[1]);
    if (inner) return (v) => (Array.isArray(v) ? v.map(inner) : v);
  }
  return undefined;
}

/**
 * Shapes result rows for JSON: ISO timestamps, safe 64-bit integers as numbers, and (unless
 * `sendNull`) null fields left out of each row, as Parseable does.
 */
export function rowShaper(columnNames: string[], columnTypes: string[], sendNull: boolean) {
  const converters = columnTypes.map(converterFor);
  return (row: Record<string, Json>): Record<string, Json> => {
    const out: Record<string, Json> = {};
    for (let i = 0; i < columnNames.length; i++) {
      const name = columnNames[i];
      const v = row[name];
      if (v === null || v === undefined) {
        if (sendNull) out[name] = null;
        continue;
      }
      const c = converters[i];
      out[name] = c ? c(v) : v;
    }
    return out;
  };
}
