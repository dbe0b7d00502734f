import type { IncomingMessage } from 'node:http';
import type { Context } from 'hono';
import { tooLarge } from '../errors.ts';
import type { Config } from '../config.ts';
import type { InflightLease } from '../ingest/inflight.ts';
import type { JobBase } from '../ingest/pipeline.ts';
import type { IngestService } from '../ingest/service.ts';

/** Reads the request body, refusing (413) anything over `maxBytes` without buffering it all. */
export async function readBody(c: Context, maxBytes: number): Promise<Buffer> {
  const declared = Number(c.req.header('content-length') ?? NaN);
  if (declared > maxBytes) throw bodyTooLarge(maxBytes);
  // On Node, read the socket stream directly: the web-stream wrapper costs ~10% of ingest CPU.
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  const source: AsyncIterable<Uint8Array> | null = incoming ?? c.req.raw.body;
  if (!source) return Buffer.alloc(0);
  const chunks: Uint8Array[] = [];
  let size = 0;
  // Past the limit the rest is read and dropped (not buffered), so the 413 reaches the client.
  for await (const chunk of source) {
    size += chunk.byteLength;
    if (size <= maxBytes) chunks.push(chunk);
  }
  if (size > maxBytes) throw bodyTooLarge(maxBytes);
  return Buffer.concat(chunks, size);
}

/**
 * Every ingest route's body: read and stored inside the in-flight byte budget (README "Limits"), which
 * is reserved from the declared Content-Length before a byte is read and given back when `run` ends.
 * `run` gets the part of the job every format shares: the body, its encoding and the decoding limits.
 */
export function withIngestBody<T>(
  c: Context,
  ingest: IngestService,
  config: Pick<Config, 'maxBodyBytes' | 'maxDecompressedBytes'>,
  run: (base: JobBase, lease: InflightLease) => Promise<T>,
): Promise<T> {
  return ingest.admit(c.req.header('content-length'), async (lease) => {
    const body = await readBody(c, config.maxBodyBytes);
    return run({ body, contentEncoding: c.req.header('content-encoding'), maxDecompressedBytes: config.maxDecompressedBytes, limits: ingest.limits }, lease);
  });
}

const bodyTooLarge = (maxBytes: number) => tooLarge(`request body is larger than the limit of ${maxBytes} bytes (P_MAX_BODY_BYTES)`);


export { parseJson } from '../json.ts';
