import { afterEach, describe, expect, it, vi } from 'vitest';
import { DomainError } from '../../src/errors.ts';
import { MAX_DATASET_NAME_LENGTH, validateDatasetName } from '../../src/storage/datasetName.ts';
import { Scheduler } from '../../src/storage/scheduler.ts';

describe('dataset name rule', () => {
  const reserved = new Set(['select', 'from']);
  const cases: [string, string, string | undefined][] = [
    ['plain', 'app', undefined],
    ['digits, dash, underscore', 'app_2-logs', undefined],
    ['longest allowed', 'a'.repeat(MAX_DATASET_NAME_LENGTH), undefined],
    ['empty', '', 'must not be empty'],
    ['too long', 'a'.repeat(MAX_DATASET_NAME_LENGTH + 1), 'at most 64'],
    ['leading digit', '1app', 'must start with a letter'],
    ['leading underscore', '_app', 'must start with a letter'],
    ['dot', 'app.logs', 'only letters'],
    ['slash', 'app/logs', 'only letters'],
    ['space', 'app logs', 'only letters'],
    ['non-ASCII letter', 'äpp', 'must start with a letter'],
    ['reserved keyword, any case', 'SeLeCt', 'reserved SQL keyword'],
    ['service column prefix', 'p_logs', 'starting with "p_"'],
    ['service column prefix, upper case', 'P_logs', 'starting with "p_"'],
  ];
  it.each(cases)('%s: %j', (_label, name, error) => {
    const run = () => validateDatasetName(name, reserved);
    if (error === undefined) expect(run).not.toThrow();
    else {
      expect(run).toThrow(DomainError);
      expect(run).toThrow(error);
      try {
        run();
      } catch (err) {
        expect((err as DomainError).kind).toBe('invalid');
      }
    }
  });
});

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
