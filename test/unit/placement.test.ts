import { describe, expect, it } from 'vitest';
import { applyMoves, placeRows, placeValues, summarizeTypes } from '../../src/ingest/worker/placement.ts';
import { OVERFLOW, type ColumnType, type FlatRow } from '../../src/model.ts';
import { emptySchema, fit, planSchema, type Schema, type TypeSummary } from '../../src/storage/dataset/schema.ts';

const schema = (entries: Record<string, ColumnType>): Schema => Object.assign(emptySchema(), entries);
const summary = (entries: [string, ColumnType[]][]): TypeSummary => new Map(entries);
const NONE = new Set<string>();

describe('fit: how a value type fits a column type', () => {
  const cases: [ColumnType, ColumnType, string][] = [
    ['BIGINT', 'BIGINT', 'same'],
    ['DOUBLE', 'BIGINT', 'same'],
    ['BIGINT', 'DOUBLE', 'widen'],
    ['VARCHAR', 'BIGINT', 'text'],
    ['VARCHAR', 'BOOLEAN', 'text'],
    ['VARCHAR', 'DOUBLE[]', 'text'],
    ['TIMESTAMP', 'TIMESTAMP_NS', 'widen'],
    ['TIMESTAMP_NS', 'TIMESTAMP', 'same'],
    ['BIGINT', 'VARCHAR', 'conflict'],
    ['BOOLEAN', 'BIGINT', 'conflict'],
    ['DOUBLE[]', 'VARCHAR[]', 'conflict'],
  ];
  it.each(cases)('column %s, value %s → %s', (column, value, expected) => expect(fit(column, value)).toBe(expected));
});

