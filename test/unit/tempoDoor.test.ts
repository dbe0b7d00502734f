import { describe, expect, it } from 'vitest';
import { parseLogfmt, tagSearchQuery } from '../../src/doors/tempo/search.ts';
import { normalTraceId } from '../../src/doors/tempo/app.ts';
import { anyValue, isoToNanos, traceByIdResponseProto } from '../../src/doors/tempo/otlp.ts';
import { timeRange } from '../../src/doors/tempo/request.ts';
import { parseTraceql } from '../../src/query/traceql/parse.ts';

describe('Tempo door helpers', () => {
  it.each([
    ['service.name=cart', [['service.name', 'cart']]],
    ['a=1 b="two words" c=', [['a', '1'], ['b', 'two words'], ['c', '']]],
    ['  x="say \\"hi\\""  ', [['x', 'say "hi"']]],
    ['', []],
  ])('logfmt %s', (text, pairs) => expect(parseLogfmt(text)).toEqual(pairs));

  it('logfmt that cannot be read is a 400', () => expect(() => parseLogfmt('novalue')).toThrow('tags: cannot read'));

  it('the tag search: tags as substrings, durations on the trace', () => {
    expect(tagSearchQuery('name=GET', '1s', undefined).expr).toEqual({
      op: 'spanset',
      condition: {
        op: 'and',
        left: { op: 'compare', field: { kind: 'intrinsic', name: 'name' }, operator: 'contains', value: { type: 'string', value: 'GET' } },
        right: { op: 'compare', field: { kind: 'intrinsic', name: 'traceDuration' }, operator: '>=', value: { type: 'duration', nanos: 1e9 } },
      },
    });
    expect(tagSearchQuery(undefined, undefined, undefined).expr).toEqual({ op: 'spanset', condition: { op: 'const', value: true } });
    expect(() => tagSearchQuery('', 'soon', undefined)).toThrow('minDuration');
  });

  it.each([
    ['4BF92F3577B34DA6A3CE929D0E0E4736', '4bf92f3577b34da6a3ce929d0e0e4736'],
    ['a3ce929d0e0e4736', '0000000000000000a3ce929d0e0e4736'],
  ])('trace id %s', (id, normal) => expect(normalTraceId(id)).toBe(normal));
  it.each(['', 'xyz', '1'.repeat(33)])('trace id %j is a 400', (id) => expect(() => normalTraceId(id)).toThrow('invalid trace id'));

  it.each([
    ['2026-01-01T00:00:00.65Z', '1767225600650000000'],
    ['2026-01-01T00:00:00.000000001Z', '1767225600000000001'],
    ['2026-01-01T00:00:00Z', '1767225600000000000'],
  ])('event time %s', (iso, nanos) => expect(isoToNanos(iso)).toBe(nanos));

  it.each([
    ['x', { stringValue: 'x' }],
    [3, { intValue: '3' }],
    [1.5, { doubleValue: 1.5 }],
    [false, { boolValue: false }],
    [[1, 'a'], { arrayValue: { values: [{ intValue: '1' }, { stringValue: 'a' }] } }],
    [{ k: true }, { kvlistValue: { values: [{ key: 'k', value: { boolValue: true } }] } }],
  ])('AnyValue of %j', (v, expected) => expect(anyValue(v)).toEqual(expected));

  it.each([0, 5, 127, 128, 300, 70_000])('TraceByIDResponse frames a trace of %i bytes as field 1', (n) => {
    const framed = traceByIdResponseProto(new Uint8Array(n).fill(7));
    expect(framed[0]).toBe(0x0a);
    let len = 0;
    let i = 1;
    for (let shift = 0; ; shift += 7) {
      const b = framed[i++];
      len += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) break;
    }
    expect(len).toBe(n);
    expect(framed.length).toBe(i + n);
  });

  it('start/end are Unix seconds, end inclusive; a default lookback without them', () => {
    expect(timeRange({ start: 10, end: 20 })).toEqual({ startMs: 10_000, endMs: 20_999 });
    expect(timeRange({}, 3_600_000, 10_000_000)).toEqual({ startMs: 6_400_000, endMs: 10_060_000 });
    expect(() => timeRange({ start: 30, end: 20 })).toThrow('start is after end');
  });

  it('deeply nested brackets are refused before parsing', () => {
    expect(() => parseTraceql(`${'('.repeat(100)}{}${')'.repeat(100)}`)).toThrow('nested deeper');
  });
});
