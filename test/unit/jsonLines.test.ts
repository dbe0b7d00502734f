import { describe, expect, it } from 'vitest';
import { jsonEventsToBatch, type EventStamp } from '../../src/ingest/json/jsonEvents.ts';
import { eventsFromJson } from '../../src/ingest/json/flatten.ts';
import { jsonEventsToLines } from '../../src/ingest/json/jsonLines.ts';
import { rowsToLines } from '../../src/ingest/worker/lines.ts';
import { summarizeTypes } from '../../src/ingest/worker/placement.ts';

const stamp: EventStamp = { received: '2026-01-01T00:00:00.000Z', meta: 'a=1', tags: null, srcIp: '10.0.0.1', userAgent: 'ua "x"', fields: [['env', 'prod'], ['level', 'x']] };

/** The one-pass path must write exactly what the row path writes, or give up. */
function both(body: string, maxNames = 1000) {
  const parsed = JSON.parse(body);
  const fast = jsonEventsToLines(eventsFromJson(parsed), stamp, 4, maxNames);
  const { rows, knownTypes } = jsonEventsToBatch(JSON.parse(body), stamp, 4);
  const types = summarizeTypes(rows, knownTypes);
  const lines = rowsToLines(rows);
  return { fast, slow: { text: lines, types } };
}

describe('one-pass JSON lines', () => {
  it.each([
    '[{"a":1,"b":"x","c":true,"d":1.5,"e":null,"f":[1,"two",{"g":3}]}]',
    '[{"http":{"method":"GET","status":200,"t":{"ms":1.25}}},{"http":{"method":"PUT"},"x":"\\u00e9\\ud83d\\ude00"},{}]',
    '[{"level":"info","a":{}},{"b":2},{"b":2.5},{"b":"text"},{"a":{"b":null}}]',
    '{"constructor":{"name":"c"},"toString":1,"valueOf":[1]}',
    '[{"n":12345678901234567890,"m":-0,"k":1e-7,"big":9007199254740993}]',
    '[{"a":[]},{"a":[[[1]]]},{"env":"own"}]',
    '[{"s":"line\\nbreak\\t\\"q\\" \\\\ \\u0001"}]',
  ])('matches the row path: %s', (body) => {
    const { fast, slow } = both(body);
    expect(fast).toBeDefined();
    expect(fast!.text).toBe(slow.text);
    expect([...fast!.types]).toEqual([...slow.types]);
  });

  it.each([
    '[{"a_b":1,"a":{"b":2}}]', // a duplicate after flattening
    '[{"p_timestamp":"x"}]', // a service column
    '[{"P_Tags":"x"}]',
    '{"__proto__":"p"}', // set with defineProperty by the row path
    '[{"a":{"b":{"c":{"d":{"e":1}}}}}]', // deeper than 4
    '[{"a":[[[[[1]]]]]}]',
  ])('gives up where the row path has a rule: %s', (body) => {
    expect(jsonEventsToLines(eventsFromJson(JSON.parse(body)), stamp, 4, 1000)).toBeUndefined();
  });

  it('gives up past the distinct-names limit', () => {
    const body = JSON.stringify([Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`k${i}`, i]))]);
    expect(both(body, 10).fast).toBeUndefined();
    expect(both(body, 100).fast).toBeDefined();
  });
});
