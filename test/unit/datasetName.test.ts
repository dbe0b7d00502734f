import { describe, expect, it } from 'vitest';
import { DomainError } from '../../src/errors.ts';
import { MAX_DATASET_NAME_LENGTH, validateDatasetName } from '../../src/storage/dataset/datasetName.ts';

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
