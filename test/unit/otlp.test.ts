import { createGzip, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, ValueType, trace, type HrTime } from '@opentelemetry/api';
import { SeverityNumber } from '@opentelemetry/api-logs';
import {
  JsonLogsSerializer,
  JsonMetricsSerializer,
  JsonTraceSerializer,
  ProtobufLogsSerializer,
  ProtobufMetricsSerializer,
  ProtobufTraceSerializer,
} from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { InMemoryLogRecordExporter, LoggerProvider, SimpleLogRecordProcessor, type ReadableLogRecord } from '@opentelemetry/sdk-logs';
import {
  AggregationTemporality,
  AggregationType,
  DataPointType,
  MeterProvider,
  MetricReader,
  type ResourceMetrics,
} from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { DomainError } from '../../src/errors.ts';
import { OVERFLOW } from '../../src/model.ts';
import { STATUS } from '../../src/doors/http/errors.ts';

/** A domain error with the HTTP status the edge would answer. */
type HttpError = DomainError & { status: number };
const withStatus = (err: DomainError): HttpError => Object.assign(err, { status: STATUS[err.kind] });
import { decodeBody, decodeOtlp, encodeOtlpResponse, OTLP_TIME_COLUMN, otlpFormat, type OtlpDecoded, type OtlpFormat, type OtlpSignal } from '../../src/ingest/otlp/index.ts';
import { requestClass, responseClass } from '../../src/ingest/otlp/generated.ts';

// ---------------------------------------------------------------------------------------------------
// helpers

const buf = (bytes: Uint8Array | undefined): Buffer => {
  if (bytes === undefined) throw new Error('serializer returned nothing');
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
};

/** Decodes with both encodings and checks they agree, so every assertion covers protobuf and JSON. */
function decodeBoth(signal: OtlpSignal, proto: Uint8Array | undefined, json: Uint8Array | undefined, now?: Date): OtlpDecoded {
  const fromProto = decodeOtlp(signal, 'protobuf', buf(proto), now);
  const fromJson = decodeOtlp(signal, 'json', buf(json), now);
  expect(fromJson).toEqual(fromProto);
  return fromProto;
}

const protoRequest = (signal: OtlpSignal, object: object): Buffer => {
  const cls = requestClass[signal];
  return buf(cls.encode(cls.fromObject(object)).finish());
};

const jsonBody = (object: unknown): Buffer => Buffer.from(JSON.stringify(object));

function httpError(fn: () => unknown): HttpError {
  try {
    fn();
  } catch (err) {
    if (err instanceof DomainError) return withStatus(err);
    throw err;
  }
  throw new Error('expected an HttpError');
}

// 2026-11-28T10:00:00Z
const T0 = 1795860000;
const iso = (seconds: number, nanos: number) =>
  `${new Date(seconds * 1000).toISOString().slice(0, 19)}.${String(nanos).padStart(9, '0')}Z`;
const nanosText = (seconds: number, nanos: number) => (BigInt(seconds) * 1_000_000_000n + BigInt(nanos)).toString();

const TRACE_ID = '5b8efff798038103d269b633813fc60c';
const SPAN_ID = 'eee19b7ec3c1b174';

const resource = resourceFromAttributes({ 'service.name': 'checkout', 'host.name': 'web-1', shared: 'resource' });

// ---------------------------------------------------------------------------------------------------
// content type and body encoding

describe('otlpFormat', () => {
  it('maps the OTLP content types, ignoring parameters and case', () => {
    expect(otlpFormat('application/json')).toBe('json');
    expect(otlpFormat('application/json; charset=utf-8')).toBe('json');
    expect(otlpFormat('Application/X-Protobuf')).toBe('protobuf');
    expect(otlpFormat('application/x-protobuf;foo=bar')).toBe('protobuf');
    expect(otlpFormat('application/protobuf')).toBe('protobuf');
  });

  it('rejects anything else with 415', () => {
    for (const ct of [undefined, '', 'text/plain', 'application/xml', 'application/jsonx', 'multipart/form-data']) {
      expect(httpError(() => otlpFormat(ct)).status).toBe(415);
    }
  });
});

describe('decodeBody', () => {
  const payload = Buffer.from('{"resourceLogs":[]}'.repeat(100));

  it('passes identity bodies through and gunzips gzip ones', () => {
    expect(decodeBody(payload, undefined, 1 << 20)).toBe(payload);
    expect(decodeBody(payload, 'identity', 1 << 20)).toBe(payload);
    expect(decodeBody(gzipSync(payload), 'gzip', 1 << 20).equals(payload)).toBe(true);
    expect(decodeBody(gzipSync(payload), ' GZIP ', 1 << 20).equals(payload)).toBe(true);
  });

  it('round-trips a gzipped OTLP request end to end', () => {
    const body = protoRequest('logs', { resourceLogs: [{ scopeLogs: [{ logRecords: [{ body: { stringValue: 'zipped' } }] }] }] });
    const decoded = decodeOtlp('logs', 'protobuf', decodeBody(gzipSync(body), 'gzip', 1 << 20));
    expect(decoded.rows.map((r) => r.body)).toEqual(['zipped']);
  });

  it('rejects other encodings with 415', () => {
    for (const enc of ['br', 'deflate', 'zstd', 'gzip, br']) expect(httpError(() => decodeBody(payload, enc, 1 << 20)).status).toBe(415);
  });

  it('rejects corrupt and truncated gzip with 400', () => {
    expect(httpError(() => decodeBody(Buffer.from('not gzip at all'), 'gzip', 1 << 20)).status).toBe(400);
    const zipped = gzipSync(payload);
    expect(httpError(() => decodeBody(zipped.subarray(0, zipped.length - 10), 'gzip', 1 << 20)).status).toBe(400);
  });

  it('rejects bodies over the limit with 413, compressed or not', () => {
    expect(httpError(() => decodeBody(payload, undefined, 100)).status).toBe(413);
    expect(httpError(() => decodeBody(gzipSync(payload), 'gzip', 100)).status).toBe(413);
    expect(decodeBody(gzipSync(payload), 'gzip', payload.length).length).toBe(payload.length);
  });

  it('stops a gzip bomb at the limit without inflating it', async () => {
    // 200 MB of zeros, compressed in a stream so the test never holds the 200 MB itself.
    const gz = createGzip({ level: 9 });
    const parts: Buffer[] = [];
    gz.on('data', (c: Buffer) => parts.push(c));
    const done = new Promise((resolve) => gz.on('end', resolve));
    const chunk = Buffer.alloc(1 << 20);
    for (let i = 0; i < 200; i++) gz.write(chunk);
    gz.end();
    await done;
    const bomb = Buffer.concat(parts);
    expect(bomb.length).toBeLessThan(1 << 20);

    const started = performance.now();
    const err = httpError(() => decodeBody(bomb, 'gzip', 1 << 20));
    const elapsed = performance.now() - started;
    expect(err.status).toBe(413);
    expect(elapsed).toBeLessThan(500);
  });
});

