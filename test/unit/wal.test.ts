import { describe, expect, it } from 'vitest';
import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { Wal, writeFully } from '../../src/storage/wal/wal.ts';

/** A file handle whose writev takes at most the given number of bytes per call (0: makes no progress). */
function shortWriter(perCall: number[]) {
  const file: number[] = [];
  const calls: number[] = [];
  return {
    file,
    calls,
    handle: {
      writev: async (buffers: Uint8Array[], position: number) => {
        const limit = perCall[calls.length] ?? Infinity;
        let n = 0;
        for (const b of buffers) for (const byte of b) if (n < limit) file[position + n++] = byte;
        calls.push(n);
        return { bytesWritten: n, buffers };
      },
    },
  };
}

const chunks = () => [Buffer.from('abc'), Buffer.from(''), Buffer.from('defgh'), Buffer.from('\n')];

describe('WAL writeFully: every byte of a group, in order, however the disk splits the writes', () => {
  const cases: [string, number[], number][] = [
    ['all at once', [], 1],
    ['cut inside the first chunk', [2], 2],
    ['cut on a chunk boundary', [3], 2],
    ['cut inside a later chunk', [5], 2],
    ['a byte at a time', Array(9).fill(1), 9],
    ['cut twice', [4, 2], 3],
  ];
  it.each(cases)('%s', async (_name, perCall, expectedCalls) => {
    const w = shortWriter(perCall);
    const total = await writeFully(w.handle, chunks(), 10);
    expect(total).toBe(9);
    expect(Buffer.from(w.file.slice(10)).toString()).toBe('abcdefgh\n');
    expect(w.calls).toHaveLength(expectedCalls);
  });

  it('a write that makes no progress is a full disk (ENOSPC), not a silent success', async () => {
    const w = shortWriter([4, 0]);
    await expect(writeFully(w.handle, chunks(), 0)).rejects.toMatchObject({ code: 'ENOSPC' });
  });
});

describe('WAL writeFully on a real file', () => {
  it('a group of more buffers than one writev takes (IOV_MAX is 1024 on Linux) lands whole and in order', async () => {
    const fs = await import('node:fs/promises');
    const os = await import('node:os');
    const path = await import('node:path');
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'wal-writev-'));
    const file = path.join(dir, 'seg');
    const handle = await fs.open(file, 'w+');
    try {
      const lines = Array.from({ length: 3000 }, (_, i) => Buffer.from(`{"i":${i}}\n`));
      await handle.write('head\n', 0);
      const total = await writeFully(handle, lines, 5);
      expect(total).toBe(lines.reduce((s, l) => s + l.length, 0));
      const text = await fs.readFile(file, 'utf8');
      expect(text).toBe(`head\n${lines.map(String).join('')}`);
    } finally {
      await handle.close();
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});

/** A WAL in a fresh temp dir, removed after `fn`. */
async function withWal(fn: (open: () => Promise<Wal>, dir: string) => Promise<void>): Promise<void> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'wal-unit-'));
  try {
    await fn(() => Wal.open(dir), dir);
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

describe('WAL appends', () => {
  it('an append made as soon as the previous one is acknowledged is written without waiting for another', () =>
    withWal(async (open) => {
      const wal = await open();
      // Each append starts in the microtasks that acknowledge the one before, while the group writer
      // is still finishing: it once found the writer running and waited for a later append.
      for (let i = 0; i < 3; i++) await wal.append(`{"i":${i}}\n`, 1, 8);
      const [seg] = await wal.seal();
      expect(seg.rows).toBe(3);
      expect(await fs.readFile(seg.path, 'utf8')).toBe('{"i":0}\n{}\n{"i":1}\n{}\n{"i":2}\n{}\n');
    }));
});

describe('WAL segments keep the range of their rows\' own times', () => {
  it.each<[string, ({ minMs: number; maxMs: number } | undefined)[], [number, number]]>([
    ['the union of the batches\' ranges', [{ minMs: 10, maxMs: 20 }, { minMs: 5, maxMs: 15 }, { minMs: 12, maxMs: 30 }], [5, 30]],
    ['a batch without a range makes it unbounded', [{ minMs: 10, maxMs: 20 }, undefined], [-Infinity, Infinity]],
  ])('%s', (_, ranges, [min, max]) =>
    withWal(async (open) => {
      const wal = await open();
      // One alone, the rest at once (one group commit): the same union either way.
      await wal.append('{"a":1}\n', 1, 8, ranges[0]);
      await Promise.all(ranges.slice(1).map((r) => wal.append('{"a":1}\n', 1, 8, r)));
      const [seg] = await wal.seal();
      expect([seg.minTimeMs, seg.maxTimeMs]).toEqual([min, max]);
      // Recovered at start, a segment's range is not known.
      const [again] = await (await open()).seal();
      expect(again.rows).toBe(ranges.length);
      expect([again.minTimeMs, again.maxTimeMs]).toEqual([undefined, undefined]);
    }),
  );
});
