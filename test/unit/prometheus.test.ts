import protobuf from 'protobufjs';
import snappy from 'snappy';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DomainError } from '../../src/errors.ts';
import { STATUS } from '../../src/doors/http/errors.ts';

/** A domain error with the HTTP status the edge would answer. */
type HttpError = DomainError & { status: number };
const withStatus = (err: DomainError): HttpError => Object.assign(err, { status: STATUS[err.kind] });
import { RequestV2, WriteRequestV1 } from '../../src/ingest/prometheus/decode.ts';
import {
  decodeRemoteWrite,
  MAX_LABELS_PER_SERIES,
  PROMETHEUS_KNOWN_TYPES,
  remoteWriteResponseHeaders,
  remoteWriteVersion,
} from '../../src/ingest/prometheus/index.ts';

const T0 = Date.parse('2026-11-01T10:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();
const V2_CT = 'application/x-protobuf;proto=io.prometheus.write.v2.Request';
const LIMIT = 4 * 1024 * 1024;

const encodeV1 = (obj: Record<string, unknown>) => Buffer.from(WriteRequestV1.encode(WriteRequestV1.fromObject(obj)).finish());
const encodeV2 = (obj: Record<string, unknown>) => Buffer.from(RequestV2.encode(RequestV2.fromObject(obj)).finish());
const decodeV1 = (raw: Buffer) => decodeRemoteWrite(snappy.compressSync(raw), 'application/x-protobuf', 'snappy', LIMIT);
const decodeV2 = (raw: Buffer) => decodeRemoteWrite(snappy.compressSync(raw), V2_CT, 'snappy', LIMIT);

/** A double whose exact bits are given: JS cannot write a NaN payload any other way. */
function doubleFromBits(bits: bigint): number {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(bits);
  return b.readDoubleLE(0);
}
const STALE_NAN_BITS = 0x7ff0000000000002n;

/**
 * Rewrites the 8 bytes of the Sample.value field that holds `marker` to `bits`. Going through the
 * encoder with a NaN would prove nothing: the test must control the bytes on the wire exactly.
 */
function patchSampleValue(raw: Buffer, marker: number, bits: bigint): void {
  const field = Buffer.alloc(9);
  field[0] = 0x09; // Sample.value: field 1, wire type 1 (64-bit)
  field.writeDoubleLE(marker, 1);
  const at = raw.indexOf(field);
  expect(at, `marker ${marker} not found in the encoded request`).toBeGreaterThan(0);
  expect(raw.indexOf(field, at + 1), `marker ${marker} is not unique`).toBe(-1);
  raw.writeBigUInt64LE(bits, at + 1);
}

/** The HttpError a call throws (the test fails if it throws anything else or nothing). */
function httpError(fn: () => unknown): HttpError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(DomainError);
    return withStatus(err as DomainError);
  }
  throw new Error('expected an HttpError, nothing was thrown');
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('remote write 1.0', () => {
  it('decodes samples into rows: labels as columns, ISO timestamps, values, counts and types', () => {
    const d = decodeV1(
      encodeV1({
        timeseries: [
          {
            labels: [
              { name: '__name__', value: 'http_requests_total' },
              { name: 'job', value: 'api' },
              { name: 'code', value: '200' },
            ],
            samples: [
              { value: 41, timestamp: T0 },
              { value: 42.5, timestamp: T0 + 15_001 },
            ],
          },
          { labels: [{ name: '__name__', value: 'up' }, { name: 'instance', value: '127.0.0.1:9090' }], samples: [{ value: 1, timestamp: -1 }] },
        ],
      }),
    );
    expect(d.version).toBe('1.0');
    expect(d.timeColumn).toBe('time_unix_nano');
    expect([d.samples, d.histograms, d.exemplars]).toEqual([3, 0, 0]);
    expect(d.rows).toEqual([
      { metric_name: 'http_requests_total', job: 'api', code: '200', time_unix_nano: '2026-11-01T10:00:00.000Z', data_point_value: 41, is_stale_marker: false },
      { metric_name: 'http_requests_total', job: 'api', code: '200', time_unix_nano: '2026-11-01T10:00:15.001Z', data_point_value: 42.5, is_stale_marker: false },
      // Before the epoch is still a valid Prometheus timestamp.
      { metric_name: 'up', instance: '127.0.0.1:9090', time_unix_nano: '1969-12-31T23:59:59.999Z', data_point_value: 1, is_stale_marker: false },
    ]);
    // Every fixed column is typed; labels are not (the storage layer infers them as strings).
    expect(d.knownTypes).toEqual(PROMETHEUS_KNOWN_TYPES);
    for (const col of ['metric_name', 'time_unix_nano', 'data_point_value', 'is_stale_marker', 'metric_type', 'metric_description', 'metric_unit', 'data_point_exemplars']) {
      expect(d.knownTypes[col], col).toBeDefined();
    }
    expect(d.knownTypes.job).toBeUndefined();
    expect(d.knownTypes.time_unix_nano).toBe('TIMESTAMP_NS');
    expect(d.knownTypes.data_point_value).toBe('DOUBLE');
    expect(d.knownTypes.is_stale_marker).toBe('BOOLEAN');
  });

  it('keeps NaN and ±Inf, and flags only the exact staleness NaN bit pattern', () => {
    const raw = encodeV1({
      timeseries: [
        {
          labels: [{ name: '__name__', value: 'temperature' }],
          samples: [
            { value: Number.POSITIVE_INFINITY, timestamp: T0 },
            { value: Number.NEGATIVE_INFINITY, timestamp: T0 + 1 },
            { value: 1001, timestamp: T0 + 2 }, // → the ordinary NaN Go's math.NaN() sends
            { value: 1002, timestamp: T0 + 3 }, // → the staleness marker
            { value: 1003, timestamp: T0 + 4 }, // → a NaN with another payload
            { value: -0, timestamp: T0 + 5 },
          ],
        },
      ],
    });
    patchSampleValue(raw, 1001, 0x7ff8000000000001n);
    patchSampleValue(raw, 1002, STALE_NAN_BITS);
    patchSampleValue(raw, 1003, 0x7ff0000000000003n);
    const rows = decodeV1(raw).rows.map((r) => [r.data_point_value, r.is_stale_marker]);
    expect(rows).toEqual([
      [Number.POSITIVE_INFINITY, false],
      [Number.NEGATIVE_INFINITY, false],
      [Number.NaN, false],
      [Number.NaN, true],
      [Number.NaN, false],
      [-0, false],
    ]);
  });

  it('applies family metadata to the family and its _bucket/_sum/_count/_total series', () => {
    const series = (name: string) => ({ labels: [{ name: '__name__', value: name }], samples: [{ value: 1, timestamp: T0 }] });
    const d = decodeV1(
      encodeV1({
        timeseries: ['rpc_seconds_bucket', 'rpc_seconds_sum', 'rpc_seconds_count', 'rpc_seconds', 'jobs_total', 'temp_celsius', 'untyped_thing', 'no_metadata'].map(series),
        metadata: [
          { type: 3, metricFamilyName: 'rpc_seconds', help: 'RPC latency.', unit: 'seconds' },
          { type: 1, metricFamilyName: 'jobs', help: 'Jobs run.' },
          { type: 2, metricFamilyName: 'temp_celsius', unit: 'celsius' },
          { type: 0, metricFamilyName: 'untyped_thing', help: 'Who knows.' },
        ],
      }),
    );
    expect(d.rows.map((r) => [r.metric_name, r.metric_type ?? null, r.metric_description ?? null, r.metric_unit ?? null])).toEqual([
      ['rpc_seconds_bucket', 'histogram', 'RPC latency.', 'seconds'],
      ['rpc_seconds_sum', 'histogram', 'RPC latency.', 'seconds'],
      ['rpc_seconds_count', 'histogram', 'RPC latency.', 'seconds'],
      ['rpc_seconds', 'histogram', 'RPC latency.', 'seconds'],
      ['jobs_total', 'counter', 'Jobs run.', null],
      ['temp_celsius', 'gauge', null, 'celsius'],
      // UNKNOWN is no type at all.
      ['untyped_thing', null, 'Who knows.', null],
      ['no_metadata', null, null, null],
    ]);
  });

  it('renames labels that would clobber fixed or server columns to label_<name>', () => {
    const d = decodeV1(
      encodeV1({
        timeseries: [
          {
            labels: [
              { name: '__name__', value: 'm' },
              { name: 'data_point_value', value: 'a' },
              { name: 'time_unix_nano', value: 'b' },
              { name: 'metric_name', value: 'c' },
              { name: 'is_stale_marker', value: 'd' },
              { name: 'p_timestamp', value: 'e' },
              { name: 'value', value: 'f' },
            ],
            samples: [{ value: 7, timestamp: T0 }],
          },
        ],
      }),
    );
    expect(d.rows).toEqual([
      {
        metric_name: 'm',
        label_data_point_value: 'a',
        label_time_unix_nano: 'b',
        label_metric_name: 'c',
        label_is_stale_marker: 'd',
        label_p_timestamp: 'e',
        value: 'f',
        time_unix_nano: iso(T0),
        data_point_value: 7,
        is_stale_marker: false,
      },
    ]);
  });

  it('decodes native histograms sent over 1.0 and puts exemplars on the sample row', () => {
    const d = decodeV1(
      encodeV1({
        timeseries: [
          {
            labels: [{ name: '__name__', value: 'latency' }],
            histograms: [{ countFloat: 2.5, sum: 9, schema: -1, zeroThreshold: 0.001, zeroCountFloat: 0.5, positiveSpans: [{ offset: 0, length: 1 }], positiveCounts: [2], resetHint: 1, timestamp: T0 }],
          },
          {
            labels: [{ name: '__name__', value: 'requests_total' }],
            samples: [{ value: 5, timestamp: T0 }],
            exemplars: [{ labels: [{ name: 'trace_id', value: 'abc' }], value: 0.25, timestamp: T0 - 5 }],
          },
        ],
      }),
    );
    expect([d.samples, d.histograms, d.exemplars]).toEqual([1, 1, 1]);
    expect(d.rows).toEqual([
      {
        metric_name: 'latency',
        time_unix_nano: iso(T0),
        is_stale_marker: false,
        metric_type: 'native_histogram',
        data_point_count: 2.5,
        data_point_sum: 9,
        data_point_scale: -1,
        data_point_zero_threshold: 0.001,
        data_point_zero_count: 0.5,
        data_point_positive_spans: '[{"offset":0,"length":1}]',
        data_point_negative_spans: '[]',
        data_point_positive_counts: [2],
        data_point_reset_hint: 1,
      },
      {
        metric_name: 'requests_total',
        time_unix_nano: iso(T0),
        data_point_value: 5,
        is_stale_marker: false,
        data_point_exemplars: JSON.stringify([{ labels: { trace_id: 'abc' }, value: 0.25, timestamp: iso(T0 - 5) }]),
      },
    ]);
  });

  it('drops exemplars of a series without samples and does not count them', () => {
    const d = decodeV1(encodeV1({ timeseries: [{ labels: [{ name: '__name__', value: 'x' }], exemplars: [{ value: 1, timestamp: T0 }] }] }));
    expect(d.rows).toEqual([]);
    expect(d.exemplars).toBe(0);
  });

  it('an empty request (and a metadata-only one) is valid and yields no rows', () => {
    for (const d of [decodeV1(Buffer.alloc(0)), decodeV1(encodeV1({ metadata: [{ type: 1, metricFamilyName: 'x' }] })), decodeV2(Buffer.alloc(0))]) {
      expect(d.rows).toEqual([]);
      expect([d.samples, d.histograms, d.exemplars]).toEqual([0, 0, 0]);
    }
  });
});

