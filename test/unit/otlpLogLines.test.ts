/**
 * OTLP/JSON logs: the direct path (src/ingest/otlp/logLines.ts, taken by serializeJob) against the row
 * path it replaces in the common case (decodeOtlp → p_timestamp → placeRows → rowsToLines, as
 * pipeline.ts `finish` runs it). For every input both must store the same rows, with the same type
 * summary in the same order (the order columns are added to the schema), or fail with the same error.
 */
import { describe, expect, it } from 'vitest';
import { serializeJob, type IngestJob, type PlacementTarget } from '../../src/ingest/worker/pipeline.ts';
import { decodeOtlp } from '../../src/ingest/otlp/index.ts';
import { parseOtlpJson } from '../../src/ingest/otlp/json.ts';
import { logLines } from '../../src/ingest/otlp/logLines.ts';
import { nanosToIso, timeColumn } from '../../src/ingest/otlp/values.ts';
import { placeRows } from '../../src/ingest/worker/placement.ts';
import { rowsToLines } from '../../src/ingest/worker/lines.ts';
import { withDecodeBudget, type RequestLimits } from '../../src/ingest/limits.ts';
import { emptySchema, type Schema } from '../../src/storage/dataset/schema.ts';
import type { ColumnType } from '../../src/model.ts';

const RECEIVED = '2026-11-25T10:00:00.123Z';
// No past bound (P_SIGNAL_TIME_PAST_LIMIT 0): the records are a year older than RECEIVED; the window has tests of its own.
const LIMITS: RequestLimits = { maxEvents: 100_000, maxValues: 4_000_000, maxNames: 1000, signalTimePastMs: 0 };

type Body = Record<string, unknown>;
const s = (v: string) => ({ stringValue: v });
const kv = (key: string, value: unknown) => ({ key, value });
const T0 = 1_764_064_800_000_000_000n; // 2025-11-25T10:00:00Z in ns

/** A log record with the usual fields; `extra` overrides or adds fields. */
const record = (i: number, extra: Record<string, unknown> = {}) => ({
  timeUnixNano: String(T0 + BigInt(i) * 1_000_123n),
  observedTimeUnixNano: String(T0 + BigInt(i) * 1_000_000n),
  severityNumber: 9,
  severityText: 'INFO',
  body: s(`message ${i}`),
  attributes: [kv('http.route', s('/api/cart')), kv('attempt', { intValue: String(i) })],
  traceId: '5b8efff798038103d269b633813fc60c',
  spanId: 'eee19b7ec3c1b174',
  flags: 1,
  ...extra,
});

const logs = (resourceLogs: unknown[]): Body => ({ resourceLogs });
const oneScope = (records: unknown[], resourceAttrs: unknown[] = [kv('service.name', s('checkout'))], scope: unknown = { name: 'lib', version: '1.2' }) =>
  logs([{ resource: { attributes: resourceAttrs }, scopeLogs: [{ scope, logRecords: records }] }]);

interface Outcome {
  rows: number;
  lines: unknown[];
  types: [string, ColumnType[]][];
  fixed: string[];
  info: unknown;
}

const parseLines = (text: string) => text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as unknown);
const asText = (lines: string | Uint8Array) => (typeof lines === 'string' ? lines : Buffer.from(lines).toString('utf8'));

/** The row path, as serializeJob ran it for every OTLP/JSON logs request before the direct path. */
function rowPath(body: Buffer, schema: Schema, maxColumns: number): Outcome {
  const request = parseOtlpJson(body);
  const d = withDecodeBudget(LIMITS, 'log records', () => decodeOtlp('logs', 'json', body, new Date(RECEIVED), request));
  for (const row of d.rows) row.p_timestamp = RECEIVED;
  const known: Record<string, ColumnType> = { ...d.knownTypes, p_timestamp: 'TIMESTAMP' };
  const types = placeRows(d.rows, known, schema, maxColumns, LIMITS.maxNames);
  return { rows: d.rows.length, lines: parseLines(rowsToLines(d.rows)), types: [...types], fixed: Object.keys(known), info: { rejected: d.rejected, rejectionMessage: d.rejectionMessage } };
}

