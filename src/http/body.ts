import type { IncomingMessage } from 'node:http';
import { finished } from 'node:stream';
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
  if (incoming) return collect(incoming, maxBytes);
  const source: AsyncIterable<Uint8Array> | null = c.req.raw.body;
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
 * The body of a Node request, by its 'data' events and `finished`: an async iterator over the stream
 * costs a single-event request ~5% of its CPU. Past the limit the rest is read and dropped, so the
 * 413 reaches the client. A client that goes away before the end is an error, never a short body —
 * also when it left before this was called (while its request waited for room in the in-flight
 * budget), which `finished` reports where a listener for 'close' would wait forever.
 */
function collect(incoming: IncomingMessage, maxBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    incoming.on('data', (chunk: Buffer) => {
      size += chunk.byteLength;
      if (size <= maxBytes) chunks.push(chunk);
    });
    finished(incoming, (err) => {
      if (err) reject(err);
      else if (size > maxBytes) reject(bodyTooLarge(maxBytes));
      else resolve(chunks.length === 1 && size < INLINE_COPY_BELOW ? chunks[0] : Buffer.concat(chunks, size));
    });
  });
}

/**
 * A one-chunk body smaller than this is used as it came (a view into the socket's read buffer) instead
 * of copied; larger bodies are copied into a buffer of their own, which can be transferred to an
 * ingest worker (src/ingest/ingestPool.ts) without dragging the socket's buffer along.
 */
const INLINE_COPY_BELOW = 4096;

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