describe('remote write 2.0', () => {
  it('resolves symbols into the same row shape, with per-series metadata and created timestamps', () => {
    const symbols = ['', '__name__', 'http_requests_total', 'job', 'api', 'Requests served.', 'requests', 'queue_depth', 'trace_id', 'f00d'];
    const d = decodeV2(
      encodeV2({
        symbols,
        timeseries: [
          {
            labelsRefs: [1, 2, 3, 4],
            metadata: { type: 1, helpRef: 5, unitRef: 6 },
            createdTimestamp: T0 - 60_000,
            samples: [{ value: 10, timestamp: T0 }],
            exemplars: [{ labelsRefs: [8, 9], value: 0.5, timestamp: T0 - 1 }],
          },
          { labelsRefs: [1, 7, 3, 4], metadata: { type: 2 }, samples: [{ value: 3, timestamp: T0 + 1 }] },
          { labelsRefs: [1, 7, 3, 4], samples: [{ value: 4, timestamp: T0 + 2 }] },
        ],
      }),
    );
    expect(d.version).toBe('2.0');
    expect([d.samples, d.histograms, d.exemplars]).toEqual([3, 0, 1]);
    expect(d.rows).toEqual([
      {
        metric_name: 'http_requests_total',
        job: 'api',
        metric_type: 'counter',
        metric_description: 'Requests served.',
        metric_unit: 'requests',
        start_time_unix_nano: iso(T0 - 60_000),
        time_unix_nano: iso(T0),
        data_point_value: 10,
        is_stale_marker: false,
        data_point_exemplars: JSON.stringify([{ labels: { trace_id: 'f00d' }, value: 0.5, timestamp: iso(T0 - 1) }]),
      },
      { metric_name: 'queue_depth', job: 'api', metric_type: 'gauge', time_unix_nano: iso(T0 + 1), data_point_value: 3, is_stale_marker: false },
      { metric_name: 'queue_depth', job: 'api', time_unix_nano: iso(T0 + 2), data_point_value: 4, is_stale_marker: false },
    ]);
    expect(remoteWriteResponseHeaders(d)).toEqual({
      'X-Prometheus-Remote-Write-Samples-Written': '3',
      'X-Prometheus-Remote-Write-Histograms-Written': '0',
      'X-Prometheus-Remote-Write-Exemplars-Written': '1',
    });
  });

  it('flags staleness markers from the raw bits', () => {
    const raw = encodeV2({ symbols: ['', '__name__', 'up'], timeseries: [{ labelsRefs: [1, 2], samples: [{ value: 1, timestamp: T0 }, { value: 1234, timestamp: T0 + 1 }] }] });
    patchSampleValue(raw, 1234, STALE_NAN_BITS);
    expect(decodeV2(raw).rows.map((r) => [r.data_point_value, r.is_stale_marker])).toEqual([
      [1, false],
      [Number.NaN, true],
    ]);
  });

  it('decodes integer, float, gauge, custom-bucket and stale native histograms', () => {
    const symbols = ['', '__name__', 'rpc_latency_seconds', 'service', 'cart', 'Latency of RPCs.', 'seconds'];
    const d = decodeV2(
      encodeV2({
        symbols,
        timeseries: [
          {
            labelsRefs: [1, 2, 3, 4],
            metadata: { type: 3, helpRef: 5, unitRef: 6 },
            histograms: [
              {
                countInt: 12,
                sum: 3.5,
                schema: 3,
                zeroThreshold: 1e-128,
                zeroCountInt: 2,
                positiveSpans: [{ offset: -1, length: 3 }],
                positiveDeltas: [4, -1, 2],
                negativeSpans: [{ offset: 2, length: 1 }],
                negativeDeltas: [1],
                resetHint: 2,
                timestamp: T0,
              },
              { countFloat: 7.25, sum: -1, schema: 0, zeroCountFloat: 0.25, positiveSpans: [{ offset: 0, length: 2 }], positiveCounts: [1.5, 5.5], timestamp: T0 + 1 },
              { countInt: 3, sum: 1, schema: -53, positiveSpans: [{ offset: 0, length: 2 }], positiveDeltas: [1, 1], customValues: [0.1, 1], timestamp: T0 + 2 },
              { countInt: 0, sum: doubleFromBits(STALE_NAN_BITS), timestamp: T0 + 3 },
            ],
          },
          { labelsRefs: [1, 2, 3, 4], histograms: [{ countInt: 1, sum: 2, resetHint: 3, timestamp: T0 + 4 }] },
        ],
      }),
    );
    expect([d.samples, d.histograms]).toEqual([0, 5]);
    const base = { metric_name: 'rpc_latency_seconds', service: 'cart' };
    const meta = { metric_description: 'Latency of RPCs.', metric_unit: 'seconds' };
    expect(d.rows).toEqual([
      {
        ...base,
        ...meta,
        metric_type: 'native_histogram',
        time_unix_nano: iso(T0),
        is_stale_marker: false,
        data_point_count: 12,
        data_point_sum: 3.5,
        data_point_scale: 3,
        data_point_zero_threshold: 1e-128,
        data_point_zero_count: 2,
        data_point_positive_spans: '[{"offset":-1,"length":3}]',
        data_point_negative_spans: '[{"offset":2,"length":1}]',
        data_point_positive_deltas: [4, -1, 2],
        data_point_negative_deltas: [1],
        data_point_reset_hint: 2,
      },
      {
        ...base,
        ...meta,
        metric_type: 'native_histogram',
        time_unix_nano: iso(T0 + 1),
        is_stale_marker: false,
        data_point_count: 7.25,
        data_point_sum: -1,
        data_point_scale: 0,
        data_point_zero_threshold: 0,
        data_point_zero_count: 0.25,
        data_point_positive_spans: '[{"offset":0,"length":2}]',
        data_point_negative_spans: '[]',
        data_point_positive_counts: [1.5, 5.5],
        data_point_reset_hint: 0,
      },
      {
        ...base,
        ...meta,
        metric_type: 'native_histogram',
        time_unix_nano: iso(T0 + 2),
        is_stale_marker: false,
        data_point_count: 3,
        data_point_sum: 1,
        data_point_scale: -53,
        data_point_zero_threshold: 0,
        data_point_zero_count: 0,
        data_point_positive_spans: '[{"offset":0,"length":2}]',
        data_point_negative_spans: '[]',
        data_point_positive_deltas: [1, 1],
        data_point_custom_values: [0.1, 1],
        data_point_reset_hint: 0,
      },
      {
        ...base,
        ...meta,
        metric_type: 'native_histogram',
        time_unix_nano: iso(T0 + 3),
        is_stale_marker: true,
        data_point_count: 0,
        data_point_sum: Number.NaN,
        data_point_scale: 0,
        data_point_zero_threshold: 0,
        data_point_zero_count: 0,
        data_point_positive_spans: '[]',
        data_point_negative_spans: '[]',
        data_point_reset_hint: 0,
      },
      {
        ...base,
        metric_type: 'native_gauge_histogram',
        time_unix_nano: iso(T0 + 4),
        is_stale_marker: false,
        data_point_count: 1,
        data_point_sum: 2,
        data_point_scale: 0,
        data_point_zero_threshold: 0,
        data_point_zero_count: 0,
        data_point_positive_spans: '[]',
        data_point_negative_spans: '[]',
        data_point_reset_hint: 3,
      },
    ]);
    // A histogram row has no sample value.
    expect(d.rows.every((r) => !('data_point_value' in r))).toBe(true);
  });

  it('rejects symbol references outside the table and odd labels_refs with 400', () => {
    const outside = httpError(() => decodeV2(encodeV2({ symbols: ['', '__name__'], timeseries: [{ labelsRefs: [1, 9], samples: [{ value: 1, timestamp: T0 }] }] })));
    expect(outside.status).toBe(400);
    expect(outside.message).toMatch(/symbol reference 9/);
    const odd = httpError(() => decodeV2(encodeV2({ symbols: ['', '__name__', 'x'], timeseries: [{ labelsRefs: [1, 2, 1], samples: [{ value: 1, timestamp: T0 }] }] })));
    expect(odd.status).toBe(400);
    expect(odd.message).toMatch(/pairs/);
  });
});

