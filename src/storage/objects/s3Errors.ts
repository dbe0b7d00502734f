import { DomainError, unavailable } from '../../errors.ts';
import { MissingObjectError } from './objectStore.ts';

/**
 * How the S3 store classifies what the SDK throws: a missing object, an outage (unavailable, with a
 * retry hint) or anything else, and the retries the SDK does not do itself (a body cut off mid-stream).
 */

export type SdkError = Error & { Code?: string; $metadata?: { httpStatusCode?: number } };

export const statusOf = (err: unknown) => (err as SdkError).$metadata?.httpStatusCode;

/**
 * A missing object, as opposed to a missing bucket (also 404), which must surface as an error:
 * treating it as "no such object" would make a misconfigured service think it has no data.
 */
export const isNoSuchKey = (err: unknown) => {
  const e = err as SdkError;
  if (e.name === 'NoSuchKey' || e.Code === 'NoSuchKey') return true;
  return statusOf(err) === 404 && e.name !== 'NoSuchBucket' && e.Code !== 'NoSuchBucket';
};

/** Tries of one download whose body stream breaks off (the SDK retries failed requests itself). */
const DOWNLOAD_ATTEMPTS = 3;

/**
 * The SDK retries a request that fails, not a body cut off while it streams (a connection aborted or
 * reset mid-download), which is as transient: a few more attempts while the error is `unavailable`.
 */
export async function bodyRetries<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (attempt >= DOWNLOAD_ATTEMPTS || !(err instanceof DomainError && err.kind === 'unavailable')) throw err;
      await new Promise((r) => setTimeout(r, 100 * attempt));
    }
  }
}

/** Seconds a client should wait before retrying while the bucket cannot be reached. */
const OUTAGE_RETRY_SEC = 5;

/**
 * The error a caller above the store sees, once the SDK's own retries are spent: a missing object
 * names its key; a bucket that does not answer (connection refused or reset, a time-out, a 5xx) is
 * `unavailable` with a retry hint; anything else (access denied, a missing bucket) stays as it is.
 */
export function storeError(err: unknown, op: string, key: string): Error {
  if (err instanceof DomainError) return err;
  if (isNoSuchKey(err)) return new MissingObjectError(key);
  const status = statusOf(err);
  if (status === undefined || status >= 500) {
    return unavailable(`object storage unreachable (${op} ${key}): ${(err as Error).message || (err as Error).name}`, OUTAGE_RETRY_SEC);
  }
  return err as Error;
}

export async function mapped<T>(op: string, key: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    throw storeError(err, op, key);
  }
}

/** DeleteObjects itself is unsupported (as opposed to failing for these keys). */
export const isDeleteObjectsUnsupported = (err: unknown) => {
  const e = err as SdkError;
  const status = statusOf(err);
  return (
    status === 400 || status === 405 || status === 501 || e.name === 'NotImplemented' || e.name === 'MissingContentMD5' || e.name === 'MethodNotAllowed'
  );
};
