import { describe, expect, it } from 'vitest';
import { eventTime, isTimeName, isoOf, parseTimestamp, timeFieldRule } from '../../src/ingest/json/eventTime.ts';
import { eventsFromJson } from '../../src/ingest/json/flatten.ts';
import { jsonEventsToBatch, type EventStamp } from '../../src/ingest/json/jsonEvents.ts';
import { jsonEventsToLines } from '../../src/ingest/json/jsonLines.ts';
import { rowsToLines } from '../../src/ingest/worker/lines.ts';
import { placeRows, timeGuess } from '../../src/ingest/worker/placement.ts';
import { timeFieldFromHeaders } from '../../src/doors/http/datasetRoutes.ts';
import { emptySchema, type Schema } from '../../src/storage/dataset/schema.ts';

const ms = (iso: string) => Date.parse(iso);

describe('parseTimestamp: the forms a string time may take', () => {
  it.each([
    ['2026-11-25T10:00:00Z', '2026-11-25T10:00:00.000Z'],
    ['2026-11-25T10:00:00.123Z', '2026-11-25T10:00:00.123Z'],
    ['2026-11-25T10:00:00.1Z', '2026-11-25T10:00:00.100Z'],
    ['2026-11-25T10:00:00.123456789Z', '2026-11-25T10:00:00.123Z'],
    ['2026-11-25T10:00:00,5Z', '2026-11-25T10:00:00.500Z'],
    ['2026-11-25T10:00:00+02:00', '2026-11-25T08:00:00.000Z'],
    ['2026-11-25T10:00:00-0330', '2026-11-25T13:30:00.000Z'],
    ['2026-11-25t10:00:00z', '2026-11-25T10:00:00.000Z'],
    ['2026-11-25 10:00:00', '2026-11-25T10:00:00.000Z'], // no zone: UTC
    ['2026-11-25 10:00:00.250', '2026-11-25T10:00:00.250Z'],
    ['2024-02-29T23:59:59Z', '2024-02-29T23:59:59.000Z'],
    ['0099-01-01T00:00:00Z', '0099-01-01T00:00:00.000Z'],
    ['2026-01-01T00:30:00+01:00', '2025-12-31T23:30:00.000Z'],
    ['Wed, 25 Nov 2026 10:00:00 +0200', '2026-11-25T08:00:00.000Z'], // RFC 2822
    ['25 Nov 2026 10:00 GMT', '2026-11-25T10:00:00.000Z'],
    ['Wed, 25 Nov 2026 10:00:00 EST', '2026-11-25T15:00:00.000Z'],
  ])('%s is %s', (text, iso) => {
    expect(new Date(parseTimestamp(text)).toISOString()).toBe(iso);
    expect(isoOf(text, parseTimestamp(text))).toBe(iso);
  });

  it.each([
    '2026-11-25', // a date is not a time
    '2026-11-25T10:00', // seconds required
    '2026-11-25T10:00:00.', // a dot without digits
    '2026-11-25T10:00:00.1234567890Z', // more than nanoseconds
    '2026-02-29T00:00:00Z', // not a leap year
    '2026-13-01T00:00:00Z',
    '2026-11-31T00:00:00Z',
    '2026-11-25T24:00:00Z',
    '2026-11-25T10:60:00Z',
    '2026-11-25T10:00:60Z',
    '2026-11-25T10:00:00+24:00',
    '2026-11-25T10:00:00+02',
    '2026-11-25T10:00:00 UTC',
    '2026-11-25T10:00:00Zjunk',
    ' 2026-11-25T10:00:00Z',
    '9999-12-31T23:00:00-02:00', // past the year 9999 in UTC
    '0000-01-01T00:00:00Z',
    '1732530000', // epoch numbers in strings are not times
    '1732530000000',
    'yesterday',
    '',
    'Wed, 25 Nov 2026 10:00:00 XYZ',
    '31 Feb 2026 10:00:00 GMT',
  ])('%j is not a time', (text) => {
    expect(parseTimestamp(text)).toBeNaN();
  });

  it('an input already in the stored form is kept as it is', () => {
    const s = '2026-11-25T10:00:00.123Z';
    expect(isoOf(s, parseTimestamp(s))).toBe(s);
  });
});

describe('isTimeName: Parseable\'s name parts', () => {
  it.each([
    ['timestamp', true],
    ['created_at', true],
    ['EventTime', true],
    ['date', true],
    ['ts', true],
    ['start', true],
    ['end', true],
    ['received', true],
    ['ingested_on', true],
    ['collected', true],
    ['dt', true],
    ['message', false],
    ['level', false],
    ['host_name', false],
  ])('%s → %s', (name, yes) => {
    expect(isTimeName(name)).toBe(yes);
  });
});

