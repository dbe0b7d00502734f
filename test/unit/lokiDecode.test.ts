import { createRequire } from 'node:module';
import protobuf from 'protobufjs';
import snappy from 'snappy';
import { describe, expect, it } from 'vitest';
import { decodePush, nanosToIso, parseLabels } from '../../src/ingest/loki/decode.ts';

// winston-loki's own generated Loki protobuf types: an encoder written independently of ours.
const require = createRequire(import.meta.url);
const { logproto } = require('winston-loki/src/proto/index.js') as { logproto: { PushRequest: { encode: (m: unknown) => { finish: () => Uint8Array } } } };

const MAX = 1 << 20;
const events = (body: Buffer, type?: string) => decodePush(body, type, MAX).map((e) => JSON.parse(e) as Record<string, string>);

describe('parseLabels', () => {
  it.each([
    ['{}', []],
    ['{job="app"}', [['job', 'app']]],
    ['{job="app", level="info"}', [['job', 'app'], ['level', 'info']]],
    ['{ msg="a \\"quoted\\" \\\\ value" }', [['msg', 'a "quoted" \\ value']]],
    ['{k="v,w",x="="}', [['k', 'v,w'], ['x', '=']]],
  ])('%s', (text, pairs) => {
    expect(parseLabels(text)).toEqual(pairs);
  });
  it.each(['job="app"', '{job=app}', '{job="app" level="x"}', '{="x"}'])('refuses %s', (text) => {
    expect(() => parseLabels(text)).toThrow(/stream labels/);
  });
});

describe('nanosToIso', () => {
  it.each([
    [0n, '1970-01-01T00:00:00.000000000Z'],
    [1_764_324_000_123_456_789n, new Date(1_764_324_000_123).toISOString().slice(0, 19) + '.123456789Z'],
  ])('%s', (ns, iso) => expect(nanosToIso(ns)).toBe(iso));
});

describe('decodePush', () => {
  it('JSON: labels and structured metadata become fields, the line and the ns time', () => {
    const body = { streams: [{ stream: { job: 'app' }, values: [['1764324000123456789', 'hello', { trace_id: 't1' }], ['1764324001000000000', 'world']] }] };
    expect(events(Buffer.from(JSON.stringify(body)), 'application/json')).toEqual([
      { job: 'app', trace_id: 't1', line: 'hello', timestamp: nanosToIso(1_764_324_000_123_456_789n) },
      { job: 'app', line: 'world', timestamp: nanosToIso(1_764_324_001_000_000_000n) },
    ]);
  });

  it('protobuf + snappy, encoded by winston-loki\'s types', () => {
    const msg = { streams: [{ labels: '{job="app", host="h1"}', entries: [{ timestamp: { seconds: 1764324000, nanos: 5 }, line: 'a' }, { timestamp: { seconds: 1764324001, nanos: 0 }, line: 'b' }] }] };
    const body = snappy.compressSync(Buffer.from(logproto.PushRequest.encode(msg).finish()));
    expect(events(body, 'application/x-protobuf')).toEqual([
      { job: 'app', host: 'h1', line: 'a', timestamp: nanosToIso(1_764_324_000_000_000_005n) },
      { job: 'app', host: 'h1', line: 'b', timestamp: nanosToIso(1_764_324_001_000_000_000n) },
    ]);
  });

  it('protobuf structured metadata (field 3 of an entry, written field by field here)', () => {
    // PushRequest{streams:[{labels, entries:[{timestamp{seconds,nanos}, line, structuredMetadata:[{name,value}]}]}]}
    const w = protobuf.Writer.create();
    w.uint32((1 << 3) | 2).fork();
    w.uint32((1 << 3) | 2).string('{job="app"}');
    w.uint32((2 << 3) | 2).fork();
    w.uint32((1 << 3) | 2).fork().uint32((1 << 3) | 0).int64(1764324000).uint32((2 << 3) | 0).int32(42).ldelim();
    w.uint32((2 << 3) | 2).string('with metadata');
    w.uint32((3 << 3) | 2).fork().uint32((1 << 3) | 2).string('trace_id').uint32((2 << 3) | 2).string('abc').ldelim();
    w.ldelim();
    w.ldelim();
    const body = snappy.compressSync(Buffer.from(w.finish()));
    expect(events(body, 'application/x-protobuf')).toEqual([{ job: 'app', trace_id: 'abc', line: 'with metadata', timestamp: nanosToIso(1_764_324_000_000_000_042n) }]);
  });

  it.each([
    ['JSON that is not JSON', Buffer.from('{"streams": ['), 'application/json', /malformed JSON/],
    ['JSON without streams', Buffer.from('{"x": 1}'), 'application/json', /not a Loki push request/],
    ['a timestamp that is not nanoseconds', Buffer.from(JSON.stringify({ streams: [{ stream: {}, values: [['1.5', 'x']] }] })), 'application/json', /not a Loki push request/],
    ['protobuf without snappy', Buffer.from([0x0a, 0x02, 0x0a, 0x00]), 'application/x-protobuf', /snappy/],
    ['snappy of bytes that are not protobuf', snappy.compressSync(Buffer.from([0xff, 0xff, 0xff])), 'application/x-protobuf', /protobuf/],
    ['a snappy length over the limit', Buffer.from([0xff, 0xff, 0xff, 0xff, 0x0f, 0x00]), 'application/x-protobuf', /over the limit/],
  ])('%s is refused whole', (_name, body, type, message) => {
    expect(() => decodePush(body, type, MAX)).toThrow(message);
  });
});
