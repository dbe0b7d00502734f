import { gunzipSync } from 'node:zlib';
import { DomainError, invalidInput, tooLarge, unsupported } from '../errors.ts';

const bodyTooLarge = (maxBytes: number) => tooLarge(`decompressed request body is larger than the limit of ${maxBytes} bytes`);

/**
 * A gzip body inflated past the size it was admitted with (src/ingest/inflight.ts): its trailer
 * understated it (several gzip members, or a forged trailer). The caller reserves the full limit and
 * decodes again.
 */
export class DecodeBudgetExceeded extends DomainError {
  constructor() {
    super('too_large', 'decompressed request body is larger than its gzip trailer says');
  }
}

const normalized = (contentEncoding: string | undefined) => (contentEncoding ?? '').trim().toLowerCase();

/** No Content-Encoding (or `identity`): the body is its own decoded form. */
export const isIdentityEncoding = (contentEncoding: string | undefined) => {
  const encoding = normalized(contentEncoding);
  return encoding === '' || encoding === 'identity';
};

/**
 * The decoded size of a body as it declares it, to reserve before decoding: its own length when not
 * compressed, a snappy block's length header, a gzip trailer's ISIZE (the size mod 2^32 of the last
 * gzip member: exact for the usual single member). Undefined when the body does not say.
 */
export function declaredDecodedSize(body: Uint8Array, contentEncoding: string | undefined): number | undefined {
  if (isIdentityEncoding(contentEncoding)) return body.byteLength;
  const encoding = normalized(contentEncoding);
  if (encoding === 'gzip' || encoding === 'x-gzip') {
    if (body.byteLength < 18 || body[0] !== 0x1f || body[1] !== 0x8b) return undefined;
    const n = body.byteLength;
    return (body[n - 4] | (body[n - 3] << 8) | (body[n - 2] << 16)) + body[n - 1] * 2 ** 24;
  }
  if (encoding === 'snappy') {
    let size = 0;
    for (let i = 0; i < 5 && i < body.byteLength; i++) {
      size += (body[i] & 0x7f) * 2 ** (7 * i);
      if ((body[i] & 0x80) === 0) return size;
    }
  }
  return undefined;
}

/**
 * Undoes Content-Encoding. gzip is inflated with zlib's maxOutputLength so a small bomb stops at the
 * limit instead of allocating everything it expands to; with a `budget` below the limit (the size the
 * request was admitted with) it stops there instead, with DecodeBudgetExceeded.
 */
export function decodeBody(body: Buffer, contentEncoding: string | undefined, maxBytes: number, budget = maxBytes): Buffer {
  const encoding = normalized(contentEncoding);
  if (isIdentityEncoding(contentEncoding)) {
    if (body.length > maxBytes) throw bodyTooLarge(maxBytes);
    return body;
  }
  if (encoding !== 'gzip' && encoding !== 'x-gzip') {
    throw unsupported(`unsupported Content-Encoding "${contentEncoding}": use gzip or identity`);
  }
  const limit = Math.min(maxBytes, budget);
  const overLimit = () => (limit < maxBytes ? new DecodeBudgetExceeded() : bodyTooLarge(maxBytes));
  try {
    // maxOutputLength must be ≥ 1; a limit of 0 still rejects any non-empty output below.
    const out = gunzipSync(body, { maxOutputLength: Math.max(1, limit) });
    if (out.length > limit) throw overLimit();
    return out;
  } catch (err) {
    if (err instanceof DomainError) throw err;
    if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') throw overLimit();
    throw invalidInput(`request body is not valid gzip: ${(err as Error).message}`);
  }
}
