import {
  DuckDBTypeId,
  JsonDuckDBValueConverter,
  type DuckDBTimestampNanosecondsValue,
  type DuckDBTimestampTZValue,
  type DuckDBTimestampValue,
  type DuckDBValueConverter,
  type Json,
} from '@duckdb/node-api';
import type { TimeFormat } from '../worker/protocol.ts';

/**
 * Result values → JSON, by DuckDB type id (the library's JSON converter for everything but the cases
 * below, which it renders in ways clients do not expect):
 * - 64-bit and wider integers: JSON numbers when they fit a double exactly, else strings;
 * - DECIMAL: numbers;
 * - timestamps: ISO 8601 UTC with at least millisecond digits (micro/nanoseconds kept when present),
 *   with `Z`, or zone-less (Parseable's layout) when asked;
 * - non-finite doubles: the strings "NaN", "Infinity", "-Infinity" (the library already does this).
 */

const MS_PER_DAY_LIMIT = 8_640_000_000_000_000n; // JS Date range in ms

function isoFromMicros(micros: bigint, subMicroDigits: string, zone: string): string | undefined {
  let ms = micros / 1000n;
  let rest = micros % 1000n;
  if (rest < 0n) {
    rest += 1000n;
    ms -= 1n;
  }
  if (ms > MS_PER_DAY_LIMIT || ms < -MS_PER_DAY_LIMIT) return undefined;
  const base = new Date(Number(ms)).toISOString().slice(0, -1);
  const extra = rest === 0n && !subMicroDigits ? '' : String(rest).padStart(3, '0') + subMicroDigits;
  return `${base}${extra}${zone}`;
}

function timestampConverter(format: TimeFormat): DuckDBValueConverter<Json> {
  const zone = format === 'iso' ? 'Z' : '';
  const micros = (v: { micros: bigint; isFinite: boolean; toString(): string }) => (v.isFinite ? (isoFromMicros(v.micros, '', zone) ?? v.toString()) : v.toString());
  return (value, type, converter) => {
    if (value === null) return null;
    switch (type.typeId) {
      case DuckDBTypeId.TIMESTAMP:
      case DuckDBTypeId.TIMESTAMP_TZ:
        return micros(value as DuckDBTimestampValue | DuckDBTimestampTZValue);
      case DuckDBTypeId.TIMESTAMP_MS:
      case DuckDBTypeId.TIMESTAMP_S:
        // The library's values for these carry millis / seconds; its string form is exact enough.
        return (JsonDuckDBValueConverter(value, type, converter) as string).replace(' ', 'T') + zone;
      case DuckDBTypeId.TIMESTAMP_NS: {
        const v = value as DuckDBTimestampNanosecondsValue;
        if (!v.isFinite) return v.toString();
        let us = v.nanos / 1000n;
        let ns = v.nanos % 1000n;
        if (ns < 0n) {
          ns += 1000n;
          us -= 1n;
        }
        return isoFromMicros(us, ns === 0n ? '' : String(ns).padStart(3, '0'), zone) ?? v.toString();
      }
      case DuckDBTypeId.BIGINT:
      case DuckDBTypeId.UBIGINT:
      case DuckDBTypeId.HUGEINT:
      case DuckDBTypeId.UHUGEINT: {
        const n = Number(value as bigint);
        return Number.isSafeInteger(n) ? n : String(value);
      }
      case DuckDBTypeId.DECIMAL:
        return Number(JsonDuckDBValueConverter(value, type, converter));
      default:
        return JsonDuckDBValueConverter(value, type, converter);
    }
  };
}

const converters: Record<TimeFormat, DuckDBValueConverter<Json>> = { iso: timestampConverter('iso'), naive: timestampConverter('naive') };

export const valueConverter = (format: TimeFormat): DuckDBValueConverter<Json> => converters[format];

/**
 * Result column names as Parseable (DataFusion) names them where DuckDB differs, so dashboards
 * written against Parseable find their columns: an unaliased `count(*)` is `count(*)`.
 */
export function clientColumnName(name: string): string {
  return name === 'count_star()' ? 'count(*)' : name;
}

/**
 * One row as JSON text: null fields left out unless `sendNull` (as Parseable does). Keys are the
 * client column names; a name the result has twice appears twice (JSON parsers keep the last).
 */
export function rowWriter(columns: string[], sendNull: boolean): (row: (Json | null)[]) => string {
  const keys = columns.map((c) => JSON.stringify(c));
  return (row) => {
    let out = '{';
    let first = true;
    for (let i = 0; i < keys.length; i++) {
      const v = row[i];
      if (v === null || v === undefined) {
        if (!sendNull) continue;
      }
      out += `${first ? '' : ','}${keys[i]}:${JSON.stringify(v ?? null)}`;
      first = false;
    }
    return `${out}}`;
  };
}
