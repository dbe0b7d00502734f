import { describe, expect, it } from 'vitest';
import { DomainError } from '../../src/errors.ts';
import { checkLosslessNumbers, lossyNumber } from '../../src/ingest/json/numbers.ts';

describe('lossyNumber', () => {
  const cases: [token: string, lossy: boolean][] = [
    ['9007199254740991', false], // 2^53 - 1: exact
    ['-9007199254740991', false],
    ['9007199254740992', true], // 2^53: a neighbour rounds to it, so the digits are not trusted
    ['9007199254740993', true],
    ['12345678901234567890', true],
    ['1e400', true],
    ['-1E+400', true],
    ['1e308', false],
    ['1e20', false], // a float literal: a double is what was sent
    ['12345678901234.5678', false], // a decimal: double precision is its meaning in JSON
    ['1e-400', false], // underflows to 0, as any double reader would
  ];
  it.each(cases)('%s → lossy %s', (token, lossy) => {
    expect(lossyNumber(token) !== undefined).toBe(lossy);
  });
});

describe('checkLosslessNumbers', () => {
  const refused = ['[{"a":9007199254740993}]', '{"a":1e400}', '[{"a":[1, 2.5e1000]}]', '{"a":{"b": -12345678901234567890}}'];
  it.each(refused)('refuses %s with 400', (body) => {
    expect(() => checkLosslessNumbers(Buffer.from(body))).toThrow(DomainError);
  });
  const accepted = ['[{"a":"9007199254740993"}]', '{"a":"1e400"}', '{"a":"x\\",1e400"}', '{"a":9007199254740991,"b":1e20,"c":0.1}'];
  it.each(accepted)('accepts %s', (body) => {
    expect(() => checkLosslessNumbers(Buffer.from(body))).not.toThrow();
  });
});
