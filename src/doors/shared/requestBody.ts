import type { IncomingMessage } from 'node:http';
import type { Context } from 'hono';
import type { IngestBody } from '../../ingest/bodyDeadline.ts';

/**
 * The body stream and the client's address of a request on the HTTP listener, for the doors mounted
 * under it (es, loki, hec) as doors/http's ingestSource gives them to its own routes: on Node the socket
 * stream itself, which the ingest service can destroy when the body arrives too slowly.
 */
export function requestBody(c: Context): { body: IngestBody | Uint8Array; peer: string | undefined } {
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  return { body: incoming ?? c.req.raw.body ?? new Uint8Array(0), peer: incoming?.socket.remoteAddress };
}
