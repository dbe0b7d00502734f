import { invalidInput } from '../../errors.ts';
import { QUOTE, stringEnd } from './jsonScan.ts';


/** Is `c` a byte of a JSON number token (digits, sign, point, exponent)? */
const isNumberByte = (c: number) => (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x2b || c === 0x2e || c === 0x65 || c === 0x45;

/**
 * Why a JSON number token cannot be stored as sent, or undefined: an integer literal beyond ±2^53
 * (a double, the only number JSON.parse gives, would round it; DuckDB's BIGINT could hold it, but
 * the service never sees the digits), or any number outside the double range (`1e400`).
 */
export function lossyNumber(token: string): string | undefined {
  const value = Number(token);
  if (!Number.isFinite(value)) return `${token} is outside the range of a double`;
  if (/^-?\d+$/.test(token) && !Number.isSafeInteger(value)) return `${token} is an integer beyond ±2^53 (9007199254740991), which would lose digits`;
  return undefined;
}

/** Text that may hold a lossy number: 16+ digits, or an exponent of 3+ digits, where a number may start. */
const CANDIDATE = /[:,[]\s*-?(?:\d{16}|\d[\d.]*[eE][+-]?\d{3})/;

/**
 * Refuses (400) a JSON body with a number that would not be stored as sent (see lossyNumber), instead
 * of storing a rounded value or dropping it silently. Strings are jumped over with indexOf; only
 * number tokens long enough to be lossy (16+ bytes, or with an exponent) are looked at.
 */
export function checkLosslessNumbers(buf: Uint8Array): void {
  // Nearly every body has no such number: one native regex pass over its text finds out, ~10× faster
  // than the byte walk below (a JSON number follows ':', ',' or '[').
  if (!CANDIDATE.test(Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength).toString('latin1'))) return;
  const n = buf.length;
  for (let i = 0; i < n; i++) {
    const c = buf[i];
    if (c === QUOTE) {
      const j = stringEnd(buf, i);
      if (j === -1) return; // malformed: JSON.parse reports it
      i = j;
    } else if (isNumberByte(c)) {
      let j = i;
      let exponent = false;
      while (j < n && isNumberByte(buf[j])) {
        if (buf[j] === 0x65 || buf[j] === 0x45) exponent = true;
        j++;
      }
      if (j - i >= 16 || exponent) {
        const problem = lossyNumber(Buffer.from(buf.buffer, buf.byteOffset + i, j - i).toString('latin1'));
        if (problem) throw invalidInput(`a number cannot be stored without loss: ${problem}; send it as a string ("…")`);
      }
      i = j - 1;
    }
  }
}
