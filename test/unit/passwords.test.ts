import { scryptSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { generatePassword, hashPassword, verifyPassword } from '../../src/access/passwords.js';

describe('passwords', () => {
  it('stores scrypt with its parameters, never the password, and matches an independent scryptSync', async () => {
    const pw = generatePassword();
    const stored = await hashPassword(pw);
    expect(stored).not.toContain(pw);
    const [alg, N, r, p, salt, hash] = stored.split('$');
    expect(alg).toBe('scrypt');
    const reference = scryptSync(pw, Buffer.from(salt, 'base64'), 32, { N: Number(N), r: Number(r), p: Number(p) });
    expect(Buffer.from(hash, 'base64').equals(reference)).toBe(true);
  });

  it('salts: the same password hashes differently', async () => {
    expect(await hashPassword('same')).not.toBe(await hashPassword('same'));
  });

  const cases: Array<[string, (stored: string) => string, string, boolean]> = [
    ['right password', (s) => s, 'secret', true],
    ['wrong password', (s) => s, 'Secret', false],
    ['empty password', (s) => s, '', false],
    ['unknown algorithm', (s) => s.replace(/^scrypt/, 'md5'), 'secret', false],
    ['truncated hash', (s) => s.split('$').slice(0, 5).join('$'), 'secret', false],
    ['bad parameter', (s) => s.replace(/^scrypt\$\d+/, 'scrypt$x'), 'secret', false],
  ];
  it.each(cases)('%s', async (_name, alter, attempt, ok) => {
    const stored = await hashPassword('secret');
    expect(await verifyPassword(attempt, alter(stored))).toBe(ok);
  });

  it('generates distinct URL-safe passwords', () => {
    const a = generatePassword();
    expect(a).toMatch(/^[A-Za-z0-9_-]{24}$/);
    expect(generatePassword()).not.toBe(a);
  });
});