describe('content negotiation', () => {
  const empty = snappy.compressSync(Buffer.alloc(0));

  it('picks the message from Content-Type', () => {
    expect(remoteWriteVersion(undefined)).toBe('1.0');
    expect(remoteWriteVersion('')).toBe('1.0');
    expect(remoteWriteVersion('application/x-protobuf')).toBe('1.0');
    expect(remoteWriteVersion('application/x-protobuf; proto=prometheus.WriteRequest')).toBe('1.0');
    expect(remoteWriteVersion('Application/X-Protobuf;proto=io.prometheus.write.v2.Request')).toBe('2.0');
    expect(remoteWriteVersion('application/x-protobuf; charset=binary; proto="io.prometheus.write.v2.Request"')).toBe('2.0');
    expect(decodeRemoteWrite(empty, undefined, 'snappy', LIMIT).version).toBe('1.0');
    expect(decodeRemoteWrite(empty, V2_CT, 'SNAPPY', LIMIT).version).toBe('2.0');
  });

  it('answers 415 to other media types and messages, and to encodings other than snappy', () => {
    for (const ct of ['application/json', 'text/plain', 'application/x-protobuf;proto=io.prometheus.write.v3.Request', 'application/x-protobuf;proto=io.prometheus.write.v2.RequestX']) {
      expect(httpError(() => decodeRemoteWrite(empty, ct, 'snappy', LIMIT)).status, ct).toBe(415);
    }
    for (const ce of ['gzip', 'zstd', 'identity']) {
      expect(httpError(() => decodeRemoteWrite(empty, V2_CT, ce, LIMIT)).status, ce).toBe(415);
    }
  });

  it('answers 400 to a body without Content-Encoding (remote write bodies are always snappy)', () => {
    for (const ce of [undefined, '', '  ']) {
      const err = httpError(() => decodeRemoteWrite(empty, 'application/x-protobuf', ce, LIMIT));
      expect(err.status).toBe(400);
      expect(err.message).toMatch(/snappy/);
    }
  });
});

