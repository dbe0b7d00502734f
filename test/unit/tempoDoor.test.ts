import { describe, expect, it } from 'vitest';
import { parseLogfmt, tagSearchQuery } from '../../src/doors/tempo/search.ts';
import { normalTraceId } from '../../src/doors/tempo/app.ts';
import { traceByIdResponseProto, tracesDataProto } from '../../src/doors/tempo/otlp.ts';
import { requestClass } from '../../src/ingest/otlp/generated.ts';
import type { Span } from '../../src/query/traces/model.ts';
import { otlpTracesData } from '../../src/query/traces/otlp.ts';
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

  it('protobuf TracesData: the same trace as the OTLP/JSON mapping, ids as bytes', () => {
    const span = (id: string, over: Partial<Span>): Span => ({
      traceId: '0af7651916cd43dd8448eb211c80319c',
      spanId: id,
      parentSpanId: null,
      traceState: null,
      name: 'op',
      kind: 'server',
      startNs: 1_700_000_000_000_000_001n,
      endNs: 1_700_000_000_100_000_000n,
      status: 'error',
      statusMessage: 'boom',
      flags: 1,
      serviceName: 'svc',
      scopeName: 'lib',
      scopeVersion: null,
      resource: { 'service.name': 'svc' },
      attributes: { n: 3, d: 1.5, s: 'x', b: true },
      events: [{ time_unix_nano: '2023-11-14T22:13:20.000000005Z', name: 'e', attributes: { xs: [1, 'a'], m: { k: null } }, dropped_attributes_count: 2 }],
      links: [{ trace_id: '1'.repeat(32), span_id: '2'.repeat(16), trace_state: 'a=b', attributes: { r: 'x' }, flags: 257 }],
      droppedEventsCount: 4,
      ...over,
    });
    const data = otlpTracesData([span('b7ad6b7169203331', {}), span('00f067aa0ba902b7', { parentSpanId: 'b7ad6b7169203331', resource: { 'service.name': 'other' }, links: [] })]);
    const cls = requestClass.traces;
    const decoded = cls.toObject(cls.decode(tracesDataProto(data)), { longs: String, bytes: String });
    // The decoder's ids are base64 and it leaves empty lists out: so normalised, it is the JSON mapping itself.
    const normal = (o: unknown, ids: 'base64' | 'hex'): unknown => {
      if (Array.isArray(o)) return o.map((v) => normal(v, ids));
      if (o === null || typeof o !== 'object') return o;
      const id = (v: unknown) => (ids === 'base64' ? Buffer.from(v as string, 'base64').toString('hex') : v);
      const kept = Object.entries(o).filter(([, v]) => !(Array.isArray(v) && v.length === 0));
      return Object.fromEntries(kept.map(([k, v]) => [k, /^(trace|span|parentSpan)Id$/.test(k) ? id(v) : normal(v, ids)]));
    };
    expect(normal(decoded, 'base64')).toEqual(normal(data, 'hex'));
  });

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
