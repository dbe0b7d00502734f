import { describe, expect, it } from 'vitest';
import { jaegerTrace, jaegerTraceId, references, tag } from '../../src/doors/jaeger/model.ts';
import { parseGoDuration, parseSearch, parseTags } from '../../src/doors/jaeger/params.ts';
import type { Span } from '../../src/query/traces/model.ts';

const TRACE = '0af7651916cd43dd8448eb211c80319c';
const span = (over: Partial<Span> = {}): Span => ({
  traceId: TRACE,
  spanId: 'b7ad6b7169203331',
  parentSpanId: null,
  traceState: null,
  name: 'op',
  kind: 'unspecified',
  startNs: 1_700_000_000_123_456_789n,
  endNs: 1_700_000_000_223_456_789n,
  status: 'unset',
  statusMessage: null,
  flags: 0,
  serviceName: 'svc',
  scopeName: null,
  scopeVersion: null,
  resource: { 'service.name': 'svc' },
  attributes: {},
  events: [],
  links: [],
  ...over,
});

describe('Jaeger trace ids (model.TraceID.String: the high half only when it is not zero)', () => {
  it.each([
    [TRACE, TRACE],
    ['00000000000000008448eb211c80319c', '8448eb211c80319c'],
    ['00000000000000010000000000000000', '00000000000000010000000000000000'],
  ])('%s → %s', (hex, expected) => expect(jaegerTraceId(hex)).toBe(expected));
});

describe('tag types', () => {
  it.each([
    ['s', { key: 'k', type: 'string', value: 's' }],
    [true, { key: 'k', type: 'bool', value: true }],
    [42, { key: 'k', type: 'int64', value: 42 }],
    [1.5, { key: 'k', type: 'float64', value: 1.5 }],
    [[1, 'a'], { key: 'k', type: 'string', value: '[1,"a"]' }],
  ])('%j', (value, expected) => expect(tag('k', value)).toEqual(expected));
});

describe('references: the parent first, then links (the OTLP→Jaeger translation)', () => {
  const parent = 'aaaaaaaaaaaaaaaa';
  const other = '1111111111111111';
  it.each([
    ['no parent, no links', span(), []],
    ['parent', span({ parentSpanId: parent }), [{ refType: 'CHILD_OF', traceID: TRACE, spanID: parent }]],
    [
      'parent and a link to another trace',
      span({ parentSpanId: parent, links: [{ trace_id: '00000000000000000000000000000001', span_id: other }] }),
      [
        { refType: 'CHILD_OF', traceID: TRACE, spanID: parent },
        { refType: 'FOLLOWS_FROM', traceID: '0000000000000001', spanID: other },
      ],
    ],
    ['a link to the parent overrides its type', span({ parentSpanId: parent, links: [{ trace_id: TRACE, span_id: parent }] }), [{ refType: 'FOLLOWS_FROM', traceID: TRACE, spanID: parent }]],
    ['opentracing.ref_type child_of', span({ links: [{ trace_id: TRACE, span_id: other, attributes: { 'opentracing.ref_type': 'child_of' } }] }), [{ refType: 'CHILD_OF', traceID: TRACE, spanID: other }]],
  ])('%s', (_name, s, expected) => expect(references(s)).toEqual(expected));
});

describe('span tags derived from OTLP fields', () => {
  const keys = (s: Span) => jaegerTrace([s]).spans[0].tags.map((t) => `${t.key}=${t.value}`);
  it.each([
    ['plain', span(), []],
    ['scope', span({ scopeName: 'lib', scopeVersion: '1.0' }), ['otel.scope.name=lib', 'otel.scope.version=1.0']],
    ['kind server', span({ kind: 'server' }), ['span.kind=server']],
    ['status ok', span({ status: 'ok' }), ['otel.status_code=OK']],
    ['status error + message', span({ status: 'error', statusMessage: 'boom' }), ['otel.status_code=ERROR', 'error=true', 'otel.status_description=boom']],
    ['trace state', span({ traceState: 'a=b' }), ['w3c.tracestate=a=b']],
    ['attributes before derived tags', span({ attributes: { x: 1 }, kind: 'client' }), ['x=1', 'span.kind=client']],
  ])('%s', (_name, s, expected) => expect(keys(s)).toEqual(expected));
});