// ---------------------------------------------------------------------------------------------------
// logs

async function sdkLogs(): Promise<ReadableLogRecord[]> {
  const exporter = new InMemoryLogRecordExporter();
  const provider = new LoggerProvider({ resource, processors: [new SimpleLogRecordProcessor(exporter)] });
  const logger = provider.getLogger('checkout.logger', '1.2.3');
  const spanContext = trace.setSpanContext(ROOT_CONTEXT, { traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: TraceFlags.SAMPLED });
  logger.emit({
    timestamp: [T0, 123456789] as HrTime,
    observedTimestamp: [T0 + 1, 5] as HrTime,
    severityNumber: SeverityNumber.WARN,
    severityText: 'WARN',
    body: 'payment declined',
    eventName: 'payment.declined',
    attributes: { 'http.status_code': 402, retry: false, ratio: 0.25, tags: ['a', 'b'], shared: 'record' },
    context: spanContext,
  });
  logger.emit({
    timestamp: [T0, 999999999] as HrTime,
    observedTimestamp: [T0, 999999999] as HrTime,
    severityNumber: SeverityNumber.INFO,
    body: { order: { id: 7, items: ['x'] } },
  });
  await provider.forceFlush();
  return exporter.getFinishedLogRecords();
}

describe('logs', () => {
  it('decodes SDK log records from protobuf and JSON to the same exact rows', async () => {
    const records = await sdkLogs();
    const decoded = decodeBoth('logs', ProtobufLogsSerializer.serializeRequest(records), JsonLogsSerializer.serializeRequest(records));
    expect(decoded.timeColumn).toBe('time_unix_nano');
    expect(decoded.rejected).toBe(0);
    expect(decoded.rejectionMessage).toBeUndefined();
    expect(decoded.rows).toHaveLength(2);
    expect(decoded.rows[0]).toEqual({
      'service.name': 'checkout',
      'host.name': 'web-1',
      shared: 'record',
      'http.status_code': 402,
      retry: false,
      ratio: 0.25,
      tags: '["a","b"]',
      resource_schema_url: null,
      resource_dropped_attributes_count: 0,
      scope_name: 'checkout.logger',
      scope_version: '1.2.3',
      scope_schema_url: null,
      scope_dropped_attributes_count: 0,
      time_unix_nano: '2026-11-28T10:00:00.123456789Z',
      observed_time_unix_nano: '2026-11-28T10:00:01.000000005Z',
      severity_number: 13,
      severity_text: 'WARN',
      body: 'payment declined',
      trace_id: TRACE_ID,
      span_id: SPAN_ID,
      flags: 1,
      dropped_attributes_count: 0,
      event_name: 'payment.declined',
    });
    expect(decoded.rows[1]).toMatchObject({
      shared: 'resource',
      time_unix_nano: '2026-11-28T10:00:00.999999999Z',
      severity_number: 9,
      severity_text: null,
      body: '{"order":{"id":7,"items":["x"]}}',
      trace_id: null,
      span_id: null,
      event_name: null,
    });
    expect(decoded.knownTypes).toMatchObject({
      time_unix_nano: 'TIMESTAMP_NS',
      observed_time_unix_nano: 'TIMESTAMP_NS',
      severity_number: 'BIGINT',
      body: 'VARCHAR',
      trace_id: 'VARCHAR',
      flags: 'BIGINT',
      scope_name: 'VARCHAR',
      resource_dropped_attributes_count: 'BIGINT',
    });
    // Attribute columns are left to the storage layer's inference.
    expect(decoded.knownTypes['service.name']).toBeUndefined();
    expect(decoded.knownTypes['http.status_code']).toBeUndefined();
  });

  it('gives record attributes precedence over scope over resource, and fixed columns over all', () => {
    const kv = (key: string, value: string) => ({ key, value: { stringValue: value } });
    const request = {
      resourceLogs: [
        {
          resource: { attributes: [kv('k', 'resource'), kv('rs', 'resource'), kv('r', 'resource'), kv('body', 'not the body')], droppedAttributesCount: 2 },
          schemaUrl: 'https://opentelemetry.io/schemas/1.26.0',
          scopeLogs: [
            {
              scope: { name: 'sc', version: 'v9', attributes: [kv('k', 'scope'), kv('rs', 'scope'), kv('s', 'scope')], droppedAttributesCount: 1 },
              schemaUrl: 'https://example.com/scope',
              logRecords: [{ attributes: [kv('k', 'record'), { key: 'unset', value: {} }, kv('', 'no key')], body: { stringValue: 'b' } }],
            },
          ],
        },
      ],
    };
    const now = new Date('2026-01-02T03:04:05.678Z');
    const fromJson = decodeOtlp('logs', 'json', jsonBody(request), now);
    const fromProto = decodeOtlp('logs', 'protobuf', protoRequest('logs', request), now);
    expect(fromJson).toEqual(fromProto);
    expect(fromJson.rows).toEqual([
      {
        k: 'record',
        rs: 'scope',
        r: 'resource',
        s: 'scope',
        body: 'b',
        resource_schema_url: 'https://opentelemetry.io/schemas/1.26.0',
        resource_dropped_attributes_count: 2,
        scope_name: 'sc',
        scope_version: 'v9',
        scope_schema_url: 'https://example.com/scope',
        scope_dropped_attributes_count: 1,
        // No time at all: the receive time, with nanosecond digits.
        time_unix_nano: '2026-01-02T03:04:05.678000000Z',
        observed_time_unix_nano: null,
        severity_number: 0,
        severity_text: null,
        trace_id: null,
        span_id: null,
        flags: 0,
        dropped_attributes_count: 0,
        event_name: null,
        // An attribute with an empty key cannot name a column: it is kept for the p_overflow column.
        [OVERFLOW]: [['', 'no key']],
      },
    ]);
  });

  it('falls back to the observed time when a record has no time', () => {
    const request = { resourceLogs: [{ scopeLogs: [{ logRecords: [{ observedTimeUnixNano: nanosText(T0, 42), timeUnixNano: '0' }] }] }] };
    for (const [format, body] of [['json', jsonBody(request)], ['protobuf', protoRequest('logs', request)]] as const) {
      const row = decodeOtlp('logs', format, body).rows[0];
      expect(row.time_unix_nano).toBe(iso(T0, 42));
      expect(row.observed_time_unix_nano).toBe(iso(T0, 42));
    }
  });

  it('maps every AnyValue kind', () => {
    const attributes = [
      { key: 's', value: { stringValue: 'text' } },
      { key: 'b', value: { boolValue: true } },
      { key: 'i', value: { intValue: '-42' } },
      { key: 'big', value: { intValue: '9223372036854775807' } },
      { key: 'neg_big', value: { intValue: '-9007199254740993' } },
      { key: 'd', value: { doubleValue: 1.5 } },
      { key: 'nan', value: { doubleValue: 'NaN' } },
      { key: 'inf', value: { doubleValue: '-Infinity' } },
      { key: 'bytes', value: { bytesValue: Buffer.from([0xde, 0xad, 0xbe, 0xef]).toString('base64') } },
      { key: 'arr', value: { arrayValue: { values: [{ intValue: '1' }, { stringValue: 'two' }, { arrayValue: { values: [{ boolValue: false }] } }] } } },
      { key: 'map', value: { kvlistValue: { values: [{ key: 'a', value: { doubleValue: 2.5 } }, { key: 'b', value: { kvlistValue: { values: [] } } }] } } },
    ];
    const request = { resourceLogs: [{ scopeLogs: [{ logRecords: [{ timeUnixNano: nanosText(T0, 1), attributes, body: { intValue: '7' } }] }] }] };
    const json = decodeOtlp('logs', 'json', jsonBody(request));
    // The generated fromObject wants base64 for bytes, which is what OTLP/JSON uses for AnyValue bytes.
    const proto = decodeOtlp('logs', 'protobuf', protoRequest('logs', request));
    expect(json).toEqual(proto);
    expect(json.rows[0]).toMatchObject({
      s: 'text',
      b: true,
      i: -42,
      big: '9223372036854775807',
      neg_big: '-9007199254740993',
      d: 1.5,
      nan: NaN,
      inf: -Infinity,
      bytes: 'deadbeef',
      arr: '[1,"two",[false]]',
      map: '{"a":2.5,"b":{}}',
      body: '7',
    });
  });

  it('accepts OTLP/JSON quirks: bare 64-bit numbers, enum names, snake_case keys, upper-case hex', () => {
    const text = `{"resource_logs":[{"scope_logs":[{"log_records":[{
      "time_unix_nano": ${nanosText(T0, 123456789)},
      "severityNumber": "SEVERITY_NUMBER_ERROR",
      "trace_id": "${TRACE_ID.toUpperCase()}",
      "spanId": "${SPAN_ID}",
      "attributes": [{"key":"n","value":{"int_value": 12345678901234567}}, {"key":"f","value":{"doubleValue": 1.12345678901234567}}],
      "body": {"string_value": "snake"}
    }]}]}]}`;
    const row = decodeOtlp('logs', 'json', Buffer.from(text)).rows[0];
    expect(row).toMatchObject({
      time_unix_nano: '2026-11-28T10:00:00.123456789Z',
      severity_number: 17,
      trace_id: TRACE_ID,
      span_id: SPAN_ID,
      n: '12345678901234567',
      f: 1.1234567890123457,
      body: 'snake',
    });
  });

  it('keeps bare 64-bit numbers exact without touching digits inside strings or doubles', () => {
    const tricky = JSON.stringify('quote \" then 1795860000123456789 and a backslash \\');
    const text = `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":1795860000123456789,"observedTimeUnixNano": 1795860000000000001,
      "body":{"stringValue":${tricky}},
      "attributes":[
        {"key":"neg","value":{"intValue":-9223372036854775808}},
        {"key":"max","value":{"intValue":9223372036854775807}},
        {"key":"safe","value":{"intValue":9007199254740991}},
        {"key":"frac","value":{"doubleValue":12345678901234567.5}},
        {"key":"exp","value":{"doubleValue":1.5e-1234567890123456}},
        {"key":"12345678901234567890","value":{"stringValue":"12345678901234567890"}}
      ]}]}]}]}`;
    const row = decodeOtlp('logs', 'json', Buffer.from(text)).rows[0];
    expect(row).toMatchObject({
      time_unix_nano: '2026-11-28T10:00:00.123456789Z',
      observed_time_unix_nano: '2026-11-28T10:00:00.000000001Z',
      body: 'quote " then 1795860000123456789 and a backslash \\',
      neg: '-9223372036854775808',
      max: '9223372036854775807',
      safe: 9007199254740991,
      frac: 12345678901234568,
      exp: 0,
      '12345678901234567890': '12345678901234567890',
    });
  });

  it('rejects only the records with bad ids and says why', () => {
    const good = { body: { stringValue: 'ok' }, traceId: TRACE_ID, spanId: SPAN_ID };
    const json = {
      resourceLogs: [
        {
          scopeLogs: [
            {
              logRecords: [
                good,
                { body: { stringValue: 'base64 id' }, traceId: Buffer.from(TRACE_ID, 'hex').toString('base64') },
                { body: { stringValue: 'short span id' }, spanId: 'abcd' },
                { body: { stringValue: 'no ids' } },
              ],
            },
          ],
        },
      ],
    };
    const decoded = decodeOtlp('logs', 'json', jsonBody(json));
    expect(decoded.rows.map((r) => r.body)).toEqual(['ok', 'no ids']);
    expect(decoded.rejected).toBe(2);
    expect(decoded.rejectionMessage).toMatch(/^2 log records were rejected; first: resourceLogs\[0\]\.scopeLogs\[0\]\.logRecords\[1\]: trace_id .* is not hex/);

    const proto = protoRequest('logs', {
      resourceLogs: [
        {
          scopeLogs: [
            {
              logRecords: [
                { body: { stringValue: 'ok' }, traceId: Buffer.from(TRACE_ID, 'hex'), spanId: Buffer.from(SPAN_ID, 'hex') },
                { body: { stringValue: 'bad' }, traceId: Buffer.from([1, 2, 3]) },
              ],
            },
          ],
        },
      ],
    });
    const fromProto = decodeOtlp('logs', 'protobuf', proto);
    expect(fromProto.rows).toHaveLength(1);
    expect(fromProto.rows[0]).toMatchObject({ trace_id: TRACE_ID, span_id: SPAN_ID });
    expect(fromProto.rejected).toBe(1);
    expect(fromProto.rejectionMessage).toContain('trace_id is 3 bytes, expected 16');
  });

  it('turns invalid UTF-8 in protobuf strings into replacement characters', () => {
    const body = protoRequest('logs', {
      resourceLogs: [{ scopeLogs: [{ logRecords: [{ body: { stringValue: 'a<XYZ>b' }, attributes: [{ key: 'k', value: { stringValue: '<XYZ>' } }] }] }] }],
    });
    // Replace every "XYZ" with an encoded UTF-16 surrogate (ED A0 80), which is not valid UTF-8.
    for (let i = body.indexOf('XYZ'); i >= 0; i = body.indexOf('XYZ', i)) body.set([0xed, 0xa0, 0x80], i);
    const row = decodeOtlp('logs', 'protobuf', body).rows[0];
    for (const value of [row.body, row.k] as string[]) {
      expect(value).toMatch(/^a?<\ufffd+>b?$/);
      expect(Buffer.from(value, 'utf8').toString('utf8')).toBe(value);
    }
  });

  it('makes lone surrogates from JSON escapes well formed', () => {
    const row = decodeOtlp('logs', 'json', Buffer.from('{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"x\\ud800y"}}]}]}]}')).rows[0];
    expect(row.body).toBe('x\ufffdy');
  });

  it('answers 400 for bodies that cannot be parsed', () => {
    const valid = protoRequest('logs', {
      resourceLogs: [{ resource: { attributes: [{ key: 'service.name', value: { stringValue: 'checkout' } }] }, scopeLogs: [{ logRecords: [{ body: { stringValue: 'hello world' } }] }] }],
    });
    for (let cut = 1; cut < valid.length; cut++) {
      // Cutting a protobuf between two top-level fields yields a shorter valid message; any other cut is an error.
      let status = 0;
      try {
        decodeOtlp('logs', 'protobuf', valid.subarray(0, cut));
      } catch (err) {
        status = STATUS[(err as DomainError).kind];
      }
      expect(status, `cut at ${cut}`).toBe(400);
    }
    const err = httpError(() => decodeOtlp('logs', 'protobuf', Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01])));
    expect(err.status).toBe(400);
    expect(err.message).toMatch(/not a valid OTLP protobuf log record export request/);

    expect(httpError(() => decodeOtlp('logs', 'json', Buffer.from('{"resourceLogs": ['))).status).toBe(400);
    expect(httpError(() => decodeOtlp('logs', 'json', Buffer.from('[]'))).status).toBe(400);
    const shape = httpError(() => decodeOtlp('logs', 'json', jsonBody({ resourceLogs: [{ scopeLogs: [{ logRecords: [{ timeUnixNano: 'yesterday' }] }] }] })));
    expect(shape.status).toBe(400);
    expect(shape.message).toContain('resourceLogs[0].scopeLogs[0].logRecords[0].timeUnixNano');
    expect(httpError(() => decodeOtlp('logs', 'json', jsonBody({ resourceLogs: 5 }))).status).toBe(400);
    expect(httpError(() => decodeOtlp('logs', 'json', jsonBody({ resourceLogs: [{ scopeLogs: [{ logRecords: [{ attributes: [{ key: 'k', value: { boolValue: 'yes' } }] }] }] }] }))).status).toBe(400);
  });

  it('answers 400 for absurdly nested values', () => {
    let value: unknown = { stringValue: 'deep' };
    for (let i = 0; i < 100; i++) value = { arrayValue: { values: [value] } };
    const request = { resourceLogs: [{ scopeLogs: [{ logRecords: [{ body: value }] }] }] };
    expect(httpError(() => decodeOtlp('logs', 'json', jsonBody(request))).status).toBe(400);
    // 40 AnyValue levels (past the service's 32): within protobufjs' own limit of 100 message levels,
    // which the encoder building this body would otherwise refuse (the decoder refuses deeper bodies too).
    let value40: unknown = { stringValue: 'deep' };
    for (let i = 0; i < 40; i++) value40 = { arrayValue: { values: [value40] } };
    const request40 = { resourceLogs: [{ scopeLogs: [{ logRecords: [{ body: value40 }] }] }] };
    expect(httpError(() => decodeOtlp('logs', 'protobuf', protoRequest('logs', request40))).status).toBe(400);
    const text = `{"resourceLogs":${'['.repeat(200_000)}${']'.repeat(200_000)}}`;
    expect(httpError(() => decodeOtlp('logs', 'json', Buffer.from(text))).status).toBe(400);
    // snake_case keys make the parser walk the tree to rename them, recursively.
    const snake = `{"resource_logs":${'{"a_b":'.repeat(200_000)}1${'}'.repeat(200_000)}}`;
    expect(httpError(() => decodeOtlp('logs', 'json', Buffer.from(snake))).status).toBe(400);
  });
});

