import { describe, expect, it } from 'vitest';
import { PassThrough } from 'node:stream';
import { ConnectionBudget, connectionCap } from '../../src/doors/shared/connections.ts';
import { KeySlots } from '../../src/doors/shared/slots.ts';
import type { DomainError } from '../../src/errors.ts';

describe('connectionCap', () => {
  const cases: [configured: number | undefined, fileLimit: number, cap: number][] = [
    [undefined, 1024, 512], // half the descriptors
    [undefined, 20_000, 8192], // at most 8,192
    [undefined, 1_048_576, 8192],
    [100, 1024, 100], // as configured
    [5000, 1024, 768], // never more than the limit less 256
    [5000, 100, 16], // a tiny limit still serves a few
  ];
  it.each(cases)('configured %s with %s open files → %s', (configured, fileLimit, cap) => {
    expect(connectionCap(configured, fileLimit)).toBe(cap);
  });
});


const HTTP = { name: 'http', ingest: true };
const PG = { name: 'pg', ingest: false };
/** Resolves at the stream's 'close' (the budget counts a connection out there); ask before it can close. */
const closed = (s: PassThrough) => new Promise<void>((resolve) => s.once('close', () => resolve()));

describe('ConnectionBudget: one budget over every door', () => {
  it.each([
    // cap, reserve, door, already open (all ready), admitted?
    [10, 2, PG, 7, true],
    [10, 2, PG, 8, false], // the last two are kept for ingest doors
    [10, 2, HTTP, 8, true],
    [10, 2, HTTP, 9, true],
    [10, 2, HTTP, 10, false], // the cap holds for every door
    [10, 0, PG, 9, true],
  ])('cap %i, reserve %i: a %o connection with %i open is admitted: %s', (cap, reserve, door, open, admitted) => {
    const budget = new ConnectionBudget({ maxConnections: cap, ingestReserve: reserve, headersTimeoutMs: 60_000 });
    for (let i = 0; i < open; i++) budget.admit(new PassThrough(), HTTP)!.ready();
    const socket = new PassThrough();
    expect(budget.admit(socket, door) !== undefined).toBe(admitted);
    expect(socket.destroyed).toBe(!admitted);
    expect(budget.refused.get(door.name) ?? 0).toBe(admitted ? 0 : 1);
  });

  it('a connection whose head is not done within the head timeout is closed; a ready one stays; closing gives the room back', async () => {
    const budget = new ConnectionBudget({ maxConnections: 4, headersTimeoutMs: 50 });
    const silent = new PassThrough();
    const ready = new PassThrough();
    budget.admit(silent, PG);
    budget.admit(ready, PG)!.ready();
    const silentClosed = closed(silent);
    await silentClosed;
    expect(ready.destroyed).toBe(false);
    expect(budget.openByDoor().get('pg')).toBe(1);
    const readyClosed = closed(ready);
    ready.destroy();
    await readyClosed;
    expect(budget.size).toBe(0);
  });

  it('when crowded, connections without a head past the grace make room for a new one', async () => {
    const budget = new ConnectionBudget({ maxConnections: 10, ingestReserve: 0, headersTimeoutMs: 60_000 });
    const silent = Array.from({ length: 10 }, () => new PassThrough());
    for (const s of silent) budget.admit(s, PG);
    // Within the grace they stay, and the budget is spent.
    expect(budget.admit(new PassThrough(), HTTP)).toBeUndefined();
    await new Promise((r) => setTimeout(r, 1100));
    expect(budget.admit(new PassThrough(), HTTP)).toBeDefined();
    expect(silent.every((s) => s.destroyed)).toBe(true);
  });
});

describe('KeySlots: long-lived work per key and in total', () => {
  it('refuses a key past its share (429) and everyone past the total (503), and gives back once', () => {
    const slots = new KeySlots('long polls', 2, 3);
    const a1 = slots.take('a');
    slots.take('a');
    expect(() => slots.take('a')).toThrow(expect.objectContaining({ kind: 'too_many_requests' }) as DomainError);
    slots.take('b');
    expect(() => slots.take('c')).toThrow(expect.objectContaining({ kind: 'unavailable' }) as DomainError);
    a1();
    a1();
    expect(slots.inUse).toBe(2);
    expect(() => slots.take('c')).not.toThrow();
  });
});