function job(body: Buffer): IngestJob {
  return { kind: 'otlp', signal: 'logs', format: 'json', received: RECEIVED, body, maxDecompressedBytes: 64 << 20, limits: LIMITS };
}

function outcome(fn: () => Outcome): Outcome | { error: string } {
  try {
    return fn();
  } catch (err) {
    return { error: (err as Error).message };
  }
}

/** Runs both paths on `request` and expects the same outcome; returns whether the direct path took it. */
function compare(request: Body | string, schema: Schema = emptySchema(), maxColumns = 1000): boolean {
  const body = Buffer.from(typeof request === 'string' ? request : JSON.stringify(request));
  const before = outcome(() => rowPath(body, schema, maxColumns));
  let direct = false;
  const after = outcome(() => {
    const target: PlacementTarget = { schema, maxColumns };
    const r = serializeJob(job(Buffer.from(body)), target);
    direct = typeof r.lines !== 'string';
    if (direct) {
      // The range the flush relies on: exactly the stored time column's, in ms.
      const times = parseLines(asText(r.lines)).map((l) => Date.parse((l as { time_unix_nano: string }).time_unix_nano.slice(0, 23) + 'Z'));
      expect(r.timeRange).toEqual(times.length ? { minMs: Math.min(...times), maxMs: Math.max(...times) } : undefined);
    }
    return { rows: r.rows, lines: parseLines(asText(r.lines)), types: [...r.types], fixed: r.fixed, info: r.info };
  });
  expect(after).toStrictEqual(before);
  return direct;
}

