import type { Context } from 'hono';
import { invalidInput } from '../errors.ts';
import type { DatasetKind } from '../model.ts';

/** Dataset named by `X-P-Stream`, else by the `stream` query parameter (for clients without custom headers). */
export function streamName(c: Context): string {
  const name = c.req.header('x-p-stream') ?? c.req.query('stream');
  if (!name) throw invalidInput('missing dataset: send the X-P-Stream header (or the ?stream= query parameter)');
  return name;
}

/**
 * `X-P-Log-Source` may be omitted (the path names the kind, and some clients cannot send custom
 * headers); when present it must agree with the path.
 */
export function checkLogSource(c: Context, kind: DatasetKind): void {
  const source = c.req.header('x-p-log-source');
  if (source !== undefined && source !== kind) {
    throw invalidInput(`X-P-Log-Source "${source}" does not match this endpoint, which takes ${kind}`);
  }
}
