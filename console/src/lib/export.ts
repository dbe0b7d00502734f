import { cellText } from './format.ts';
import type { Row } from './api.ts';

/** RFC 4180 CSV: every field quoted when it holds a quote, comma, or line break. */
export function toCsv(fields: string[], rows: Row[]): string {
  const q = (s: string) => (/[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s);
  const lines = [fields.map(q).join(',')];
  for (const r of rows) lines.push(fields.map((f) => q(cellText(r[f]))).join(','));
  return `${lines.join('\r\n')}\r\n`;
}

export function toNdjson(fields: string[], rows: Row[]): string {
  return rows.map((r) => JSON.stringify(Object.fromEntries(fields.map((f) => [f, r[f] ?? null])))).join('\n') + (rows.length ? '\n' : '');
}
