import { addOverflow, isServiceName, setField } from '../names.ts';
import type { FlatRow, FlatValue } from '../../model.ts';
import { invalidInput } from '../../errors.ts';

/**
 * Flattens one JSON event: nested objects become columns joined by `_`
 * (`{"http":{"method":"GET"}}` → `http_method`); arrays are kept whole as JSON text, because their
 * elements are often of mixed types and a list column would reject the next event that differs.
 * Nulls are dropped (a null does not define a column). Nesting deeper than `maxDepth` is a 400.
 *
 * Any name is a field, `constructor` and `__proto__` included (own-property checks, `setField`). A name
 * that occurs twice after flattening (`"a_b"` next to `{"a":{"b":…}}`) or one the service fills itself
 * (`p_timestamp`, …) is kept in the row's overflow, for the `p_overflow` column.
 */
export function flattenEvent(event: Record<string, unknown>, maxDepth: number): FlatRow {
  const out: FlatRow = {};
  const put = (name: string, value: FlatValue) => {
    if (Object.hasOwn(out, name) || isServiceName(name)) addOverflow(out, name, value);
    else setField(out, name, value);
  };
  const walk = (obj: Record<string, unknown>, prefix: string, depth: number): void => {
    if (depth > maxDepth) throw invalidInput(`event nesting is deeper than the limit of ${maxDepth} levels (at "${prefix.slice(0, -1)}")`);
    for (const key of Object.keys(obj)) {
      const value = obj[key];
      const name = prefix + key;
      if (value === null || value === undefined) continue;
      if (Array.isArray(value)) {
        checkDepth(value, depth + 1, maxDepth, name);
        put(name, JSON.stringify(value));
      } else if (typeof value === 'object') {
        walk(value as Record<string, unknown>, `${name}_`, depth + 1);
      } else {
        put(name, value as FlatValue);
      }
    }
  };
  walk(event, '', 1);
  return out;
}

function checkDepth(value: unknown, depth: number, maxDepth: number, at: string): void {
  if (value === null || typeof value !== 'object') return;
  if (depth > maxDepth) throw invalidInput(`event nesting is deeper than the limit of ${maxDepth} levels (at "${at}")`);
  for (const v of Array.isArray(value) ? value : Object.values(value)) checkDepth(v, depth + 1, maxDepth, at);
}

/** A request body: one object or an array of objects; anything else is a 400 naming the problem. */
export function eventsFromJson(body: unknown): Record<string, unknown>[] {
  if (Array.isArray(body)) {
    body.forEach((item, i) => {
      if (item === null || typeof item !== 'object' || Array.isArray(item)) {
        throw invalidInput(`element ${i} of the array is not a JSON object`);
      }
    });
    return body as Record<string, unknown>[];
  }
  if (body !== null && typeof body === 'object') return [body as Record<string, unknown>];
  throw invalidInput('body must be a JSON object or an array of JSON objects');
}