// ---------------------------------------------------------------------------------------------------
// traces

async function sdkSpans(): Promise<ReadableSpan[]> {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ resource, spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const tracer = provider.getTracer('checkout.tracer', '0.4.0');
  const parent = tracer.startSpan('POST /pay', { kind: SpanKind.SERVER, startTime: [T0, 100], attributes: { 'http.method': 'POST' } }, ROOT_CONTEXT);
  parent.addEvent('card.checked', { valid: true, attempts: 2 }, [T0, 500_000_000]);
  parent.setStatus({ code: SpanStatusCode.ERROR, message: 'declined' });
  const child = tracer.startSpan(
    'db.query',
    {
      kind: SpanKind.CLIENT,
      startTime: [T0, 200],
      links: [{ context: { traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: TraceFlags.SAMPLED, traceState: undefined }, attributes: { why: 'retry' } }],
    },
    trace.setSpan(ROOT_CONTEXT, parent),
  );
  child.setStatus({ code: SpanStatusCode.OK });
  child.end([T0 + 1, 300]);
  parent.end([T0 + 2, 0]);
  await provider.forceFlush();
  return exporter.getFinishedSpans();
}

describe('traces', () => {
  it('decodes SDK spans from protobuf and JSON to the same exact rows', async () => {
    const spans = await sdkSpans();
    const [child, parent] = spans;
    const decoded = decodeBoth('traces', ProtobufTraceSerializer.serializeRequest(spans), JsonTraceSerializer.serializeRequest(spans));
    expect(decoded.timeColumn).toBe('span_start_time_unix_nano');
    expect(decoded.rejected).toBe(0);
    expect(decoded.rows).toHaveLength(2);
    const [childRow, parentRow] = decoded.rows;
    expect(parentRow).toEqual({
      'service.name': 'checkout',
      'host.name': 'web-1',
      shared: 'resource',
      'http.method': 'POST',
      resource_schema_url: null,
      resource_dropped_attributes_count: 0,
      scope_name: 'checkout.tracer',
      scope_version: '0.4.0',
      scope_schema_url: null,
      scope_dropped_attributes_count: 0,
      span_trace_id: parent.spanContext().traceId,
      span_span_id: parent.spanContext().spanId,
      span_parent_span_id: null,
      span_trace_state: null,
      span_name: 'POST /pay',
      span_kind: 2,
      span_kind_description: 'SPAN_KIND_SERVER',
      span_start_time_unix_nano: iso(T0, 100),
      span_end_time_unix_nano: iso(T0 + 2, 0),
      span_duration_ns: 1_999_999_900,
      span_status_code: 2,
      span_status_description: 'STATUS_CODE_ERROR',
      span_status_message: 'declined',
      span_flags: 257,
      span_dropped_attributes_count: 0,
      span_dropped_events_count: 0,
      span_dropped_links_count: 0,
      span_events: JSON.stringify([{ time_unix_nano: iso(T0, 500_000_000), name: 'card.checked', attributes: { valid: true, attempts: 2 }, dropped_attributes_count: 0 }]),
      span_links: '[]',
      // Every resource attribute: the parent span sets none of the same name.
      resource_attribute_keys: JSON.stringify(Object.keys(resource.attributes)),
    });
    expect(childRow).toMatchObject({
      span_trace_id: parent.spanContext().traceId,
      span_span_id: child.spanContext().spanId,
      span_parent_span_id: parent.spanContext().spanId,
      span_kind: 3,
      span_kind_description: 'SPAN_KIND_CLIENT',
      span_start_time_unix_nano: iso(T0, 200),
      span_end_time_unix_nano: iso(T0 + 1, 300),
      span_duration_ns: 1_000_000_100,
      span_status_code: 1,
      span_status_description: 'STATUS_CODE_OK',
      span_status_message: null,
      span_events: '[]',
    });
    expect(JSON.parse(childRow.span_links as string)).toEqual([{ trace_id: TRACE_ID, span_id: SPAN_ID, trace_state: null, attributes: { why: 'retry' }, flags: 257 }]);
    expect(decoded.knownTypes).toMatchObject({ span_start_time_unix_nano: 'TIMESTAMP_NS', span_duration_ns: 'BIGINT', span_links: 'VARCHAR' });
  });

  it('rejects spans with missing or malformed ids, including link ids', () => {
    const span = (name: string, extra: object) => ({ name, traceId: TRACE_ID, spanId: SPAN_ID, startTimeUnixNano: nanosText(T0, 1), ...extra });
    const request = {
      resourceSpans: [
        {
          scopeSpans: [
            {
              spans: [
                span('ok', { kind: 'SPAN_KIND_PRODUCER', status: { code: 'STATUS_CODE_OK' } }),
                span('no trace id', { traceId: '' }),
                span('odd parent', { parentSpanId: 'abc' }),
                span('bad link', { links: [{ traceId: TRACE_ID, spanId: 'zzzzzzzzzzzzzzzz' }] }),
              ],
            },
          ],
        },
      ],
    };
    const decoded = decodeOtlp('traces', 'json', jsonBody(request));
    expect(decoded.rows.map((r) => r.span_name)).toEqual(['ok']);
    expect(decoded.rows[0]).toMatchObject({ span_kind: 4, span_kind_description: 'SPAN_KIND_PRODUCER', span_status_code: 1, span_end_time_unix_nano: null, span_duration_ns: null });
    expect(decoded.rejected).toBe(3);
    expect(decoded.rejectionMessage).toBe('3 spans were rejected; first: resourceSpans[0].scopeSpans[0].spans[1]: trace_id is empty');
  });

  it('files a span without a start time under the receive time', () => {
    const now = new Date('2026-05-06T07:08:09.010Z');
    const request = { resourceSpans: [{ scopeSpans: [{ spans: [{ name: 'x', traceId: TRACE_ID, spanId: SPAN_ID }] }] }] };
    const row = decodeOtlp('traces', 'protobuf', protoRequest('traces', {
      resourceSpans: [{ scopeSpans: [{ spans: [{ name: 'x', traceId: Buffer.from(TRACE_ID, 'hex'), spanId: Buffer.from(SPAN_ID, 'hex') }] }] }],
    }), now).rows[0];
    expect(row.span_start_time_unix_nano).toBe('2026-05-06T07:08:09.010000000Z');
    expect(decodeOtlp('traces', 'json', jsonBody(request), now).rows[0]).toEqual(row);
  });
});

