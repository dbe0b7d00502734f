import { describe, expect, it } from 'vitest';
import { DomainError } from '../../src/errors.ts';
import { checkJsonShape, countOtlpJsonRecords, SCAN_JSON_ABOVE, withDecodeBudget } from '../../src/ingest/limits.ts';
import { decodeOtlp } from '../../src/ingest/otlp/index.ts';
import { decodeRemoteWriteBytes } from '../../src/ingest/prometheus/index.ts';
import snappy from 'snappy';
import { otlpLogsProtobuf, remoteWriteV1, remoteWriteV2 } from '../helpers/wire.ts';

/** The error a call throws (or undefined), as kind + message. */
function outcome(fn: () => unknown): string {
  try {
    fn();
    return 'ok';
  } catch (err) {
    if (err instanceof DomainError) return `${err.kind}: ${err.message}`;
    throw err;
  }
}

describe('checkJsonShape (JSON scanned before parsing)', () => {
  // Small limits, so that the bodies are scanned (a body no larger than maxValues is not).
  const limits = { maxEvents: 3, maxValues: 20, maxNames: 4 };
  const cases: [string, string, RegExp][] = [
    ['three events', '[{"a":1},{"a":2},{"a":3}]      ', /^ok$/],
    ['four events', '[{"a":1},{"a":2},{"a":3},{"a":4}]', /too_large: .*more than 3 events.*P_MAX_EVENTS_PER_REQUEST/],
    ['four empty events', '[{},{},{},{}]                    ', /too_large: .*more than 3 events/],
    ['braces inside strings do not count', '[{"a":"{[,,,,,,,,,,,,,,,,,,,,,]}"}]', /^ok$/],
    ['escaped quotes inside strings', '[{"a":"x\\"{{{{,,,,,,,,,,,,,,,,,,,"}]', /^ok$/],
    ['many members of one object are values', `{${Array.from({ length: 21 }, (_, i) => `"a":${i}`).join(',')}}`, /too_large: .*more than 20 values.*P_MAX_VALUES_PER_REQUEST/],
    ['a long array of scalars', `{"a":[${Array.from({ length: 30 }, () => 0).join(',')}]}`, /too_large: .*20 values/],
    ['malformed JSON is left to the parser', '[{"a":"unterminated                 ', /^ok$/],
    ['four distinct names, repeated', '[{"a":1,"b":2},{"c":3,"d":"a"},{"a":2}]', /^ok$/],
    ['five distinct names', '[{"a":1,"b":2},{"c":3,"d":4},{"e":5}]     ', /too_large: .*more than 4 distinct field names/],
    ['names inside string values are not names', '[{"a":"\\"b\\":1 \\"c\\":2 \\"d\\":3 \\"e\\":4"}]', /^ok$/],
  ];
  it.each(cases)('%s', (_name, text, expected) => expect(outcome(() => checkJsonShape(Buffer.from(text), limits))).toMatch(expected));

  it('bodies no larger than the values limit and SCAN_JSON_ABOVE are not scanned (their events are counted after parsing)', () => {
    expect(outcome(() => checkJsonShape(Buffer.from('[{},{},{},{},{}]'), { maxEvents: 3, maxValues: 100, maxNames: 10 }))).toBe('ok');
    expect(SCAN_JSON_ABOVE).toBe(4 * 1024 * 1024);
  });
});

describe('countOtlpJsonRecords', () => {
  const cases: [string, 'logs' | 'traces' | 'metrics', unknown, number][] = [
    ['logs', 'logs', { resourceLogs: [{ scopeLogs: [{ logRecords: [{}, {}] }, { logRecords: [{}] }] }, { scopeLogs: [{ logRecords: [{}] }] }] }, 4],
    ['spans', 'traces', { resourceSpans: [{ scopeSpans: [{ spans: [{}, {}, {}] }] }] }, 3],
    ['data points of every metric kind', 'metrics', { resourceMetrics: [{ scopeMetrics: [{ metrics: [{ gauge: { dataPoints: [{}, {}] } }, { sum: { dataPoints: [{}] } }, { histogram: { dataPoints: [{}] } }, { exponentialHistogram: { dataPoints: [{}] } }, { summary: { dataPoints: [{}] } }] }] }] }, 6],
    ['wrong shapes count as nothing (the decoder reports them)', 'logs', { resourceLogs: [{ scopeLogs: 'x' }, null] }, 0],
  ];
  it.each(cases)('%s', (_name, signal, request, n) => expect(countOtlpJsonRecords(signal, request as Record<string, unknown>)).toBe(n));
});

