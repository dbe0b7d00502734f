import { fixLoneSurrogates } from '../names.ts';
import type { FlatRow } from '../../model.ts';

/** Serialises one row as a WAL line. Non-finite doubles become the strings DuckDB casts back to them. */
export function rowToJsonLine(row: FlatRow): string {
  for (const key in row) {
    const v = row[key];
    if (typeof v === 'number' && !Number.isFinite(v)) row[key] = Number.isNaN(v) ? 'NaN' : v > 0 ? 'Infinity' : '-Infinity';
    else if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        const x = v[i];
        if (typeof x === 'number' && !Number.isFinite(x)) (v as unknown[])[i] = Number.isNaN(x) ? 'NaN' : x > 0 ? 'Infinity' : '-Infinity';
      }
    }
  }
  return JSON.stringify(row);
}

/** Rows → WAL lines, with any lone surrogate in a value replaced (see `fixLoneSurrogates`). */
export function rowsToLines(rows: FlatRow[]): string {
  let lines = '';
  for (const row of rows) lines += `${rowToJsonLine(row)}\n`;
  return fixLoneSurrogates(lines);
}

/** UTF-8 bytes of `text` in an ArrayBuffer of their own (never Node's shared pool), so they can be transferred. */
export function ownBytes(text: string): Uint8Array {
  const buf = Buffer.allocUnsafeSlow(Buffer.byteLength(text));
  buf.write(text);
  return buf;
}