// ---------------------------------------------------------------------------------------------------
// metrics

/** ResourceMetrics with exact times: one metric of each type the SDK has. */
function handBuiltMetrics(): ResourceMetrics {
  const start: HrTime = [T0, 1];
  const end: HrTime = [T0 + 10, 987654321];
  return {
    resource,
    scopeMetrics: [
      {
        scope: { name: 'checkout.meter', version: '2.0.0' },
        metrics: [
          {
            descriptor: { name: 'queue.depth', description: 'items waiting', unit: '{item}', valueType: ValueType.INT },
            dataPointType: DataPointType.GAUGE,
            aggregationTemporality: AggregationTemporality.CUMULATIVE,
            dataPoints: [{ startTime: start, endTime: end, attributes: { queue: 'a' }, value: 17 }],
          },
          {
            descriptor: { name: 'bytes.sent', description: '', unit: 'By', valueType: ValueType.DOUBLE },
            dataPointType: DataPointType.SUM,
            aggregationTemporality: AggregationTemporality.DELTA,
            isMonotonic: true,
            dataPoints: [{ startTime: start, endTime: end, attributes: { shared: 'point' }, value: 1024.5 }],
          },
          {
            descriptor: { name: 'latency', description: 'request latency', unit: 'ms', valueType: ValueType.DOUBLE },
            dataPointType: DataPointType.HISTOGRAM,
            aggregationTemporality: AggregationTemporality.CUMULATIVE,
            dataPoints: [
              {
                startTime: start,
                endTime: end,
                attributes: {},
                value: { buckets: { boundaries: [10, 100], counts: [1, 2, 3] }, count: 6, sum: 420.5, min: 1.5, max: 300 },
              },
            ],
          },
          {
            descriptor: { name: 'latency.exp', description: '', unit: 's', valueType: ValueType.DOUBLE },
            dataPointType: DataPointType.EXPONENTIAL_HISTOGRAM,
            aggregationTemporality: AggregationTemporality.DELTA,
            dataPoints: [
              {
                startTime: start,
                endTime: end,
                attributes: { route: '/pay' },
                value: {
                  count: 7,
                  sum: 12.25,
                  min: -2,
                  max: 5,
                  scale: 3,
                  zeroCount: 1,
                  positive: { offset: -2, bucketCounts: [1, 0, 3] },
                  negative: { offset: 4, bucketCounts: [2] },
                },
              },
            ],
          },
        ],
      },
    ],
  };
}

