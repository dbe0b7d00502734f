/**
 * Lexical work on statement text that needs no parser: splitting a simple-query string into statements,
 * and finding `$n` parameter placeholders. Both skip string literals ('…', E'…', $tag$…$tag$), quoted
 * identifiers and comments, so a `;` or `$1` inside them is left alone.
 */

type Piece = { code: true; text: string } | { code: false; text: string };

/** The end of a '…' literal opening at `i` (E'…' strings escape with backslashes; standard ones only by doubling). */
function stringEnd(sql: string, i: number): number {
  const escaped = i > 0 && /[eE]/.test(sql[i - 1]) && (i < 2 || !/[\w$]/.test(sql[i - 2]));
  let j = i + 1;
  for (; j < sql.length; j++) {
    if (escaped && sql[j] === '\\') j++;
    else if (sql[j] === "'") {
      if (sql[j + 1] === "'") j++;
      else break;
    }
  }
  return Math.min(j + 1, sql.length);
}

/** The end of a "…" quoted name opening at `i`. */
function quotedEnd(sql: string, i: number): number {
  let j = i + 1;
  for (; j < sql.length; j++) {
    if (sql[j] === '"') {
      if (sql[j + 1] === '"') j++;
      else break;
    }
  }
  return Math.min(j + 1, sql.length);
}

/** The end of a block comment opening at `i` (PostgreSQL's block comments nest). */
function blockCommentEnd(sql: string, i: number): number {
  let depth = 0;
  let j = i;
  for (; j < sql.length; j++) {
    if (sql[j] === '/' && sql[j + 1] === '*') {
      depth++;
      j++;
    } else if (sql[j] === '*' && sql[j + 1] === '/') {
      depth--;
      j++;
      if (depth === 0) break;
    }
  }
  return Math.min(j + 1, sql.length);
}

/** The end of a $tag$…$tag$ literal opening at `i`; -1 when no dollar quote opens there. */
function dollarEnd(sql: string, i: number): number {
  if (i > 0 && /[\w$]/.test(sql[i - 1])) return -1;
  const tag = /^\$([A-Za-z_][A-Za-z0-9_]*)?\$/.exec(sql.slice(i, i + 64));
  if (!tag) return -1;
  const close = sql.indexOf(tag[0], i + tag[0].length);
  return close < 0 ? sql.length : close + tag[0].length;
}

/** Where the non-code piece opening at `i` ends; -1 when code goes on there. */
function nonCodeEnd(sql: string, i: number): number {
  const ch = sql[i];
  if (ch === "'") return stringEnd(sql, i);
  if (ch === '"') return quotedEnd(sql, i);
  if (ch === '-' && sql[i + 1] === '-') {
    const nl = sql.indexOf('\n', i);
    return nl < 0 ? sql.length : nl;
  }
  if (ch === '/' && sql[i + 1] === '*') return blockCommentEnd(sql, i);
  if (ch === '$') return dollarEnd(sql, i);
  return -1;
}

/** The text cut into code and non-code (literals, quoted names, comments) pieces, in order. */
function pieces(sql: string): Piece[] {
  const out: Piece[] = [];
  let start = 0;
  const flush = (end: number) => {
    if (end > start) out.push({ code: true, text: sql.slice(start, end) });
  };
  let i = 0;
  while (i < sql.length) {
    const end = nonCodeEnd(sql, i);
    if (end < 0) {
      i++;
      continue;
    }
    flush(i);
    out.push({ code: false, text: sql.slice(i, end) });
    i = start = end;
  }
  flush(sql.length);
  return out;
}

/** The statements of a simple-query string (empty ones dropped; comments kept with their statement). */
export function splitStatements(sql: string): string[] {
  const statements: string[] = [];
  let current = '';
  for (const p of pieces(sql)) {
    if (!p.code) {
      current += p.text;
      continue;
    }
    const parts = p.text.split(';');
    for (let k = 0; k < parts.length; k++) {
      current += parts[k];
      if (k < parts.length - 1) {
        statements.push(current);
        current = '';
      }
    }
  }
  statements.push(current);
  return statements.filter((s) => stripComments(s).trim() !== '');
}

/** The statement without comments (for recognising its first keyword). */
export function stripComments(sql: string): string {
  return pieces(sql)
    .map((p) => (p.code || !/^(--|\/\*)/.test(p.text) ? p.text : ' '))
    .join('');
}

/** The statement with every `$n` replaced by `render(n)` (1-based). */
export function replacePlaceholders(sql: string, render: (n: number) => string): string {
  return pieces(sql)
    .map((p) => (p.code ? p.text.replace(/(?<![\w$])\$(\d+)/g, (_, n: string) => render(Number(n))) : p.text))
    .join('');
}

/**
 * PostgreSQL syntax in catalog queries that DuckDB's parser reads differently, made plain:
 * - `OPERATOR(pg_catalog.~)` → `~` (DuckDB's parser drops the operator);
 * - `COLLATE pg_catalog.default` → nothing (DuckDB has no such collation);
 * - `pg_catalog.f(…)`, `information_schema.f(…)` → `f(…)` (DuckDB reads `a.f(x)` as a method call on a column `a`; its own
 *   pg_catalog functions and the catalog macros resolve unqualified);
 * - `::pg_catalog.text`, `AS pg_catalog.regtype` → `::text`, `AS regtype` (qualified type names).
 */
export function pgSyntax(sql: string): string {
  return pieces(sql)
    .map((p) =>
      p.code
        ? p.text
            .replace(/OPERATOR\s*\(\s*pg_catalog\s*\.\s*([^\s)]+)\s*\)/gi, ' $1 ')
            .replace(/COLLATE\s+pg_catalog\s*\.\s*default\b/gi, ' ')
            .replace(/\b(pg_catalog|information_schema)\s*\.\s*(?=[A-Za-z_]\w*\s*\()/gi, '')
            .replace(/(::\s*|\bAS\s+)pg_catalog\s*\.\s*/gi, '$1')
        : p.text,
    )
    .join('');
}
