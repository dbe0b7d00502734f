import { describe, expect, it } from 'vitest';
import { CorruptObjectError, decodeManifest, decodeMeta, decodeSchema, encodeManifest, encodeMeta, encodeSchema } from '../../src/storage/codec.ts';

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
