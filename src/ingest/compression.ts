import { gunzipSync } from 'node:zlib';
import { HttpError, badRequest } from '../http/errors.ts';

const tooLarge = (maxBytes: number) => new HttpError(413, `decompressed request body is larger than the limit of ${maxBytes} bytes`);

/**
 * Undoes Content-Encoding. gzip is inflated with zlib's maxOutputLength so a small bomb stops at the
 * limit instead of allocating everything it expands to.
 */
export function decodeBody(body: Buffer, contentEncoding: string | undefined, maxBytes: number): Buffer {
  const encoding = (contentEncoding ?? '').trim().toLowerCase();
  if (encoding === '' || encoding === 'identity') {
    if (body.length > maxBytes) throw tooLarge(maxBytes);
    return body;
  }
  if (encoding !== 'gzip' && encoding !== 'x-gzip') {
    throw new HttpError(415, `unsupported Content-Encoding "${contentEncoding}": use gzip or identity`);
  }
  try {
    // maxOutputLength must be ≥ 1; a limit of 0 still rejects any non-empty output below.
    const out = gunzipSync(body, { maxOutputLength: Math.max(1, maxBytes) });
    if (out.length > maxBytes) throw tooLarge(maxBytes);
    return out;
  } catch (err) {
    if (err instanceof HttpError) throw err;
    if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') throw tooLarge(maxBytes);
    throw badRequest(`request body is not valid gzip: ${(err as Error).message}`);
  }
}
