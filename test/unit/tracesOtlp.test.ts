import { describe, expect, it } from 'vitest';
import { spanRows } from '../../src/ingest/otlp/traces.ts';
import { Rejections } from '../../src/ingest/otlp/values.ts';
import { spanFromRow } from '../../src/query/traces/model.ts';
import { isoToNs, otlpTracesData } from '../../src/query/traces/otlp.ts';

/**
 * The one stored-spans → OTLP/JSON mapping (Jaeger's /api/v3, Tempo's trace by id), checked by a round
 * trip: an OTLP/JSON request as a client sends it goes through the OTLP ingest's row conversion and the
 * traces store's row reader, and the mapping must give the request back. The request is the reference,
 * written as proto3's JSON mapping writes it (a field at its default — 0, "", an empty list — left out);
 * where the store cannot keep a value, the row says what comes back instead (docs/traces.md "Attribute
 * types").
 */

type Json = Record<string, unknown>;
const TRACE = '0af7651916cd43dd8448eb211c80319c';
const START = '1700000000000000000';

const baseSpan = (): Json => ({
  traceId: TRACE,
  spanId: 'b7ad6b7169203331',
  name: 'op',
  kind: 2,
  startTimeUnixNano: START,
  endTimeUnixNano: '1700000000100000000',
  status: {},
});

const request = (spans: Json[], resource: Json[] = [{ key: 'service.name', value: { stringValue: 'svc' } }], scope: Json = { name: 'lib', version: '1.0' }) => ({
  resourceSpans: [{ resource: { attributes: resource }, scopeSpans: [{ scope, spans }] }],
});

/** Ingest's rows read back as the store reads them (the query adds the start and end as nanosecond text). */
function roundTrip(req: Json) {
  const rows = spanRows(req, { receivedAt: '2024-01-01T00:00:00.000000000Z', rejections: new Rejections() }) as Record<string, unknown>[];
  const spans = rows.map((row, i) => {
    const sent = (req.resourceSpans as { scopeSpans: { spans: Json[] }[] }[]).flatMap((r) => r.scopeSpans.flatMap((s) => s.spans))[i];
    return spanFromRow({ ...row, '@start_ns': sent.startTimeUnixNano, '@end_ns': sent.endTimeUnixNano });
  });
  return otlpTracesData(spans);
}

const kv = (key: string, value: Json) => ({ key, value });
const arr = (...values: Json[]) => ({ arrayValue: { values } });
const event = (over: Json = {}) => ({ timeUnixNano: '1700000000050000001', name: 'e', ...over });
const link = (over: Json = {}) => ({ traceId: '1'.repeat(32), spanId: '2'.repeat(16), ...over });
const base64Of = (hexText: string) => Buffer.from(hexText, 'hex').toString('base64');

describe('stored spans → OTLP/JSON: what a client sent comes back', () => {
  it.each<[string, Json, Json?]>([
    ['parent, trace state, span flags, kind', { parentSpanId: '00f067aa0ba902b7', traceState: 'k=v', flags: 257, kind: 5 }],
    ['status error with its message', { status: { code: 2, message: 'card declined' } }],
    ['status ok', { status: { code: 1 } }],
    ['kind unspecified, no attributes, events or links: all left out', { kind: undefined }],
    ['scalar span attributes: string, bool, int, double', { attributes: [kv('s', { stringValue: 'x' }), kv('b', { boolValue: true }), kv('i', { intValue: '42' }), kv('d', { doubleValue: 1.5 })] }],
    ['events: time to the nanosecond, name, attributes', { events: [event({ attributes: [kv('items', { intValue: '3' }), kv('cached', { boolValue: true })] }), event({ name: 'second', timeUnixNano: '1700000000060000000' })] }],
    ['event attribute: array', { events: [event({ attributes: [kv('list', arr({ intValue: '1' }, { stringValue: 'a' }, { doubleValue: 0.5 }, { boolValue: false }))] })] }],
    ['event attribute: kvlist with an array inside', { events: [event({ attributes: [kv('map', { kvlistValue: { values: [kv('k', { stringValue: 'v' }), kv('xs', arr({ intValue: '2' }))] } })] })] }],
    ['event attribute sent without a value', { events: [event({ attributes: [kv('empty', {})] })] }],
    ['dropped counts: span, events, links, an event', { droppedAttributesCount: 2, droppedEventsCount: 3, droppedLinksCount: 4, events: [event({ droppedAttributesCount: 1 })] }],
    ['links: trace state, flags, array and kvlist attributes', { links: [link({ traceState: 'a=b', flags: 769, attributes: [kv('xs', arr({ stringValue: 'p' })), kv('m', { kvlistValue: { values: [kv('n', { intValue: '1' })] } })] }), link()] }],
    // What the store cannot keep (docs/traces.md): the third column is what comes back instead.
    ['limit: an integral double is an int', { attributes: [kv('d', { doubleValue: 2 })] }, { attributes: [kv('d', { intValue: '2' })] }],
    ['limit: an int64 beyond a JS number is its decimal text', { attributes: [kv('big', { intValue: '9007199254740993' })] }, { attributes: [kv('big', { stringValue: '9007199254740993' })] }],
    ['limit: bytes are hex text', { attributes: [kv('raw', { bytesValue: base64Of('0102ff') })] }, { attributes: [kv('raw', { stringValue: '0102ff' })] }],
    ['limit: an array span attribute (a column) is JSON text', { attributes: [kv('xs', arr({ intValue: '1' }, { stringValue: 'a' }))] }, { attributes: [kv('xs', { stringValue: '[1,"a"]' })] }],
  ])('%s', (_name, sent, back) => {
    const span = { ...baseSpan(), ...sent };
    expect(roundTrip(request([span]))).toEqual(request([{ ...span, ...back }]));
  });

  it('grouped by resource, then scope, in the order they first appear', () => {
    const span = (id: string) => ({ ...baseSpan(), spanId: id.repeat(16) });
    const res = (name: string) => [kv('service.name', { stringValue: name })];
    const sent = {
      resourceSpans: [
        { resource: { attributes: res('a') }, scopeSpans: [{ scope: { name: 'x' }, spans: [span('1'), span('2')] }, { scope: { name: 'y', version: '2' }, spans: [span('3')] }] },
        { resource: { attributes: [...res('b'), kv('host.name', { stringValue: 'h' })] }, scopeSpans: [{ scope: {}, spans: [span('4')] }] },
      ],
    };
    expect(roundTrip(sent)).toEqual(sent);
  });
});

describe('isoToNs: stored event times back to nanoseconds', () => {
  // Expected values computed independently: whole seconds from Date.UTC, the fraction digits padded to nine.
  const utc = (s: string) => BigInt(Date.parse(s)) * 1_000_000n;
  it.each([
    ['2026-01-01T00:00:00.65Z', utc('2026-01-01T00:00:00Z') + 650_000_000n],
    ['2026-01-01T00:00:00.000000001Z', utc('2026-01-01T00:00:00Z') + 1n],
    ['2026-01-01T00:00:00Z', utc('2026-01-01T00:00:00Z')],
    ['2026-01-01T01:00:00.5+01:00', utc('2026-01-01T00:00:00Z') + 500_000_000n],
  ])('%s', (iso, ns) => expect(isoToNs(iso)).toBe(ns));
});