describe('placeValues: where each (name, type) of a batch goes', () => {
  const cases: { name: string; current: Record<string, ColumnType>; batch: [string, ColumnType[]][]; max?: number; fixed?: string[]; moves: Record<string, Partial<Record<ColumnType, [string | null, boolean]>>> | undefined }[] = [
    { name: 'new columns and same types: nothing moves', current: { a: 'BIGINT' }, batch: [['a', ['BIGINT']], ['b', ['VARCHAR']]], moves: undefined },
    { name: 'a fraction into BIGINT widens, nothing moves', current: { a: 'BIGINT' }, batch: [['a', ['DOUBLE']]], moves: undefined },
    { name: 'a number into VARCHAR is stored as text', current: { a: 'VARCHAR' }, batch: [['a', ['BIGINT', 'BOOLEAN']]], moves: { a: { BIGINT: ['a', true], BOOLEAN: ['a', true] } } },
    { name: 'a string into BIGINT goes to the _utf8 sibling', current: { n: 'BIGINT' }, batch: [['n', ['VARCHAR']]], moves: { n: { VARCHAR: ['n_utf8', false] } } },
    { name: 'a boolean into DOUBLE goes to _bool, a string to _utf8', current: { n: 'DOUBLE' }, batch: [['n', ['BOOLEAN', 'VARCHAR', 'BIGINT']]], moves: { n: { BOOLEAN: ['n_bool', false], VARCHAR: ['n_utf8', false] } } },
    { name: 'mixed types in one batch for a new column: the first type takes it', current: {}, batch: [['x', ['BIGINT', 'VARCHAR']]], moves: { x: { VARCHAR: ['x_utf8', false] } } },
    { name: 'an existing sibling of another type takes text', current: { n: 'BIGINT', n_bool: 'VARCHAR' }, batch: [['n', ['BOOLEAN']]], moves: { n: { BOOLEAN: ['n_bool', true] } } },
    { name: 'a sibling that conflicts too: overflow', current: { n: 'BIGINT', n_utf8: 'BOOLEAN' }, batch: [['n', ['VARCHAR']]], moves: { n: { VARCHAR: [null, false] } } },
    { name: 'letter-case clash with a column: overflow', current: { level: 'VARCHAR' }, batch: [['Level', ['VARCHAR']]], moves: { Level: { VARCHAR: [null, false] } } },
    { name: 'letter-case clash inside the batch: the first keeps it', current: {}, batch: [['dup', ['BIGINT']], ['Dup', ['BIGINT']]], moves: { Dup: { BIGINT: [null, false] } } },
    { name: 'empty name: overflow', current: {}, batch: [['', ['BIGINT']]], moves: { '': { BIGINT: [null, false] } } },
    { name: 'a name over 255 characters: overflow', current: {}, batch: [['n'.repeat(256), ['BIGINT']], ['m'.repeat(255), ['BIGINT']]], moves: { ['n'.repeat(256)]: { BIGINT: [null, false] } } },
    { name: 'NUL and control characters are removed from names', current: {}, batch: [['a\u0000b', ['BIGINT']], ['c\nd', ['VARCHAR']]], moves: { 'a\u0000b': { BIGINT: ['ab', false] }, 'c\nd': { VARCHAR: ['cd', false] } } },
    { name: 'a lone surrogate in a name becomes U+FFFD', current: {}, batch: [['\ud83dk', ['VARCHAR']]], moves: { '\ud83dk': { VARCHAR: ['\ufffdk', false] } } },
    { name: 'a name of only control characters is empty after cleaning: overflow', current: {}, batch: [['\u0000\u0001', ['VARCHAR']]], moves: { '\u0000\u0001': { VARCHAR: [null, false] } } },
    { name: 'Object.prototype names are ordinary', current: { constructor: 'BIGINT' as ColumnType }, batch: [['constructor', ['BIGINT']], ['__proto__', ['VARCHAR']], ['toString', ['BOOLEAN']]], moves: undefined },
    { name: 'beyond P_MAX_COLUMNS: overflow', current: { a: 'BIGINT', b: 'BIGINT' }, batch: [['c', ['BIGINT']], ['d', ['BIGINT']]], max: 3, moves: { d: { BIGINT: [null, false] } } },
    { name: 'columns the format defines are added beyond the limit, and first', current: { a: 'BIGINT' }, batch: [['P_TIMESTAMP', ['VARCHAR']], ['p_timestamp', ['TIMESTAMP']]], max: 1, fixed: ['p_timestamp'], moves: { P_TIMESTAMP: { VARCHAR: [null, false] } } },
  ];
  it.each(cases)('$name', ({ current, batch, max, fixed, moves }) => {
    const got = placeValues(schema(current), summary(batch), max ?? 100, new Set(fixed ?? []));
    const plain = got && Object.fromEntries([...got].map(([n, byType]) => [n, Object.fromEntries([...byType].map(([t, target]) => [t, [target.column, target.text]]))]));
    expect(plain).toEqual(moves);
  });

  it('the overflow column cannot be created when a column of another case holds its name: 400', () => {
    expect(() => placeValues(schema({ P_OVERFLOW: 'BIGINT' }), summary([['', ['BIGINT']]]), 100, NONE)).toThrow(/p_overflow/);
  });
});

