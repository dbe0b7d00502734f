export function formatBytes(n: number | undefined | null): string {
  if (n === undefined || n === null || !Number.isFinite(n)) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? v : v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

export function formatCount(n: number | undefined | null): string {
  if (n === undefined || n === null || !Number.isFinite(n)) return '—';
  return n.toLocaleString('en-US');
}

/** A cell's text: strings as they are, everything else as JSON. */
export function cellText(v: unknown): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'string') return v;
  return JSON.stringify(v);
}

/** Widths come from the text of the first rows: measuring every row of 100k would stall the page. */
const SAMPLE_ROWS = 200;
const CHAR_PX = 7.6;
export const MIN_W = 64;
const MAX_W = 640;

/** A column's width from its name and the longest of most of its sampled values (the 90th percentile). */
export function autoWidth(col: string, rows: Record<string, unknown>[]): number {
  const lens = rows.slice(0, SAMPLE_ROWS).map((r) => cellText(r[col]).length).sort((a, b) => a - b);
  const p90 = lens.length ? lens[Math.min(lens.length - 1, Math.floor(lens.length * 0.9))] : 0;
  return Math.round(Math.min(MAX_W, Math.max(MIN_W, Math.max(col.length + 2, p90) * CHAR_PX + 18)));
}

