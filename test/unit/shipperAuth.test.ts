import { describe, expect, it } from 'vitest';
import { presentedKey, shipperSchemeKey } from '../../src/doors/shared/auth.ts';

const b64 = (s: string) => Buffer.from(s).toString('base64');

describe('shipperSchemeKey', () => {
  it.each([
    ['Splunk k-123', 'k-123'],
    ['splunk   abc', 'abc'],
    ['ApiKey raw-key_1', 'raw-key_1'],
    [`ApiKey ${b64('myid:the-key')}`, 'the-key'],
    // A raw key that happens to be base64 of something without an id: taken as it is.
    [`ApiKey ${b64('nocolon')}`, b64('nocolon')],
    ['Bearer x', undefined],
    ['Basic x', undefined],
  ])('%s → %s', (header, key) => expect(shipperSchemeKey(header)).toBe(key));
});

describe('presentedKey with the shippers\' schemes', () => {
  it.each([
    [{ authorization: 'Splunk k1' }, 'k1'],
    [{ authorization: `ApiKey ${b64('id:k2')}` }, 'k2'],
    [{ authorization: `Basic ${b64('elastic:k3')}` }, 'k3'],
    [{ authorization: 'Bearer k4' }, 'k4'],
    [{ 'x-api-key': 'k5', authorization: 'Splunk other' }, 'k5'],
  ])('%o → %s', (headers, key) => expect(presentedKey(new Headers(headers))).toBe(key));
});