describe('bad bodies', () => {
  const good = encodeV1({ timeseries: [{ labels: [{ name: '__name__', value: 'x' }], samples: [{ value: 1, timestamp: T0 }] }] });
  const v1 = (body: Buffer) => () => decodeRemoteWrite(body, 'application/x-protobuf', 'snappy', LIMIT);

  it('corrupt snappy → 400 naming snappy', () => {
    for (const body of [Buffer.from('definitely not snappy at all'), Buffer.alloc(0), Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0x01])]) {
      const err = httpError(v1(body));
      expect(err.status).toBe(400);
      expect(err.message).toMatch(/not valid snappy/);
    }
  });

  it('truncated snappy → 400', () => {
    const compressed = snappy.compressSync(good);
    for (const cut of [1, 3, compressed.length - 1]) {
      const err = httpError(v1(compressed.subarray(0, cut)));
      expect(err.status, `cut at ${cut}`).toBe(400);
      expect(err.message).toMatch(/snappy/);
    }
  });

  it('valid snappy around an invalid or truncated protobuf → 400 naming the protobuf', () => {
    const bodies = [
      Buffer.from([0x0a, 0xff, 0xff, 0xff, 0x0f, 0x01]), // timeseries claiming 4 GB
      Buffer.from('hello, this is not a protobuf'),
      good.subarray(0, good.length - 3),
      Buffer.from([0x0f]), // wire type 7 does not exist
    ];
    for (const raw of bodies) {
      const err = httpError(v1(snappy.compressSync(raw)));
      expect(err.status).toBe(400);
      expect(err.message).toMatch(/not a valid remote write 1\.0 WriteRequest protobuf/);
      const err2 = httpError(() => decodeRemoteWrite(snappy.compressSync(raw), V2_CT, 'snappy', LIMIT));
      expect(err2.status).toBe(400);
      expect(err2.message).toMatch(/2\.0 Request protobuf/);
    }
  });

  it('a truncated Sample inside a valid series → 400', () => {
    // A series whose single sample claims 9 bytes but holds only the tag and 4 bytes of the double.
    const sample = Buffer.from([0x09, 0, 0, 0, 0]);
    const series = Buffer.concat([Buffer.from([0x12, sample.length]), sample]);
    const raw = Buffer.concat([Buffer.from([0x0a, series.length]), series]);
    expect(httpError(v1(snappy.compressSync(raw))).status).toBe(400);
  });

  it('a snappy header claiming 1 GiB → 413 before anything is inflated', () => {
    const spy = vi.spyOn(snappy, 'uncompressSync');
    const bomb = Buffer.concat([Buffer.from([0x80, 0x80, 0x80, 0x80, 0x04]), Buffer.alloc(16)]); // varint 2^30
    const err = httpError(v1(bomb));
    expect(err.status).toBe(413);
    expect(err.message).toMatch(/1073741824 bytes/);
    expect(spy).not.toHaveBeenCalled();
    // Exactly at the limit is allowed; one byte over is not.
    const atLimit = snappy.compressSync(good);
    expect(decodeRemoteWrite(atLimit, undefined, 'snappy', good.length).rows).toHaveLength(1);
    expect(httpError(() => decodeRemoteWrite(atLimit, undefined, 'snappy', good.length - 1)).status).toBe(413);
  });

  it(`accepts ${MAX_LABELS_PER_SERIES} labels on a series and rejects 5,000 with 400`, () => {
    const labels = (n: number) => [{ name: '__name__', value: 'wide' }, ...Array.from({ length: n }, (_, i) => ({ name: `l${i}`, value: `v${i}` }))];
    const ok = decodeV1(encodeV1({ timeseries: [{ labels: labels(MAX_LABELS_PER_SERIES - 1), samples: [{ value: 1, timestamp: T0 }] }] }));
    expect(Object.keys(ok.rows[0])).toHaveLength(MAX_LABELS_PER_SERIES - 1 + 4);
    const err = httpError(() => decodeV1(encodeV1({ timeseries: [{ labels: labels(5000), samples: [{ value: 1, timestamp: T0 }] }] })));
    expect(err.status).toBe(400);
    expect(err.message).toMatch(/5001 labels; at most 1000/);
    const symbols = ['', '__name__', 'wide', ...Array.from({ length: 5000 }, (_, i) => `l${i}`)];
    const refs = [1, 2, ...Array.from({ length: 5000 }, (_, i) => [i + 3, 2]).flat()];
    const err2 = httpError(() => decodeV2(encodeV2({ symbols, timeseries: [{ labelsRefs: refs, samples: [{ value: 1, timestamp: T0 }] }] })));
    expect(err2.status).toBe(400);
  });

  it('rejects a timestamp a Date cannot hold with 400', () => {
    const err = httpError(() => decodeV1(encodeV1({ timeseries: [{ labels: [{ name: '__name__', value: 'x' }], samples: [{ value: 1, timestamp: '9223372036854775807' }] }] })));
    expect(err.status).toBe(400);
    expect(err.message).toMatch(/out of range/);
  });
});