describe('a whole trace', () => {
  it('shares identical processes, times in µs, events as logs', () => {
    const a = span({ resource: { 'service.name': 'svc', 'host.name': 'h' }, events: [{ time_unix_nano: '2023-11-14T22:13:20.123457789Z', name: 'ev', attributes: { n: 2 } }] });
    const b = span({ spanId: 'c7ad6b7169203331', resource: { 'service.name': 'svc', 'host.name': 'h' } });
    const c = span({ spanId: 'd7ad6b7169203331', serviceName: 'other', resource: { 'service.name': 'other' } });
    const t = jaegerTrace([a, b, c]);
    expect(t.spans.map((s) => s.processID)).toEqual(['p1', 'p1', 'p2']);
    expect(t.processes).toEqual({ p1: { serviceName: 'svc', tags: [{ key: 'host.name', type: 'string', value: 'h' }] }, p2: { serviceName: 'other', tags: [] } });
    // 1_700_000_000_123_456_789 ns = 1_700_000_000_123_456 µs; the span lasts 100 ms.
    expect([t.spans[0].startTime, t.spans[0].duration]).toEqual([Number(a.startNs / 1000n), Number((a.endNs - a.startNs) / 1000n)]);
    expect(t.spans[0].logs).toEqual([{ timestamp: Date.parse('2023-11-14T22:13:20.123Z') * 1000 + 457, fields: [{ key: 'event', type: 'string', value: 'ev' }, { key: 'n', type: 'int64', value: 2 }] }]);
  });
});

describe("Go durations (time.ParseDuration's grammar)", () => {
  it.each([
    ['0', 0n],
    ['1ns', 1n],
    ['1.5us', 1500n],
    ['2µs', 2000n],
    ['100ms', 100_000_000n],
    ['1h30m', 5_400_000_000_000n],
    ['.5s', 500_000_000n],
    ['10', undefined],
    ['1d', undefined],
    ['', undefined],
  ])('%s', (text, ns) => expect(parseGoDuration(text)).toBe(ns));
});

describe('search parameters', () => {
  const parse = (q: Record<string, string | string[]>) =>
    parseSearch(
      (n) => (Array.isArray(q[n]) ? q[n][0] : (q[n] as string | undefined)),
      (n) => (q[n] === undefined ? [] : ([] as string[]).concat(q[n])),
      3_600_000,
      1_000_000,
    );
  it('service is required', () => expect(() => parse({})).toThrow(/service/));
  it('defaults: the lookback before now, limit 100', () => expect(parse({ service: 's' })).toMatchObject({ window: { startMs: 1_000_000 - 3_600_000, endMs: 1_000_001 }, search: { limit: 100 } }));
  it('start/end in µs', () => expect(parse({ service: 's', start: '5000000', end: '9000000' }).window).toEqual({ startMs: 5000, endMs: 9001 }));
  it('max below min is refused', () => expect(() => parse({ service: 's', minDuration: '2s', maxDuration: '1s' })).toThrow(/maxDuration/));
  it.each([
    [['a:1', 'b:x:y'], [], { a: '1', b: 'x:y' }],
    [[], ['{"a":"1"}', '{"b":"2"}'], { a: '1', b: '2' }],
  ])('tags %j %j', (simple, json, expected) => expect(parseTags(simple, json)).toEqual(expected));
  it.each([[['nocolon'], []], [[], ['[1]']], [[], ['{"a":1}']]])('malformed tags %j %j', (simple, json) => expect(() => parseTags(simple, json)).toThrow());
});