class ManualReader extends MetricReader {
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

const hrIso = (t: HrTime) => iso(t[0], t[1]);

describe('metrics', () => {
  it('decodes gauge, sum, histogram and exponential histogram points to exact rows', () => {
    const rm = handBuiltMetrics();
    const decoded = decodeBoth('metrics', ProtobufMetricsSerializer.serializeRequest(rm), JsonMetricsSerializer.serializeRequest(rm));
    expect(decoded.timeColumn).toBe('time_unix_nano');
    expect(decoded.rejected).toBe(0);
    const common = {
      'service.name': 'checkout',
      'host.name': 'web-1',
      resource_schema_url: null,
      resource_dropped_attributes_count: 0,
      scope_name: 'checkout.meter',
      scope_version: '2.0.0',
      scope_schema_url: null,
      scope_dropped_attributes_count: 0,
      metric_metadata: null,
      time_unix_nano: iso(T0 + 10, 987654321),
      start_time_unix_nano: iso(T0, 1),
      data_point_flags: 0,
      data_point_exemplars: null,
    };
    const [gauge, sum, histogram, exp] = decoded.rows;
    expect(gauge).toEqual({
      ...common,
      shared: 'resource',
      queue: 'a',
      metric_name: 'queue.depth',
      metric_description: 'items waiting',
      metric_unit: '{item}',
      metric_type: 'gauge',
      data_point_value: 17,
    });
    expect(sum).toEqual({
      ...common,
      shared: 'point',
      metric_name: 'bytes.sent',
      metric_description: null,
      metric_unit: 'By',
      metric_type: 'sum',
      is_monotonic: true,
      aggregation_temporality: 1,
      aggregation_temporality_description: 'AGGREGATION_TEMPORALITY_DELTA',
      data_point_value: 1024.5,
    });
    expect(histogram).toEqual({
      ...common,
      shared: 'resource',
      metric_name: 'latency',
      metric_description: 'request latency',
      metric_unit: 'ms',
      metric_type: 'histogram',
      aggregation_temporality: 2,
      aggregation_temporality_description: 'AGGREGATION_TEMPORALITY_CUMULATIVE',
      data_point_count: 6,
      data_point_sum: 420.5,
      data_point_min: 1.5,
      data_point_max: 300,
      data_point_bucket_counts: [1, 2, 3],
      data_point_explicit_bounds: [10, 100],
    });
    expect(exp).toEqual({
      ...common,
      shared: 'resource',
      route: '/pay',
      metric_name: 'latency.exp',
      metric_description: null,
      metric_unit: 's',
      metric_type: 'exponential_histogram',
      aggregation_temporality: 1,
      aggregation_temporality_description: 'AGGREGATION_TEMPORALITY_DELTA',
      data_point_count: 7,
      data_point_sum: 12.25,
      data_point_min: -2,
      data_point_max: 5,
      data_point_scale: 3,
      data_point_zero_count: 1,
      data_point_zero_threshold: 0,
      data_point_positive_offset: -2,
      data_point_negative_offset: 4,
      data_point_positive_bucket_counts: [1, 0, 3],
      data_point_negative_bucket_counts: [2],
    });
    expect(decoded.knownTypes).toMatchObject({
      data_point_bucket_counts: 'BIGINT[]',
      data_point_explicit_bounds: 'DOUBLE[]',
      data_point_value: 'DOUBLE',
      is_monotonic: 'BOOLEAN',
      data_point_positive_bucket_counts: 'BIGINT[]',
      data_point_quantile_values: 'VARCHAR',
    });
  });

  it('decodes what a real MeterProvider collects', async () => {
    const reader = new ManualReader();
    const provider = new MeterProvider({
      resource,
      readers: [reader],
      views: [{ instrumentName: 'work.duration', aggregation: { type: AggregationType.EXPONENTIAL_HISTOGRAM } }],
    });
    const meter = provider.getMeter('checkout.meter');
    const counter = meter.createCounter('orders', { unit: '{order}' });
    counter.add(2, { region: 'eu' });
    counter.add(3, { region: 'eu' });
    counter.add(1, { region: 'us' });
    const hist = meter.createHistogram('payload.size', { advice: { explicitBucketBoundaries: [100, 1000] } });
    for (const v of [50, 150, 1500, 2500]) hist.record(v);
    const exp = meter.createHistogram('work.duration');
    for (const v of [1, 2, 4]) exp.record(v);
    const { resourceMetrics } = await reader.collect();
    await provider.shutdown();

    const decoded = decodeBoth('metrics', ProtobufMetricsSerializer.serializeRequest(resourceMetrics), JsonMetricsSerializer.serializeRequest(resourceMetrics));
    const sdkPoints = resourceMetrics.scopeMetrics[0].metrics.flatMap((m): { startTime: HrTime; endTime: HrTime }[] => m.dataPoints);
    expect(decoded.rows.map((r) => r.time_unix_nano)).toEqual(sdkPoints.map((p) => hrIso(p.endTime)));
    expect(decoded.rows.map((r) => r.start_time_unix_nano)).toEqual(sdkPoints.map((p) => hrIso(p.startTime)));
    const byName = (name: string) => decoded.rows.filter((r) => r.metric_name === name);
    expect(byName('orders').map((r) => [r.region, r.data_point_value, r.metric_type, r.is_monotonic])).toEqual([
      ['eu', 5, 'sum', true],
      ['us', 1, 'sum', true],
    ]);
    expect(byName('payload.size')[0]).toMatchObject({
      metric_type: 'histogram',
      data_point_count: 4,
      data_point_sum: 4200,
      data_point_min: 50,
      data_point_max: 2500,
      data_point_bucket_counts: [1, 1, 2],
      data_point_explicit_bounds: [100, 1000],
    });
    const expRow = byName('work.duration')[0];
    expect(expRow).toMatchObject({ metric_type: 'exponential_histogram', data_point_count: 3, data_point_sum: 7, data_point_min: 1, data_point_max: 4 });
    expect((expRow.data_point_positive_bucket_counts as number[]).reduce((a, b) => a + b, 0)).toBe(3);
  });

  it('decodes summaries, exemplars and non-finite doubles', () => {
    const request = {
      resourceMetrics: [
        {
          scopeMetrics: [
            {
              metrics: [
                {
                  name: 'rpc.latency',
                  summary: {
                    dataPoints: [
                      {
                        timeUnixNano: nanosText(T0, 5),
                        count: '10',
                        sum: 99.5,
                        quantileValues: [
                          { quantile: 0.5, value: 7 },
                          { quantile: 0.99, value: 40.25 },
                        ],
                        attributes: [{ key: 'rpc', value: { stringValue: 'Get' } }],
                      },
                    ],
                  },
                },
                {
                  name: 'temperature',
                  metadata: [{ key: 'origin', value: { stringValue: 'prometheus' } }],
                  gauge: {
                    dataPoints: [
                      {
                        timeUnixNano: nanosText(T0, 6),
                        asDouble: 'NaN',
                        exemplars: [{ timeUnixNano: nanosText(T0, 3), asInt: '4', traceId: TRACE_ID, spanId: SPAN_ID, filteredAttributes: [{ key: 'user', value: { stringValue: 'u1' } }] }],
                      },
                      { timeUnixNano: nanosText(T0, 7), asDouble: 'Infinity', flags: 1 },
                      { timeUnixNano: nanosText(T0, 8), asInt: '-3' },
                    ],
                  },
                },
              ],
            },
          ],
        },
      ],
    };
    const json = decodeOtlp('metrics', 'json', jsonBody(request));
    const protoObject = structuredClone(request);
    // The generated fromObject takes base64 bytes and numbers for doubles.
    const gaugePoints = protoObject.resourceMetrics[0].scopeMetrics[0].metrics[1].gauge!.dataPoints as Record<string, unknown>[];
    gaugePoints[0].asDouble = NaN;
    gaugePoints[1].asDouble = Infinity;
    (gaugePoints[0].exemplars as Record<string, unknown>[])[0].traceId = Buffer.from(TRACE_ID, 'hex');
    (gaugePoints[0].exemplars as Record<string, unknown>[])[0].spanId = Buffer.from(SPAN_ID, 'hex');
    const proto = decodeOtlp('metrics', 'protobuf', protoRequest('metrics', protoObject));
    expect(json).toEqual(proto);

    const [summary, nan, inf, int] = json.rows;
    expect(summary).toMatchObject({
      rpc: 'Get',
      metric_name: 'rpc.latency',
      metric_type: 'summary',
      time_unix_nano: iso(T0, 5),
      start_time_unix_nano: null,
      data_point_count: 10,
      data_point_sum: 99.5,
      data_point_quantile_values: '[{"quantile":0.5,"value":7},{"quantile":0.99,"value":40.25}]',
    });
    expect(summary.aggregation_temporality).toBeUndefined();
    expect(nan.data_point_value).toBeNaN();
    expect(nan.metric_metadata).toBe('{"origin":"prometheus"}');
    expect(JSON.parse(nan.data_point_exemplars as string)).toEqual([
      { time_unix_nano: iso(T0, 3), value: 4, trace_id: TRACE_ID, span_id: SPAN_ID, filtered_attributes: { user: 'u1' } },
    ]);
    expect(inf).toMatchObject({ data_point_value: Infinity, data_point_flags: 1, data_point_exemplars: null });
    expect(int.data_point_value).toBe(-3);
  });

  it('accepts proto field names (snake_case) in OTLP/JSON', () => {
    const request = {
      resource_metrics: [
        {
          schema_url: 'https://example.com/r',
          scope_metrics: [
            {
              metrics: [
                {
                  name: 'e',
                  exponential_histogram: {
                    aggregation_temporality: 2,
                    data_points: [
                      {
                        time_unix_nano: nanosText(T0, 9),
                        start_time_unix_nano: nanosText(T0, 1),
                        count: '4',
                        zero_count: '1',
                        zero_threshold: 0.001,
                        positive: { offset: 1, bucket_counts: ['1', '2'] },
                      },
                    ],
                  },
                },
              ],
            },
          ],
        },
      ],
    };
    const row = decodeOtlp('metrics', 'json', jsonBody(request)).rows[0];
    expect(row).toMatchObject({
      resource_schema_url: 'https://example.com/r',
      metric_type: 'exponential_histogram',
      aggregation_temporality_description: 'AGGREGATION_TEMPORALITY_CUMULATIVE',
      time_unix_nano: iso(T0, 9),
      start_time_unix_nano: iso(T0, 1),
      data_point_count: 4,
      data_point_sum: null,
      data_point_zero_count: 1,
      data_point_zero_threshold: 0.001,
      data_point_positive_offset: 1,
      data_point_positive_bucket_counts: [1, 2],
      data_point_negative_offset: 0,
      data_point_negative_bucket_counts: [],
    });
  });

  it('rejects only the data points with bad exemplar ids or inconsistent buckets', () => {
    const request = {
      resourceMetrics: [
        {
          scopeMetrics: [
            {
              metrics: [
                {
                  name: 'h',
                  histogram: {
                    aggregationTemporality: 'AGGREGATION_TEMPORALITY_CUMULATIVE',
                    dataPoints: [
                      { timeUnixNano: nanosText(T0, 1), count: 3, bucketCounts: [1, 2], explicitBounds: [5] },
                      { timeUnixNano: nanosText(T0, 2), count: 3, bucketCounts: [1, 2], explicitBounds: [5, 10] },
                      { timeUnixNano: nanosText(T0, 3), count: 1, exemplars: [{ asDouble: 1, traceId: 'abc' }] },
                    ],
                  },
                },
              ],
            },
          ],
        },
      ],
    };
    const decoded = decodeOtlp('metrics', 'json', jsonBody(request));
    expect(decoded.rows).toHaveLength(1);
    expect(decoded.rows[0]).toMatchObject({ data_point_bucket_counts: [1, 2], data_point_explicit_bounds: [5], aggregation_temporality: 2 });
    expect(decoded.rejected).toBe(2);
    expect(decoded.rejectionMessage).toContain('2 data points were rejected; first: resourceMetrics[0].scopeMetrics[0].metrics[0].histogram.dataPoints[1]: histogram has 2 bucket counts for 2 explicit bounds');
  });
});

// ---------------------------------------------------------------------------------------------------
// responses

describe('encodeOtlpResponse', () => {
  const cases: [OtlpSignal, string][] = [
    ['logs', 'rejectedLogRecords'],
    ['traces', 'rejectedSpans'],
    ['metrics', 'rejectedDataPoints'],
  ];

  it.each(cases)('%s: full success is an empty message', (signal) => {
    const proto = encodeOtlpResponse(signal, 'protobuf', 0);
    expect(proto.contentType).toBe('application/x-protobuf');
    expect(Buffer.from(proto.body).length).toBe(0);
    expect(responseClass[signal].toObject(responseClass[signal].decode(Buffer.from(proto.body)))).toEqual({});
    const json = encodeOtlpResponse(signal, 'json', 0);
    expect(json).toEqual({ body: '{}', contentType: 'application/json' });
  });

  it.each(cases)('%s: partial success round-trips through the generated response classes', (signal, field) => {
    const cls = responseClass[signal];
    const proto = encodeOtlpResponse(signal, 'protobuf', 3, '3 bad ids');
    const decoded = cls.toObject(cls.decode(Buffer.from(proto.body)), { longs: Number });
    expect(decoded).toEqual({ partialSuccess: { [field]: 3, errorMessage: '3 bad ids' } });

    const json = encodeOtlpResponse(signal, 'json', 3, '3 bad ids');
    expect(json.contentType).toBe('application/json');
    const parsed = JSON.parse(json.body as string);
    expect(parsed).toEqual({ partialSuccess: { [field]: '3', errorMessage: '3 bad ids' } });
    expect(cls.toObject(cls.fromObject(parsed), { longs: Number })).toEqual(decoded);
  });

  it('reports what decodeOtlp rejected', () => {
    const decoded = decodeOtlp('logs', 'json', jsonBody({ resourceLogs: [{ scopeLogs: [{ logRecords: [{ spanId: 'nothex!!nothex!!' }] }] }] }));
    const format: OtlpFormat = 'protobuf';
    const response = encodeOtlpResponse('logs', format, decoded.rejected, decoded.rejectionMessage);
    const cls = responseClass.logs;
    const object = cls.toObject(cls.decode(Buffer.from(response.body)), { longs: Number }) as { partialSuccess: { rejectedLogRecords: number; errorMessage: string } };
    expect(object.partialSuccess.rejectedLogRecords).toBe(1);
    expect(object.partialSuccess.errorMessage).toContain('span_id "nothex!!nothex!!" is not hex');
  });
});

describe('OTLP_TIME_COLUMN', () => {
  it('names each signal time column', () => {
    expect(OTLP_TIME_COLUMN).toEqual({ logs: 'time_unix_nano', traces: 'span_start_time_unix_nano', metrics: 'time_unix_nano' });
  });
});