const CASES: [string, Body | string, boolean][] = [
  ['the usual record', oneScope([record(0), record(1), record(2)]), true],
  [
    'every AnyValue kind as an attribute and as the body',
    oneScope([
      record(0, {
        attributes: [
          kv('str', s('text "quoted" \\ back\nline')),
          kv('bool', { boolValue: false }),
          kv('int', { intValue: '42' }),
          kv('int.bare', { intValue: 7 }),
          kv('int.big', { intValue: '9223372036854775807' }),
          kv('int.neg', { intValue: '-9007199254740993' }),
          kv('double', { doubleValue: 1.5 }),
          kv('double.int', { doubleValue: 3 }),
          kv('double.nan', { doubleValue: 'NaN' }),
          kv('double.inf', { doubleValue: 'Infinity' }),
          kv('double.ninf', { doubleValue: '-Infinity' }),
          kv('bytes', { bytesValue: Buffer.from([0, 1, 254, 255]).toString('base64') }),
          kv('array', { arrayValue: { values: [s('a'), { intValue: '1' }, { arrayValue: { values: [{ boolValue: true }] } }] } }),
          kv('map', { kvlistValue: { values: [kv('k', s('v')), kv('nested', { kvlistValue: { values: [kv('deep', { doubleValue: 2.5 })] } })] } }),
          kv('empty', {}),
          kv('null.value', null),
          kv('unicode', s('héllo wörld ✓ 😀')),
        ],
      }),
      record(1, { body: { kvlistValue: { values: [kv('a', { intValue: '1' }), kv('b', { arrayValue: { values: [s('x')] } })] } } }),
      record(2, { body: { bytesValue: 'AAEC' } }),
      record(3, { body: { intValue: '12' } }),
      record(4, { body: { boolValue: true } }),
      record(5, { body: { doubleValue: 0.25 } }),
      record(6, { body: { arrayValue: { values: [] } } }),
      record(7, { body: {} }),
    ]),
    true,
  ],
  [
    'missing fields: no times, ids, severity, body, attributes, scope or resource',
    logs([
      { scopeLogs: [{ logRecords: [{}, { timeUnixNano: '0', observedTimeUnixNano: String(T0) }, { severityText: '', eventName: 'evt' }] }] },
      { resource: {}, scopeLogs: [{ scope: {}, logRecords: [{ timeUnixNano: String(T0) }] }, { logRecords: [] }, {}] },
      {},
    ]),
    true,
  ],
  ['no records at all', logs([]), true],
  ['an empty object', {}, true],
  [
    'several resources and scopes, with attributes of each and new columns part way',
    logs([
      {
        resource: { attributes: [kv('service.name', s('a')), kv('host.name', s('h1'))], droppedAttributesCount: 2 },
        schemaUrl: 'https://opentelemetry.io/schemas/1.21.0',
        scopeLogs: [
          { scope: { name: 's1', attributes: [kv('scope.attr', { intValue: '1' })] }, logRecords: [record(0), record(1, { eventName: 'late' })] },
          { scope: { name: 's2', version: 'v', droppedAttributesCount: 1 }, schemaUrl: 'u2', logRecords: [record(2, { attributes: [kv('only.here', { boolValue: true })] })] },
        ],
      },
      {
        resource: { attributes: [kv('service.name', s('b')), kv('region', s('eu'))] },
        scopeLogs: [{ scope: { name: 's3', attributes: [kv('host.name', s('h2'))] }, logRecords: [record(3, { attributes: [kv('attempt', { doubleValue: 0.5 })] })] }],
      },
    ]),
    true,
  ],
  ['int64 times and counts as bare numbers (quoted before parsing)', `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":${T0 + 5n},"observedTimeUnixNano":${T0},"flags":4294967295,"droppedAttributesCount":3,"severityNumber":"SEVERITY_NUMBER_WARN","attributes":[{"key":"n","value":{"intValue":1234567890123456789}}]}]}]}]}`, true],
  ['snake_case field names', { resource_logs: [{ scope_logs: [{ log_records: [{ time_unix_nano: String(T0), severity_text: 'WARN', trace_id: '5B8EFFF798038103D269B633813FC60C', attributes: [kv('k', { string_value: 'v' })] }] }] }] }, true],
  ['upper-case hex ids', oneScope([record(0, { traceId: '5B8EFFF798038103D269B633813FC60C', spanId: 'EEE19B7EC3C1B174' })]), true],
  ['lone surrogates in values, kept well formed', `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":"${T0}","body":{"stringValue":"a\\ud83db"},"severityText":"\\udc00","attributes":[{"key":"k","value":{"stringValue":"x\\ud800"}}]}]}]}]}`, true],
  ['a value with a backslash before "ud" (not an escape)', oneScope([record(0, { body: s('C:\\ud83d\\udc00 path \\\\ud800') })]), true],
  ['a "__proto__" attribute', oneScope([record(0, { attributes: [kv('__proto__', s('p')), kv('constructor', s('c'))] })]), true],
  ['times out of order (the range is min and max, not first and last)', oneScope([record(5), record(1), record(9), record(3)]), true],
  // The row path takes these: the direct path leaves them to it.
  ['a record attribute overriding a resource attribute', oneScope([record(0, { attributes: [kv('service.name', s('override'))] })]), false],
  // Resource and scope attributes are merged before any record: no clash within a row.
  ['a scope attribute overriding a resource attribute', logs([{ resource: { attributes: [kv('k', s('r'))] }, scopeLogs: [{ scope: { attributes: [kv('k', { intValue: '2' })] }, logRecords: [record(0)] }] }]), true],
  ['an attribute named like a record column', oneScope([record(0, { attributes: [kv('body', s('shadowed')), kv('severity_text', { intValue: '1' })] })]), false],
  ['an attribute named like a resource column', oneScope([record(0)], [kv('scope_name', s('x'))]), false],
  ['an attribute named p_timestamp (overflow)', oneScope([record(0, { attributes: [kv('p_timestamp', s('x')), kv('P_Tags', s('y'))] })]), false],
  ['an empty attribute key (overflow)', oneScope([record(0, { attributes: [kv('', s('x'))] })]), false],
  ['a duplicated attribute key (the last wins)', oneScope([record(0, { attributes: [kv('dup', s('first')), kv('dup', { intValue: '2' })] })]), false],
  ['integer-like attribute keys', oneScope([record(0, { attributes: [kv('b', s('x')), kv('10', s('ten')), kv('2', s('two'))] })]), false],
  ['a control character in a key (cleaned by placement)', oneScope([record(0, { attributes: [kv('a\tb', s('x'))] })]), false],
  ['a lone surrogate in a key', `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":"${T0}","attributes":[{"key":"k\\ud800","value":{"stringValue":"v"}}]}]}]}]}`, false],
  ['a record with a bad trace id (rejected, the others kept)', oneScope([record(0), record(1, { traceId: 'abc' }), record(2, { spanId: 'zz' })]), false],
  ['a time after 2262 (rejected)', oneScope([record(0), record(1, { timeUnixNano: '18446744073709551615' })]), false],
  ['the same key with conflicting types across records (one moves to a typed column)', oneScope([record(0, { attributes: [kv('v', s('text'))] }), record(1, { attributes: [kv('v', { intValue: '1' })] })]), false],
  ['the same key as an integer, then a double (the column widens)', oneScope([record(0, { attributes: [kv('v', { intValue: '1' })] }), record(1, { attributes: [kv('v', { doubleValue: 1.5 })] })]), true],
];

