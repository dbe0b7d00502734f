/*
 * The JSON of the series, labels and label values answers, as the engine writes them (promql/engine.go
 * runMeta): label sets sorted as Prometheus' labels.Compare, names and values as Go's slices.Sort
 * (UTF-8 byte order), `limit` cutting after the sort with Prometheus' warning, and strings escaped as
 * Go's encoders escape them (`<`, `>`, `&`, U+2028 and U+2029 as \u sequences), so that an answer from
 * the in-process label index is the same bytes as the engine's.
 */

/** A label set: its (name, non-empty value) pairs sorted by name. */
export type Pairs = readonly (readonly [string, string])[];

/** A UTF-16 code unit remapped so that comparing the units compares the code points (UTF-8 order). */
const unitKey = (u: number) => (u >= 0xe000 ? u - 0x800 : u >= 0xd800 ? u + 0x2000 : u);

/** Go's string order (bytes of UTF-8, which is code point order) for JavaScript strings. */
export function compareUtf8(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return x < 0xd800 && y < 0xd800 ? x - y : unitKey(x) - unitKey(y);
  }
  return a.length - b.length;
}

/** Prometheus' labels.Compare: pair by pair, name then value; a prefix first. */
export function compareLabels(a: Pairs, b: Pairs): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    if (a[i][0] !== b[i][0]) return compareUtf8(a[i][0], b[i][0]);
    if (a[i][1] !== b[i][1]) return compareUtf8(a[i][1], b[i][1]);
  }
  return a.length - b.length;
}

const GO_ESCAPES: Record<string, string> = { '<': '\\u003c', '>': '\\u003e', '&': '\\u0026', '\u2028': '\\u2028', '\u2029': '\\u2029' };

/** A JSON string as Go's encoding/json (and jsoniter's standard-library configuration) writes it. */
export function goJsonString(s: string): string {
  return JSON.stringify(s).replace(/[<>&\u2028\u2029]/g, (c) => GO_ESCAPES[c]);
}

const TRUNCATED = ',"warnings":["results truncated due to limit"]';

/** The series answer: the label sets (already distinct), sorted, at most `limit` of them. */
export function seriesJson(sets: Pairs[], limit: number | undefined): string {
  const sorted = [...sets].sort(compareLabels);
  const n = limit && limit > 0 && sorted.length > limit ? limit : sorted.length;
  const items: string[] = [];
  for (let i = 0; i < n; i++) items.push(`{${sorted[i].map(([k, v]) => `${goJsonString(k)}:${goJsonString(v)}`).join(',')}}`);
  return `{"status":"success","data":[${items.join(',')}]${n < sorted.length ? TRUNCATED : ''}}`;
}

/** The labels or label values answer: the distinct strings, sorted, at most `limit` of them. */
export function stringsJson(values: Iterable<string>, limit: number | undefined): string {
  const sorted = [...values].sort(compareUtf8);
  const n = limit && limit > 0 && sorted.length > limit ? limit : sorted.length;
  return `{"status":"success","data":[${sorted.slice(0, n).map(goJsonString).join(',')}]${n < sorted.length ? TRUNCATED : ''}}`;
}
