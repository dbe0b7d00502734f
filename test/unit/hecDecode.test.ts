import { describe, expect, it } from 'vitest';
import { decodeEvents, decodeRaw, HecError, splitConcatenated } from '../../src/ingest/hec/decode.ts';

const R = '2026-11-28T00:00:00.000Z';
const decode = (text: string) => Object.fromEntries([...decodeEvents(Buffer.from(text), { dataset: 'hec', receivedIso: R })].map(([d, evs]) => [d, evs.map((e) => JSON.parse(e) as unknown)]));

describe('splitConcatenated', () => {
  it.each([
    ['{"a":1}{"b":2}', ['{"a":1}', '{"b":2}']],
    ['{"a":1}\n{"b":"}{"}\r\n {"c":{"d":[1]}}', ['{"a":1}', '{"b":"}{"}', '{"c":{"d":[1]}}']],
    ['{"s":"\\"}"}', ['{"s":"\\"}"}']],
  ])('%s', (text, parts) => expect(splitConcatenated(text)).toEqual(parts));
  it.each(['{"a":1', '{"a":1}x', '{"a":1}}', 'null'])('refuses %s', (text) => expect(() => splitConcatenated(text)).toThrow(HecError));
});

describe('decodeEvents', () => {
  it.each([
    ['a string event with its metadata', '{"time":1764324000.25,"host":"h","source":"s","sourcetype":"st","event":"hello","fields":{"env":"prod"}}', { hec: [{ env: 'prod', host: 'h', source: 's', sourcetype: 'st', event: 'hello', time: new Date(1764324000250).toISOString() }] }],
    ['an object event, time as text, index as dataset', '{"time":"1764324000","index":"web","event":{"msg":"x"}}', { web: [{ event: { msg: 'x' }, time: new Date(1764324000000).toISOString() }] }],
    ['no time: the receive time', '{"event":"a"}{"event":"b","index":"other"}', { hec: [{ event: 'a', time: R }], other: [{ event: 'b', time: R }] }],
  ])('%s', (_name, text, groups) => expect(decode(text)).toEqual(groups));

  it.each([
    ['no event field', '{"event":"a"}{"time":1}', 12, 1],
    ['a blank event', '{"event":""}', 13, 0],
    ['an event that is not an object', '{"event":"a"}[1]', 6, 1],
    ['a time that is not a number', '{"event":"a","time":"yesterday"}', 6, 0],
    ['fields that are not an object', '{"event":"a","fields":[1]}', 6, 0],
    ['truncated', '{"event":"a"}{"event":', 6, 1],
  ])('%s: Splunk code %i at event %i, nothing decoded', (_name, text, code, n) => {
    let err: unknown;
    try {
      decode(text);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(HecError);
    expect({ code: (err as HecError).code, n: (err as HecError).invalidEventNumber }).toEqual({ code, n });
  });

  it('an empty body is "No data" (code 5)', () => expect(() => decode('  \n')).toThrow(expect.objectContaining({ code: 5 })));
});

describe('decodeRaw', () => {
  it('one event per non-empty line, with the query string\'s metadata', () => {
    const out = decodeRaw(Buffer.from('a line\r\n\nsecond\n'), { host: 'h', source: undefined, sourcetype: 'st' }, R).map((e) => JSON.parse(e) as unknown);
    expect(out).toEqual([
      { host: 'h', sourcetype: 'st', event: 'a line', time: R },
      { host: 'h', sourcetype: 'st', event: 'second', time: R },
    ]);
  });
});
