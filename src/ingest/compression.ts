import { gunzipSync } from 'node:zlib';
import { DomainError, invalidInput, tooLarge, unsupported } from '../errors.ts';

const bodyTooLarge = (maxBytes: number) => tooLarge(`decompressed request body is larger than the limit of ${maxBytes} bytes`);

/**
 * Undoes Content-Encoding. gzip is inflated with zlib's maxOutputLength so a small bomb stops at the
 * limit instead of allocating everything it expands to.
 */
export function decodeBody(body: Buffer, contentEncoding: string | undefined, maxBytes: number): Buffer {
  const encoding = (contentEncoding ?? '').trim().toLowerCase();
  if (encoding === '' || encoding === 'identity') {
    if (body.length > maxBytes) throw bodyTooLarge(maxBytes);
    return body;
  }
  if (encoding !== 'gzip' && encoding !== 'x-gzip') {
    throw unsupported(`unsupported Content-Encoding "${contentEncoding}": use gzip or identity`);
  }
  try {
    // maxOutputLength must be ≥ 1; a limit of 0 still rejects any non-empty output below.
    const out = gunzipSync(body, { maxOutputLength: Math.max(1, maxBytes) });
    if (out.length > maxBytes) throw bodyTooLarge(maxBytes);
    return out;
  } catch (err) {
    if (err instanceof DomainError) throw err;
    if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') throw bodyTooLarge(maxBytes);
    throw invalidInput(`request body is not valid gzip: ${(err as Error).message}`);
  }
}