describe('strings that are not valid UTF-8', () => {
  it('become strings with U+FFFD instead of failing the batch (1.0 labels and 2.0 symbols)', () => {
    const raw1 = encodeV1({ timeseries: [{ labels: [{ name: '__name__', value: 'utf' }, { name: 'raw', value: 'AAAA' }], samples: [{ value: 3, timestamp: T0 }] }] });
    raw1.set([0xff, 0xfe, 0xc3, 0x28], raw1.indexOf(Buffer.from('AAAA')));
    const [row1] = decodeV1(raw1).rows;
    expect(row1.raw).toBe('\uFFFD\uFFFD\uFFFD(');
    expect(row1.data_point_value).toBe(3);

    const raw2 = encodeV2({ symbols: ['', '__name__', 'utf', 'BBBB', 'v'], timeseries: [{ labelsRefs: [1, 2, 3, 4], samples: [{ value: 4, timestamp: T0 }] }] });
    raw2.set([0x62, 0xc0, 0x80, 0x62], raw2.indexOf(Buffer.from('BBBB'))); // an overlong encoding of NUL
    const [row2] = decodeV2(raw2).rows;
    const key = Object.keys(row2).find((k) => k.startsWith('b'))!;
    expect(key).toMatch(/^b\uFFFD+b$/);
    expect(row2[key]).toBe('v');
  });

  it('leaves protobufjs strict for everyone else', () => {
    const raw = encodeV1({ timeseries: [{ labels: [{ name: 'raw', value: 'AAAA' }] }] });
    raw.set([0xff, 0xfe, 0xc3, 0x28], raw.indexOf(Buffer.from('AAAA')));
    expect(() => WriteRequestV1.decode(raw)).toThrow(/utf-8/i);
    expect(() => WriteRequestV1.decode(new protobuf.BufferReader(raw))).toThrow(/utf-8/i);
  });
});
