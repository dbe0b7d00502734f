import { describe, expect, it } from 'vitest';
import { flattenEvent } from '../../src/ingest/json/flatten.ts';

describe('flattenEvent', () => {
  it.each([
    ['nested objects join with _', { http: { method: 'GET', req: { bytes: 3 } } }, { http_method: 'GET', http_req_bytes: 3 }],
    ['arrays are kept as JSON text', { tags: ['a', 1, { b: 2 }] }, { tags: '["a",1,{"b":2}]' }],
    ['nulls define no column', { a: null, b: { c: null }, d: 1 }, { d: 1 }],
    ['scalars stay as they are', { s: 'x', n: 1.5, t: true }, { s: 'x', n: 1.5, t: true }],
  ])('%s', (_name, event, row) => {
    expect({ ...flattenEvent(event as Record<string, unknown>, 10) }).toEqual(row);
  });
  it('refuses nesting deeper than the limit', () => {
    expect(() => flattenEvent({ a: { b: { c: { d: 1 } } } }, 3)).toThrow(/deeper than the limit of 3/);
  });
});
