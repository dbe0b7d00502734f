import { describe, expect, it } from 'vitest';
import { cutSegment } from '../../src/storage/wal/walSalvage.ts';

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
