import { invalidInput } from './errors.ts';

/** Parses a JSON request body; an empty or malformed one is a client error naming the problem. */
export function parseJson(body: Buffer): unknown {
  if (body.length === 0) throw invalidInput('request body is empty');
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (err) {
    throw invalidInput(`malformed JSON: ${(err as Error).message}`);
  }
}
