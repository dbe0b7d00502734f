import { expect } from 'vitest';

/** Asserts the status and a JSON body `{error: string}`; returns the message. */
export async function expectError(res: Response, status: number): Promise<string> {
  const text = await res.text();
  expect(res.status, text).toBe(status);
  expect(res.headers.get('content-type') ?? '').toMatch(/application\/json/);
  const parsed = JSON.parse(text) as { error?: unknown };
  expect(typeof parsed.error, text).toBe('string');
  return parsed.error as string;
}