const INVALID: [string, Body | string][] = [
  ['not JSON', '{"resourceLogs": ['],
  ['a string where a message belongs', { resourceLogs: ['x'] }],
  ['a number as severityText', oneScope([record(0, { severityText: 5 })])],
  ['a bad int', oneScope([record(0, { flags: 'many' })])],
  ['a bad time', oneScope([record(0, { timeUnixNano: '-1' })])],
  ['a bad attribute key', oneScope([record(0, { attributes: [{ key: 5, value: s('x') }] })])],
  ['bad base64 bytes', oneScope([record(0, { body: { bytesValue: '***' } })])],
  ['attributes that are not a list', oneScope([record(0, { attributes: { k: 'v' } })])],
];

describe('OTLP/JSON logs: the direct path stores what the row path stored', () => {
  for (const [name, request, direct] of CASES) {
    it(name, () => {
      expect(compare(request)).toBe(direct);
    });
  }

  for (const [name, request] of INVALID) {
    it(`fails as the row path does: ${name}`, () => {
      const body = Buffer.from(typeof request === 'string' ? request : JSON.stringify(request));
      expect(() => rowPath(body, emptySchema(), 1000)).toThrow();
      compare(request);
    });
  }

  it('takes the row path when a value must move against the schema, and stores it as that path does', () => {
    const schema = emptySchema();
    schema['http.route'] = 'BIGINT'; // a string into a BIGINT column goes to its typed sibling
    schema.attempt = 'VARCHAR'; // an int into a VARCHAR column is stored as text
    expect(compare(oneScope([record(0), record(1)]), schema)).toBe(false);
  });

  it('takes the row path beyond the column limit, where values go to the overflow column', () => {
    expect(compare(oneScope([record(0)]), emptySchema(), 5)).toBe(false);
  });

  it('keeps the direct path when the schema already holds every column', () => {
    const first = serializeJob(job(Buffer.from(JSON.stringify(oneScope([record(0)])))), { schema: emptySchema(), maxColumns: 1000 });
    const schema = emptySchema();
    for (const [name, types] of first.types) schema[name] = types[0];
    expect(compare(oneScope([record(1), record(2)]), schema)).toBe(true);
  });

  it('leaves a request with more distinct names than allowed to the row path (413 there)', () => {
    const many = oneScope([record(0, { attributes: Array.from({ length: 1001 }, (_, i) => kv(`k${i}`, s('v'))) })]);
    const request = parseOtlpJson(Buffer.from(JSON.stringify(many)));
    expect(logLines(request, nanosToIso(0n), RECEIVED, LIMITS.maxNames, 0)).toBeUndefined();
    compare(many);
  });

  it('writes lines in a buffer that grows past its first size hint', () => {
    const big = oneScope(Array.from({ length: 300 }, (_, i) => record(i, { body: s('x'.repeat(1000)) })));
    const request = parseOtlpJson(Buffer.from(JSON.stringify(big)));
    const out = logLines(request, nanosToIso(0n), RECEIVED, LIMITS.maxNames, 0)!;
    expect(out.rows).toBe(300);
    expect(out.lines.byteOffset).toBe(0);
    expect(out.lines.byteLength).toBe(out.lines.buffer.byteLength);
    expect(compare(big)).toBe(true);
  });
});