describe('withDecodeBudget: protobuf decoders count what they create and stop at a limit', () => {
  const now = Date.now();
  const logs = (records: number, attributes: number) =>
    otlpLogsProtobuf(Array.from({ length: records }, (_, i) => ({ timeMs: now + i, attributes: Array.from({ length: attributes }, (_, k) => [`a${k}`, { int: k }] as [string, { int: number }]) })));
  const decodeLogs = (body: Buffer, maxEvents: number, maxValues: number) => () =>
    withDecodeBudget({ maxEvents, maxValues, maxNames: 1000 }, 'log records', () => decodeOtlp('logs', 'protobuf', body));
  const series = (n: number) => [{ labels: [['__name__', 'm'], ['job', 'j']] as [string, string][], samples: Array.from({ length: n }, (_, i) => ({ value: i, timestampMs: now + i })) }];
  const unsnappy = (b: Buffer) => snappy.uncompressSync(b, { asBuffer: true }) as Buffer;

  const cases: [string, () => unknown, RegExp][] = [
    ['OTLP: records at the limit', decodeLogs(logs(5, 1), 5, 1000), /^ok$/],
    ['OTLP: one record more', decodeLogs(logs(6, 1), 5, 1000), /too_large: .*more than 5 log records/],
    ['OTLP: attributes count as values (record + 2 messages per attribute + envelope)', decodeLogs(logs(1, 10), 5, 24), /^ok$/],
    ['OTLP: one value more', decodeLogs(logs(1, 11), 5, 24), /too_large: .*more than 24 values/],
    ['remote write 1.0: samples', () => withDecodeBudget({ maxEvents: 4, maxValues: 1000, maxNames: 1000 }, 'samples', () => decodeRemoteWriteBytes('1.0', unsnappy(remoteWriteV1(series(5))))), /too_large: .*more than 4 samples/],
    ['remote write 2.0: samples', () => withDecodeBudget({ maxEvents: 4, maxValues: 1000, maxNames: 1000 }, 'samples', () => decodeRemoteWriteBytes('2.0', unsnappy(remoteWriteV2(series(5))))), /too_large: .*more than 4 samples/],
    ['remote write 2.0: packed label references count', () => withDecodeBudget({ maxEvents: 100, maxValues: 6, maxNames: 1000 }, 'samples', () => decodeRemoteWriteBytes('2.0', unsnappy(remoteWriteV2(series(1))))), /too_large: .*values/],
    ['no budget: nothing is counted', () => decodeOtlp('logs', 'protobuf', logs(50, 2)), /^ok$/],
  ];
  it.each(cases)('%s', (_name, fn, expected) => expect(outcome(fn)).toMatch(expected));
});

describe('counting decodes touches only the service’s own message types', () => {
  it("the OpenTelemetry package's generated classes (protobufjs' process-wide default root) keep their own decoders", async () => {
    const { default: shared } = (await import('@opentelemetry/otlp-transformer/build/src/generated/root.js')) as unknown as {
      default: { opentelemetry: { proto: { logs: { v1: Record<string, { decode: { name: string } }> } } } };
    };
    const { requestClass } = await import('../../src/ingest/otlp/generated.ts');
    expect(shared.opentelemetry.proto.logs.v1.LogRecord!.decode.name).not.toBe('counted');
    expect(shared.opentelemetry.proto.logs.v1.LogRecord).not.toBe(requestClass.logs.lookupType('opentelemetry.proto.logs.v1.LogRecord'));
    expect((requestClass.logs.lookupType('opentelemetry.proto.logs.v1.LogRecord') as unknown as { decode: { name: string } }).decode.name).toBe('counted');
  });
});
