import { describe, expect, it } from 'vitest';
import { flattenEvent } from '../../src/ingest/json/flatten.ts';
import { rowsToLines } from '../../src/ingest/worker/lines.ts';
import { cleanName, copyRow, fixLoneSurrogates, isServiceName, setField } from '../../src/ingest/names.ts';
import { OVERFLOW, type FlatRow } from '../../src/model.ts';

describe('cleanName', () => {
  const cases: [string, string][] = [
    ['plain', 'plain'],
    ['a\u0000b', 'ab'],
    ['ctl\u0001\n\t\u001f\u007fname', 'ctlname'],
    ['\ud83dtruncated', '\ufffdtruncated'],
    ['low\udc00', 'low\ufffd'],
    ['emoji \ud83d\ude00 ok', 'emoji \ud83d\ude00 ok'],
    ['é.ß K', 'é.ß K'],
    ['\u0000', ''],
  ];
  it.each(cases)('%j → %j', (name, clean) => expect(cleanName(name)).toBe(clean));
});

describe('fixLoneSurrogates over serialised lines', () => {
  const cases: [unknown, unknown][] = [
    [{ v: '\ud83d truncated' }, { v: '\ufffd truncated' }],
    [{ v: 'pair \ud83d\ude00' }, { v: 'pair \ud83d\ude00' }],
    [{ v: 'text \\ud83d stays' }, { v: 'text \\ud83d stays' }],
    [{ v: '\\\ud83d' }, { v: '\\\ufffd' }],
    [{ v: ['\udfff', 'x'] }, { v: ['\ufffd', 'x'] }],
    [{ v: 'nul \u0000 kept' }, { v: 'nul \u0000 kept' }],
  ];
  it.each(cases)('%j', (row, expected) => {
    const text = fixLoneSurrogates(`${JSON.stringify(row)}\n`);
    expect(JSON.parse(text)).toEqual(expected);
    expect((text as unknown as { isWellFormed(): boolean }).isWellFormed()).toBe(true);
    expect(text).not.toMatch(/(?<!\\)(\\\\)*\\ud[89a-f]/);
  });
});

describe('service names and safe fields', () => {
  const cases: [string, boolean][] = [
    ['p_timestamp', true],
    ['P_TIMESTAMP', true],
    ['p_overflow', true],
    ['p_src_ip', true],
    ['p_other', false],
    ['timestamp', false],
    ['p_', false],
  ];
  it.each(cases)('isServiceName(%j) = %s', (name, expected) => expect(isServiceName(name)).toBe(expected));

  it('setField and copyRow keep a field named __proto__ as a field', () => {
    const row: FlatRow = {};
    setField(row, '__proto__', 'p');
    setField(row, 'constructor', 'c');
    expect(Object.getPrototypeOf(row)).toBe(Object.prototype);
    expect(rowsToLines([row])).toBe('{"__proto__":"p","constructor":"c"}\n');
    const copy = copyRow(row);
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
    expect(Object.entries(copy).sort()).toEqual([
      ['__proto__', 'p'],
      ['constructor', 'c'],
    ]);
  });

  it('flattenEvent: Object.prototype names are fields; duplicates and service names go to the overflow', () => {
    const event = JSON.parse('{"constructor":1,"toString":"t","__proto__":{"x":2},"a_b":1,"a":{"b":2},"p_timestamp":"mine","hasOwnProperty":false}') as Record<string, unknown>;
    const row = flattenEvent(event, 10);
    expect(Object.entries(row)).toEqual([
      ['constructor', 1],
      ['toString', 't'],
      ['__proto___x', 2],
      ['a_b', 1],
      ['hasOwnProperty', false],
    ]);
    expect(row[OVERFLOW]).toEqual([
      ['a_b', 2],
      ['p_timestamp', 'mine'],
    ]);
  });
});
