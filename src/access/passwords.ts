import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

/**
 * Password hashing for users (issue 34): node:crypto's scrypt, memory-hard and built in, so no native
 * dependency. The stored form carries its parameters so they can be raised later without breaking old hashes:
 * `scrypt$N$r$p$salt(base64)$hash(base64)`. A password is never stored or logged in clear.
 */
const PARAMS = { N: 16384, r: 8, p: 1 } as const;
const KEY_LEN = 32;

function derive(password: string, salt: Buffer, opts: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    // maxmem must cover 128·N·r bytes, or raised parameters would be refused.
    scrypt(password, salt, KEY_LEN, { ...opts, maxmem: 256 * (opts.N ?? PARAMS.N) * (opts.r ?? PARAMS.r) }, (err, key) =>
      err ? reject(err) : resolve(key),
    );
  });
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, PARAMS);
  return ['scrypt', PARAMS.N, PARAMS.r, PARAMS.p, salt.toString('base64'), key.toString('base64')].join('$');
}

/** True when `password` matches `stored`; a malformed stored hash never matches (and never throws). */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [N, r, p] = parts.slice(1, 4).map(Number);
  if (![N, r, p].every((n) => Number.isInteger(n) && n > 0)) return false;
  const expected = Buffer.from(parts[5], 'base64');
  if (expected.length !== KEY_LEN) return false;
  const key = await derive(password, Buffer.from(parts[4], 'base64'), { N, r, p });
  return timingSafeEqual(key, expected);
}

/** A generated password (answered once when a user is created or asks for a new one): 24 URL-safe characters. */
export const generatePassword = (): string => randomBytes(18).toString('base64url');
