import type { Context } from 'hono';

/** Dataset named by `X-P-Stream`, else by the `stream` query parameter (for clients without custom headers). */
export function streamName(c: Context): string | undefined {
  return c.req.header('x-p-stream') || c.req.query('stream') || undefined;
}