describe('eventTime: a dataset time field on one event', () => {
  const received = ms('2026-11-25T12:00:00Z');
  const rule = timeFieldRule('ts', 10, received);
  it.each([
    [undefined, /event 3: time field "ts" is missing/],
    [null, /is missing/],
    [1732530000, /is a number, not a timestamp string/],
    [[1], /is a list/],
    [true, /is a boolean/],
    ['soon', /holds "soon", which is not a timestamp/],
    ['2026-11-15T11:59:59.999Z', /more than 10 days ago/],
    // Bounded ahead (issue 30 A10): an hour past the receive time by default.
    [new Date(received + 3_600_001).toISOString(), /more than 3600 s after the request was received \(P_EVENT_TIME_FUTURE_LIMIT\)/],
    ['2037-11-25 12:00:00', /P_EVENT_TIME_FUTURE_LIMIT/],
  ])('%j is refused', (value, message) => {
    expect(() => eventTime(value, rule, 3)).toThrow(message);
  });
  it.each([
    ['2026-11-15T12:00:00Z', '2026-11-15T12:00:00.000Z'], // exactly the limit
    [new Date(received + 3_600_000).toISOString(), new Date(received + 3_600_000).toISOString()], // exactly the future limit
  ])('%s is stored as %s', (value, iso) => {
    expect(eventTime(value, rule, 0)).toBe(iso);
  });
  it('the future limit is a setting', () => {
    const day = timeFieldRule('ts', 10, received, 86_400_000);
    expect(eventTime(new Date(received + 86_400_000).toISOString(), day, 0)).toBe(new Date(received + 86_400_000).toISOString());
    expect(() => eventTime(new Date(received + 86_400_001).toISOString(), day, 0)).toThrow(/more than 86400 s after/);
  });
  it('defaults to Parseable\'s 30 days back and an hour ahead', () => {
    expect(timeFieldRule('ts', undefined, received)).toEqual({ field: 'ts', limitDays: 30, earliestMs: received - 30 * 86_400_000, latestMs: received + 3_600_000, futureMs: 3_600_000 });
  });
});

describe('timeFieldFromHeaders: X-P-Time-Partition and -Limit', () => {
  it.each([
    ['json', undefined, undefined, undefined],
    ['json', '', '', undefined],
    ['json', 'p_timestamp', undefined, undefined],
    ['json', 'event_time', undefined, { field: 'event_time' }],
    ['json', ' event_time ', '7d', { field: 'event_time', limitDays: 7 }],
    ['otel-logs', undefined, undefined, undefined],
  ] as const)('%s %j %j → %j', (kind, partition, limit, expected) => {
    expect(timeFieldFromHeaders(kind, partition, limit)).toEqual(expected);
  });
  it.each([
    ['json', 'ts', '7', /is not a number of days/],
    ['json', 'ts', '0d', /is not a number of days/],
    ['json', 'ts', '-1d', /is not a number of days/],
    ['json', 'ts', '1.5d', /is not a number of days/],
    ['json', undefined, '7d', /send it with X-P-Time-Partition/],
    ['json', 'p_src_ip', undefined, /cannot be a column name/],
    ['json', 'x'.repeat(256), undefined, /cannot be a column name/],
    ['otel-traces', 'ts', undefined, /JSON datasets/],
  ] as const)('%s %j %j is refused', (kind, partition, limit, message) => {
    expect(() => timeFieldFromHeaders(kind, partition, limit)).toThrow(message);
  });
});

