/**
 * `COPY (SELECT …) TO STDOUT` — what psql's `\copy (…) to file` sends — is a read: its query runs as any
 * other statement, and its rows go out as COPY data (PostgreSQL's text or CSV format) instead of
 * DataRows. Only the query form: `COPY table TO …` and any `COPY … FROM` stay refused as writes or
 * unsupported.
 */
import { invalidInput } from '../../errors.ts';

export interface CopyOut {
  /** The SELECT inside the brackets. */
  query: string;
  csv: boolean;
  header: boolean;
}

const COPY_QUERY = /^\s*copy\s*\(([\s\S]*)\)\s*to\s+stdout\b\s*(?:with\s*)?(?:\(([^)]*)\))?\s*;?\s*$/i;

/** The COPY statement's parts, or undefined when the statement is not `COPY (query) TO STDOUT …`. */
export function copyOut(sql: string): CopyOut | undefined {
  const m = COPY_QUERY.exec(sql);
  if (!m) return undefined;
  const options = new Map<string, string>();
  for (const part of (m[2] ?? '').split(',').map((p) => p.trim()).filter(Boolean)) {
    const [name, ...value] = part.split(/\s+/);
    options.set(name.toLowerCase(), value.join(' ').replace(/^'(.*)'$/, '$1').toLowerCase());
  }
  const format = options.get('format') ?? 'text';
  if (format !== 'text' && format !== 'csv') throw invalidInput(`COPY format "${format}" is not supported: text or csv`);
  for (const name of options.keys()) if (name !== 'format' && name !== 'header') throw invalidInput(`COPY option "${name}" is not supported`);
  const header = options.has('header') && !['false', 'off', '0'].includes(options.get('header') ?? '');
  return { query: m[1], csv: format === 'csv', header };
}

/** One value in COPY's text format (backslash escapes) or CSV (quoted when it must be). */
function field(value: Buffer | null, csv: boolean): string {
  if (value === null) return csv ? '' : '\\N';
  const text = value.toString('utf8');
  if (csv) return /[",\n\r]/.test(text) || text === '' ? `"${text.replaceAll('"', '""')}"` : text;
  return text.replace(/[\\\t\n\r]/g, (c) => ({ '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' })[c]!);
}

/** DataRow messages (text format) → COPY data lines, one per row. */
export function copyLines(dataRows: Buffer, csv: boolean): string[] {
  const lines: string[] = [];
  let pos = 0;
  while (pos < dataRows.length) {
    const len = dataRows.readInt32BE(pos + 1);
    const n = dataRows.readInt16BE(pos + 5);
    let p = pos + 7;
    const values: string[] = [];
    for (let i = 0; i < n; i++) {
      const l = dataRows.readInt32BE(p);
      p += 4;
      values.push(field(l < 0 ? null : dataRows.subarray(p, p + l), csv));
      if (l > 0) p += l;
    }
    lines.push(`${values.join(csv ? ',' : '\t')}\n`);
    pos += 1 + len;
  }
  return lines;
}

/** A header line (CSV) of the column names. */
export function headerLine(names: string[]): string {
  return `${names.map((n) => field(Buffer.from(n), true)).join(',')}\n`;
}