describe('parseOtlpJson: bare 64-bit integers are quoted before parsing, nothing else is', () => {
  const CASES: [string, string, unknown][] = [
    ['a bare unsafe integer', '{"v":1234567890123456789}', '1234567890123456789'],
    ['a bare unsafe negative integer', '{"v":-1234567890123456789}', '-1234567890123456789'],
    ['in an array, after a comma', '{"v":[1,-9223372036854775808]}', [1, '-9223372036854775808']],
    ['a safe 16-digit integer stays a number', '{"v":1234567890123456}', 1234567890123456],
    ['a quoted integer stays as sent', '{"v":"1234567890123456789"}', '1234567890123456789'],
    ['a quoted negative integer stays as sent', '{"v":"-1234567890123456789"}', '-1234567890123456789'],
    ['digits inside a string after a colon', '{"v":"a:-12345678901234567890 b"}', 'a:-12345678901234567890 b'],
    ['digits after an escaped quote inside a string', '{"v":"x\\"12345678901234567890"}', 'x"12345678901234567890'],
    ['a double with a long integer part', '{"v":12345678901234567890.5}', 12345678901234567890.5],
    ['a double with an exponent', '{"v":-12345678901234567890e2}', -12345678901234567890e2],
    ['after a string holding digits', '{"a":"1234567890123456789","v":9007199254740993}', '9007199254740993'],
  ];
  for (const [name, text, expected] of CASES) {
    it(name, () => {
      expect(parseOtlpJson(Buffer.from(text)).v).toStrictEqual(expected);
    });
  }
});

describe('timeColumn: decimal text is cut as nanosToIso formats the same value', () => {
  const CASES = ['1000000000000000000', '1764064800000000000', '1764064800123456789', '1764064800000000001', '8999999999999999999', '1999999999999999999', '2000000000999999999', '1234567890000000000'];
  for (const text of CASES) {
    it(text, () => {
      expect(timeColumn(text, 'at', 'f')).toBe(nanosToIso(BigInt(text)));
      // A protobuf Long of the same value takes the general path to the same text.
      const n = BigInt(text);
      expect(timeColumn({ low: Number(n & 0xffffffffn) | 0, high: Number(n >> 32n) | 0 }, 'at', 'f')).toBe(nanosToIso(n));
    });
  }
  it('leaves other texts to the general path (leading zeros, 9e18 and later, fewer digits)', () => {
    expect(timeColumn('0001764064800000000000', 'at', 'f')).toBe(nanosToIso(1764064800000000000n));
    expect(timeColumn('9223372036854775806', 'at', 'f')).toBe(nanosToIso(9223372036854775806n));
    expect(timeColumn('1764064800', 'at', 'f')).toBe(nanosToIso(1764064800n));
    expect(timeColumn('0', 'at', 'f')).toBeNull();
    expect(() => timeColumn('-1764064800000000000', 'at', 'f')).toThrow();
  });
});