describe('times in JSON events: the one-pass path writes what the row path writes', () => {
  const stamp: EventStamp = { received: '2026-11-25T12:00:00.000Z', meta: null, tags: null, srcIp: '10.0.0.1', userAgent: 'ua', fields: [] };
  const schemaOf = (cols: Schema) => Object.assign(emptySchema(), cols);

  function both(body: string, schema: Schema, field?: string) {
    const rule = field === undefined ? undefined : timeFieldRule(field, 30, Date.parse(stamp.received));
    const fast = jsonEventsToLines(eventsFromJson(JSON.parse(body)), stamp, 4, 1000, { guess: timeGuess(schema), rule });
    const { rows, knownTypes } = jsonEventsToBatch(JSON.parse(body), stamp, 4, rule);
    const types = placeRows(rows, knownTypes, schema, 100, Infinity, timeGuess(schema));
    return { fast, slow: { text: rowsToLines(rows), types } };
  }

  it.each([
    ['[{"ts":"2026-11-25T10:00:00+02:00","msg":"a"},{"ts":"2026-11-25 10:00:00","msg":"b"}]', {}, 'ts'],
    ['[{"created_at":"2026-11-25T10:00:00Z","note":"2026-11-25T10:00:00Z","n":1}]', {}, undefined],
    ['[{"event":{"time":"Wed, 25 Nov 2026 10:00:00 +0000"}}]', {}, 'event_time'],
    ['[{"start":"2026-11-25T10:00:00.123456Z","end":"later"}]', { start: 'TIMESTAMP', end: 'VARCHAR' }, undefined],
  ] as const)('%s', (body, cols, field) => {
    const { fast, slow } = both(body, schemaOf(cols as Schema), field);
    expect(fast).toBeDefined();
    expect(fast!.text).toBe(slow.text);
    expect([...fast!.types]).toEqual([...slow.types]);
  });

  it('stores a time in ISO form, and as it came when its column is text', () => {
    const { slow } = both('[{"ts":"2026-11-25T10:00:00+02:00"}]', schemaOf({}));
    expect(JSON.parse(slow.text).ts).toBe('2026-11-25T08:00:00.000Z');
    expect(slow.types.get('ts')).toEqual(['TIMESTAMP']);
    const text = both('[{"ts":"2026-11-25T10:00:00+02:00"}]', schemaOf({ ts: 'VARCHAR' }));
    expect(JSON.parse(text.slow.text).ts).toBe('2026-11-25T10:00:00+02:00');
    expect(text.fast!.types.get('ts')).toEqual(['VARCHAR']);
  });

  it('a value that is not a time into a TIMESTAMP column goes to the _utf8 sibling (row path)', () => {
    const { fast, slow } = both('[{"ts":"2026-11-25T10:00:00Z"},{"ts":"soon"}]', schemaOf({ ts: 'TIMESTAMP' }));
    const lines = slow.text.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.map((l) => [l.ts, l.ts_utf8])).toEqual([
      ['2026-11-25T10:00:00.000Z', undefined],
      [undefined, 'soon'],
    ]);
    expect(fast).toBeDefined(); // the one-pass summary is placed by the caller, which sees the move
  });

  it('the time field is checked on both paths alike', () => {
    const rule = timeFieldRule('ts', 30, Date.parse(stamp.received));
    const fast = (body: string) => () => jsonEventsToLines(eventsFromJson(JSON.parse(body)), stamp, 4, 1000, { rule });
    const slow = (body: string) => () => jsonEventsToBatch(JSON.parse(body), stamp, 4, rule);
    const missing = '[{"ts":"2026-11-25T10:00:00Z"},{"msg":"x"}]';
    expect(fast(missing)).toThrow(/event 1: time field "ts" is missing/);
    expect(slow(missing)).toThrow(/event 1: time field "ts" is missing/);
    // A duplicate name after flattening: the one-pass path gives up, the row path refuses.
    const odd = '[{"a_b":1,"a":{"b":2},"msg":"x"}]';
    expect(fast(odd)()).toBeUndefined();
    expect(slow(odd)).toThrow(/event 0: time field "ts" is missing/);
  });

  // The flush writes straight from the WAL when the range spans a few minutes (storage/files/flush.ts).
  it.each<[string, string | undefined, { minMs: number; maxMs: number } | undefined]>([
    ['[{"ts":"2026-11-25T10:00:00+02:00"},{"ts":"2026-11-25 07:59:59.5"},{"ts":"2026-11-25T11:00:00Z"}]', 'ts', { minMs: ms('2026-11-25T07:59:59.500Z'), maxMs: ms('2026-11-25T11:00:00Z') }],
    ['[{"ts":"2026-11-25T10:00:00Z"}]', 'ts', { minMs: ms('2026-11-25T10:00:00Z'), maxMs: ms('2026-11-25T10:00:00Z') }],
    ['[{"ts":"2026-11-25T10:00:00Z","end":"2026-11-25T12:00:00Z"}]', undefined, undefined],
    ['[]', 'ts', undefined],
  ])('both paths report the range of the time field: %s', (body, field, range) => {
    const rule = field === undefined ? undefined : timeFieldRule(field, 30, Date.parse(stamp.received));
    expect(jsonEventsToLines(eventsFromJson(JSON.parse(body)), stamp, 4, 1000, { guess: timeGuess(emptySchema()), rule })!.timeRange).toEqual(range);
    expect(jsonEventsToBatch(JSON.parse(body), stamp, 4, rule).timeRange).toEqual(range);
  });
});
