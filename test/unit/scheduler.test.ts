import { afterEach, describe, expect, it, vi } from 'vitest';
import { Scheduler } from '../../src/storage/scheduler.ts';

describe('scheduler', () => {
  afterEach(() => vi.useRealTimers());

  it('never overlaps a task with itself, and runs it again after a failure', async () => {
    vi.useFakeTimers();
    const scheduler = new Scheduler();
    let running = 0;
    let maxRunning = 0;
    let runs = 0;
    let release: () => void = () => undefined;
    scheduler.every('slow', 100, async () => {
      runs++;
      running++;
      maxRunning = Math.max(maxRunning, running);
      await new Promise<void>((r) => (release = r));
      running--;
    });
    let failures = 0;
    scheduler.every('failing', 100, () => {
      failures++;
      throw new Error('boom');
    });
    await vi.advanceTimersByTimeAsync(550);
    // The slow task started once and is still running: five ticks did not start it again.
    expect(runs).toBe(1);
    expect(maxRunning).toBe(1);
    // The failing task ran at every tick.
    expect(failures).toBe(5);
    release();
    await vi.advanceTimersByTimeAsync(100);
    expect(runs).toBe(2);
    scheduler.stop();
    release();
    await vi.advanceTimersByTimeAsync(1000);
    expect(runs).toBe(2);
    expect(failures).toBe(6);
  });
});
