import { describe, expect, it } from 'vitest';
import { CorruptObjectError, decodeManifest, decodeMeta, decodeSchema, encodeManifest, encodeMeta, encodeSchema } from '../../src/storage/codec.ts';
import { compactedFileName, dataFileKey, flushFileStem, manifestKey, metaKey, parseKey, schemaKey } from '../../src/storage/layout.ts';
import { cutSegment } from '../../src/storage/walSalvage.ts';

describe('layout: every key is built and parsed in one place', () => {
  const gen = '0123456789abcdef';
  it.each([
    [metaKey('app'), { role: 'metadata', dataset: 'app' }],
    [schemaKey('app', gen, 'node-1'), { role: 'schema', dataset: 'app', generation: gen, nodeId: 'node-1' }],
    [manifestKey('app', gen, 'node-1', 42), { role: 'manifest', dataset: 'app', generation: gen, nodeId: 'node-1', seq: 42 }],
    [dataFileKey('app', 'date=2026-11-22/hour=10/minute=05', `${flushFileStem(gen, 'node-1', 7)}_0.parquet`), { role: 'data', dataset: 'app', generation: gen, nodeId: 'node-1', seq: 7 }],
    [dataFileKey('my-logs', 'date=2026-11-22/hour=10', compactedFileName(gen, 'w_2', 9)), { role: 'data', dataset: 'my-logs', generation: gen, nodeId: 'w_2', seq: 9 }],
  ])('%s', (key, parsed) => {
    expect(parseKey(key)).toEqual(parsed);
  });
  it.each(['', 'app', '.streams/a/b.json', 'app/other/file.json', 'app/date=x/hour=y/notours.parquet', 'app/.manifests/g/node.12.json'])('not ours: %j', (key) => {
    expect(parseKey(key)).toBeUndefined();
  });
});

describe('codec: validated, versioned, naming the key', () => {
  const meta = { name: 'app', generation: 'abc123', kind: 'json' as const, timeColumn: 'p_timestamp', createdAt: '2026-11-22T00:00:00.000Z' };
  const manifest = { version: 1 as const, generation: 'abc123', nodeId: 'n1', seq: 3, createdAt: 'x', add: [], remove: [], walSegments: [1, 2], ingestedBytes: 10 };

  it('round-trips every object, and reads objects written before versions existed', () => {
    expect(decodeMeta('k', encodeMeta(meta))).toEqual(meta);
    expect(decodeMeta('k', JSON.stringify(meta))).toEqual(meta);
    expect(decodeManifest('k', encodeManifest(manifest))).toEqual(manifest);
    expect(decodeSchema('k', encodeSchema({ a: 'BIGINT', b: 'VARCHAR' }))).toEqual({ a: 'BIGINT', b: 'VARCHAR' });
    expect(decodeSchema('k', JSON.stringify({ a: 'DOUBLE' }))).toEqual({ a: 'DOUBLE' });
  });

  it.each([
    ['truncated', (s: string) => s.slice(0, s.length >> 1), /not JSON/],
    ['unknown version', (s: string) => s.replace('"version":1', '"version":7'), /version 7/],
    ['wrong shape', () => '{"name":5}', /name|generation|version/],
    ['empty', () => '', /not JSON/],
  ])('%s: a CorruptObjectError naming the key', (_what, damage, reason) => {
    for (const [encoded, decode] of [
      [encodeMeta(meta), decodeMeta],
      [encodeManifest(manifest), decodeManifest],
    ] as const) {
      try {
        decode('some/key.json', damage(encoded));
        expect.unreachable();
      } catch (err) {
        expect(err).toBeInstanceOf(CorruptObjectError);
        expect((err as CorruptObjectError).key).toBe('some/key.json');
        expect((err as Error).message).toContain('some/key.json');
        expect((err as CorruptObjectError).reason).toMatch(reason);
      }
    }
  });

  it('rejects unknown column types in a schema', () => {
    expect(() => decodeSchema('s.json', encodeSchema({ a: 'BLOB' as never }))).toThrow(/s\.json/);
  });
});

describe('WAL salvage: keeps the readable lines, sets aside the rest', () => {
  const schema = { p_timestamp: 'TIMESTAMP', n: 'BIGINT', s: 'VARCHAR' } as const;
  const row = (n: number) => JSON.stringify({ p_timestamp: '2026-11-22T00:00:00.000Z', n, s: `v${n}` });
  it.each([
    ['intact', `${row(1)}\n{}\n${row(2)}\n{}\n`, [row(1), '{}', row(2), '{}'], 0],
    ['random bytes in a line', `${row(1)}\n{"p_ti\u0007\u00ff#x\n${row(2)}\n{}\n`, [row(1), row(2), '{}'], 1],
    ['a NUL hole after a short write, next batch on the same line', `${row(1)}\n{"p_timestamp":"2026\0\0\0\0${row(2)}\n{}\n`, [row(1), row(2), '{}'], 1],
    ['a type DuckDB cannot cast', `${JSON.stringify({ p_timestamp: 'garbage', n: 1 })}\n${JSON.stringify({ p_timestamp: '2026-11-22 00:00:00', n: 1.5 })}\n${row(3)}\n{}\n`, [row(3), '{}'], 2],
    ['the last commit marker destroyed', `${row(1)}\n{}\n${row(2)}\n\0\0\0`, [row(1), '{}', row(2), '{}'], 0],
    ['a NUL in a key', `${JSON.stringify({ 'a\u0000b': 1, p_timestamp: '2026-11-22T00:00:00Z' })}\n${row(1)}\n{}\n`, [row(1), '{}'], 1],
  ])('%s', (_what, content, kept, dropped) => {
    const out = cutSegment(content, schema);
    expect(out.kept).toBe(`${kept.join('\n')}\n`);
    expect(out.dropped.length).toBe(dropped);
  });
});
