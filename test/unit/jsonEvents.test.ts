import { describe, expect, it } from 'vitest';
import { escapePairPart, headerColumns, headerPairs, sourceAddress } from '../../src/ingest/json/jsonEvents.ts';

describe('X-P-* headers', () => {
  const h = (entries: Record<string, string>) => new Headers(entries);

  it.each([
    ['web-1^env=prod', 'web-1%5Eenv%3Dprod'],
    ['100%', '100%25'],
    ['plain', 'plain'],
  ])('escapePairPart(%j) = %j', (raw, escaped) => expect(escapePairPart(raw)).toBe(escaped));

  it('p_metadata / p_tags pairs cannot be forged by separators in values', () => {
    const headers = h({ 'X-P-Meta-Host': 'web-1^env=prod', 'X-P-Meta-Zone': 'a', 'X-P-Tag-Team': 'x=y' });
    expect(headerPairs(headers, 'x-p-meta-')).toBe('host=web-1%5Eenv%3Dprod^zone=a');
    expect(headerPairs(headers, 'x-p-tag-')).toBe('team=x%3Dy');
    expect(headerPairs(h({}), 'x-p-meta-')).toBeNull();
  });

  // Issue 30 L7: `X-P-Meta-: v` (an empty name) gave the pair `=v`; a pair needs a name, so the header is ignored.
  it.each([
    ['an empty meta name alone', { 'X-P-Meta-': 'empty' }, 'x-p-meta-', null],
    ['an empty meta name beside a named one', { 'X-P-Meta-': 'empty', 'X-P-Meta-Host': 'web-1' }, 'x-p-meta-', 'host=web-1'],
    ['an empty tag name', { 'X-P-Tag-': 'x' }, 'x-p-tag-', null],
  ] as const)('headerPairs: %s', (_name, headers, prefix, pairs) => expect(headerPairs(h(headers), prefix)).toBe(pairs));

  const columnCases: { name: string; headers: Record<string, string>; columns: [string, string][] }[] = [
    { name: 'each X-P-<name> is a column <name>', headers: { 'X-P-Environment': 'dev', 'X-P-Meta-Host': 'web-1' }, columns: [['environment', 'dev'], ['meta-host', 'web-1']] },
    { name: 'headers with a meaning are not columns', headers: { 'X-P-Stream': 's', 'X-P-Log-Source': 'otel-logs', 'X-P-Extract-Log': 'x', 'X-Other': 'o' }, columns: [] },
    { name: 'values cut to 100 characters', headers: { 'X-P-Long': 'y'.repeat(120) }, columns: [['long', 'y'.repeat(100)]] },
    { name: 'at most 8, in name order', headers: Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`X-P-K${i}`, String(i)])), columns: Array.from({ length: 8 }, (_, i) => [`k${i}`, String(i)] as [string, string]) },
    { name: 'service column names are skipped', headers: { 'X-P-P_Timestamp': 'x', 'X-P-P_Src_Ip': 'y' }, columns: [] },
    { name: 'values that are not visible ASCII are skipped', headers: { 'X-P-Latin': 'caf\u00e9', 'X-P-Ok': 'a b\tc' }, columns: [['ok', 'a b\tc']] },
  ];
  it.each(columnCases)('headerColumns: $name', ({ headers, columns }) => expect(headerColumns(h(headers))).toEqual(columns));

  const addressCases: { name: string; headers: Record<string, string>; peer?: string; ip: string }[] = [
    { name: 'the peer', headers: {}, peer: '10.0.0.5', ip: '10.0.0.5' },
    { name: 'an IPv4-mapped peer', headers: {}, peer: '::ffff:127.0.0.1', ip: '127.0.0.1' },
    { name: 'an IPv6 peer', headers: {}, peer: '::1', ip: '::1' },
    { name: 'X-Forwarded-For, first entry', headers: { 'X-Forwarded-For': '203.0.113.7, 10.0.0.1' }, peer: '10.0.0.1', ip: '203.0.113.7' },
    { name: 'Forwarded for= wins', headers: { Forwarded: 'proto=https;for=192.0.2.60;by=203.0.113.43', 'X-Forwarded-For': '1.1.1.1' }, ip: '192.0.2.60' },
    { name: 'Forwarded quoted IPv6', headers: { Forwarded: 'for="[2001:db8:cafe::17]:4711"' }, ip: '[2001:db8:cafe::17]:4711' },
    { name: 'nothing known', headers: {}, ip: '' },
  ];
  it.each(addressCases)('sourceAddress: $name', ({ headers, peer, ip }) => expect(sourceAddress(h(headers), peer)).toBe(ip));
});