describe('placeRows: rows after placement', () => {
  it('moves values, keeps others, writes the overflow column, and summarises what is left', () => {
    const rows: FlatRow[] = [
      { n: 1, s: 'a' },
      { n: 'two', s: 3, Level: 'x' },
      { n: true, 'a\u0000b': 1, ab: 2 },
    ];
    (rows[0][OVERFLOW] = [['p_timestamp', 'client']]);
    const types = placeRows(rows, {}, schema({ n: 'BIGINT', s: 'VARCHAR', level: 'VARCHAR' }), 100);
    expect(rows).toEqual([
      { n: 1, s: 'a', p_overflow: '{"p_timestamp":"client"}' },
      { n_utf8: 'two', s: '3', p_overflow: '{"Level":"x"}' },
      { n_bool: true, ab: 1, p_overflow: '{"ab":2}' },
    ]);
    expect([...types]).toEqual([
      ['n', ['BIGINT']],
      ['s', ['VARCHAR']],
      ['p_overflow', ['VARCHAR']],
      ['n_utf8', ['VARCHAR']],
      ['n_bool', ['BOOLEAN']],
      ['ab', ['BIGINT']],
    ]);
    // What the worker produced fits the schema on the main thread as it is.
    expect(planSchema(schema({ n: 'BIGINT', s: 'VARCHAR', level: 'VARCHAR' }), types, 100).conflict).toBeUndefined();
  });

  it('overflow keeps every value of a repeated name, made well-formed', () => {
    const rows: FlatRow[] = [{ a: 1 }];
    rows[0][OVERFLOW] = [['x', '\ud83d'], ['x', 2], ['\udc00', [1, '\ud800']]];
    applyMoves(rows, new Map(), {});
    expect(rows[0]).toEqual({ a: 1, p_overflow: '{"x":"\ufffd","x#2":2,"\ufffd":[1,"\ufffd"]}' });
  });

  it('summarizeTypes: more distinct names than the limit is 413', () => {
    const rows: FlatRow[] = [{ a: 1, b: 2 }, { c: 3, a: 'x' }];
    expect([...summarizeTypes(rows, {}, 3).keys()]).toEqual(['a', 'b', 'c']);
    expect(() => summarizeTypes([...rows, { d: 1 }], {}, 3)).toThrow(/more than 3 distinct field names/);
  });

  it('summarizeTypes uses the known types, never Object.prototype members', () => {
    const s = summarizeTypes([{ p_timestamp: '2026-01-01T00:00:00Z', constructor: 'c', toString: 1 }], { p_timestamp: 'TIMESTAMP' });
    expect([...s]).toEqual([
      ['p_timestamp', ['TIMESTAMP']],
      ['constructor', ['VARCHAR']],
      ['toString', ['BIGINT']],
    ]);
  });
});

describe('planSchema: the main thread only accepts what fits as it is', () => {
  const cases: { name: string; current: Record<string, ColumnType>; batch: [string, ColumnType[]][]; max?: number; next?: Record<string, ColumnType>; conflict?: RegExp }[] = [
    { name: 'nothing new', current: { a: 'BIGINT' }, batch: [['a', ['BIGINT']]], next: undefined },
    { name: 'new column', current: { a: 'BIGINT' }, batch: [['b', ['VARCHAR']]], next: { a: 'BIGINT', b: 'VARCHAR' } },
    { name: 'widening', current: { a: 'BIGINT' }, batch: [['a', ['DOUBLE']]], next: { a: 'DOUBLE' } },
    { name: 'a number for a VARCHAR column changed meanwhile: place again', current: { a: 'VARCHAR' }, batch: [['a', ['BIGINT']]], conflict: /"a" has type BIGINT/ },
    { name: 'a column added meanwhile with another type: place again', current: { a: 'BOOLEAN' }, batch: [['a', ['VARCHAR']]], conflict: /"a"/ },
    { name: 'a case clash added meanwhile: place again', current: { LEVEL: 'VARCHAR' }, batch: [['level', ['VARCHAR']]], conflict: /letter case/ },
    { name: 'the limit reached meanwhile: place again', current: { a: 'BIGINT' }, batch: [['b', ['BIGINT']]], max: 1, conflict: /P_MAX_COLUMNS/ },
    { name: 'the overflow column is beyond the limit', current: { a: 'BIGINT' }, batch: [['p_overflow', ['VARCHAR']]], max: 1, next: { a: 'BIGINT', p_overflow: 'VARCHAR' } },
  ];
  it.each(cases)('$name', ({ current, batch, max, next, conflict }) => {
    const plan = planSchema(schema(current), summary(batch), max ?? 100);
    if (conflict) expect(plan.conflict).toMatch(conflict);
    else {
      expect(plan.conflict).toBeUndefined();
      expect(plan.next === undefined ? undefined : { ...plan.next }).toEqual(next);
    }
  });
});
