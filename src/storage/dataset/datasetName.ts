import { invalidInput } from '../../errors.ts';

const NAME_RE = /^[A-Za-z][A-Za-z0-9_-]*$/;
export const MAX_DATASET_NAME_LENGTH = 64;

/**
 * The rule for dataset names: a letter, then letters, digits, "_" and "-", at most 64 characters; not a
 * reserved SQL keyword (`reserved` holds them lower-cased) and not starting with "p_" (the prefix of
 * the service's own columns). Throws invalidInput saying which part failed.
 */
export function validateDatasetName(name: string, reserved: ReadonlySet<string>): void {
  if (name.length === 0) throw invalidInput('dataset name must not be empty');
  if (name.length > MAX_DATASET_NAME_LENGTH) throw invalidInput(`dataset name must be at most ${MAX_DATASET_NAME_LENGTH} characters`);
  if (!NAME_RE.test(name)) {
    throw invalidInput('dataset name must start with a letter and contain only letters, digits, "_" and "-"');
  }
  if (reserved.has(name.toLowerCase())) throw invalidInput(`dataset name "${name}" is a reserved SQL keyword`);
  if (name.toLowerCase().startsWith('p_')) throw invalidInput('dataset names starting with "p_" are reserved');
}
