/**
 * Lexical work on statement text that needs no parser: splitting a simple-query string into statements,
 * and finding `$n` parameter placeholders. Both skip string literals ('…', E'…', $tag$…$tag$), quoted
 * identifiers and comments, so a `;` or `$1` inside them is left alone.
 */

type Piece = { code: true; text: string } | { code: false; text: string };

/** The text cut into code and non-code (literals, quoted names, comments) pieces, in order. */
function pieces(sql: string): Piece[] {
  const out: Piece[] = [];
  let start = 0;
  const flush = (end: number) => {
    if (end > start) out.push({ code: true, text: sql.slice(start, end) });
  };
  let i = 0;
  while (i < sql.length) {
    const ch = sql[i];
    let end = -1;
    if (ch === "'") {
      // E'…' strings escape with backslashes; standard ones only by doubling.
      const escaped = i > 0 && /[eE]/.test(sql[i - 1]) && (i < 2 || !/[\w$]/.test(sql[i - 2]));
      let j = i + 1;
      for (; j < sql.length; j++) {
        if (escaped && sql[j] === '\\') j++;
        else if (sql[j] === "'") {
          if (sql[j + 1] === "'") j++;
          else break;
        }
      }
      end = Math.min(j + 1, sql.length);
    } else if (ch === '"') {
      let j = i + 1;
      for (; j < sql.length; j++) {
        if (sql[j] === '"') {
          if (sql[j + 1] === '"') j++;
          else break;
        }
      }
      end = Math.min(j + 1, sql.length);
    } else if (ch === '-' && sql[i + 1] === '-') {
      const nl = sql.indexOf('\n', i);
      end = nl < 0 ? sql.length : nl;
    } else if (ch === '/' && sql[i + 1] === '*') {
      // PostgreSQL's block comments nest.
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
      end = Math.min(j + 1, sql.length);
    } else if (ch === '$' && (i === 0 || !/[\w$]/.test(sql[i - 1]))) {
      const tag = /^\$([A-Za-z_][A-Za-z0-9_]*)?\$/.exec(sql.slice(i, i + 64));
      if (tag) {
        const close = sql.indexOf(tag[0], i + tag[0].length);
        end = close < 0 ? sql.length : close + tag[0].length;
      }
    }
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

/** The highest `$n` placeholder in the statement (0 when it has none). */
export function placeholderCount(sql: string): number {
  let max = 0;
  for (const p of pieces(sql)) {
    if (!p.code) continue;
    for (const m of p.text.matchAll(/(?<![\w$])\$(\d+)/g)) max = Math.max(max, Number(m[1]));
  }
  return max;
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
