/** Byte-level helpers of the JSON body scans that run before or beside JSON.parse (limits.ts, numbers.ts). */

export const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * The index of the quote closing the string literal opened at `open` (a quote), skipping escaped
 * quotes; -1 when the body ends first (malformed: JSON.parse reports it).
 */
export function stringEnd(buf: Uint8Array, open: number): number {
  let j = open;
  for (;;) {
    j = buf.indexOf(QUOTE, j + 1);
    if (j === -1) return -1;
    let backslashes = 0;
    while (buf[j - 1 - backslashes] === BACKSLASH) backslashes++;
    if ((backslashes & 1) === 0) return j;
  }
}
