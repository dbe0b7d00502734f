/**
 * TraceQL, the subset this service answers (docs/traces.md "TraceQL"), parsed into a small tree. Anything
 * outside the subset is refused with an `invalid` error (400) that names the construct, so a query is
 * never answered as if it meant something else. Semantics follow Tempo's documentation: a span set
 * `{ … }` selects spans; `&&`/`||` between span sets combine traces; `.attr` is a resource OR span
 * attribute; `=~`/`!~` are anchored regular expressions (RE2, as in Tempo and DuckDB).
 */
import { invalidInput } from '../../errors.ts';

export type Intrinsic = 'name' | 'status' | 'statusMessage' | 'kind' | 'duration' | 'traceDuration' | 'rootName' | 'rootServiceName';
export type Scope = 'resource' | 'span' | 'any';
export type Field = { kind: 'attribute'; scope: Scope; name: string } | { kind: 'intrinsic'; name: Intrinsic };

export const STATUSES = ['unset', 'ok', 'error'] as const;
export const KINDS = ['unspecified', 'internal', 'server', 'client', 'producer', 'consumer'] as const;
export type Status = (typeof STATUSES)[number];
export type Kind = (typeof KINDS)[number];

export type Literal =
  | { type: 'string'; value: string }
  | { type: 'number'; value: number }
  | { type: 'duration'; nanos: number }
  | { type: 'bool'; value: boolean }
  | { type: 'status'; value: Status }
  | { type: 'kind'; value: Kind }
  | { type: 'nil' };

export type Operator = '=' | '!=' | '>' | '>=' | '<' | '<=' | '=~' | '!~';
/** `contains` is not TraceQL: the older tag search's case-insensitive substring match. */
export type Condition =
  | { op: 'and' | 'or'; left: Condition; right: Condition }
  | { op: 'compare'; field: Field; operator: Operator | 'contains'; value: Literal }
  | { op: 'const'; value: boolean };
export type SpansetExpr = { op: 'and' | 'or'; left: SpansetExpr; right: SpansetExpr } | { op: 'spanset'; condition: Condition };
export interface TraceqlQuery {
  expr: SpansetExpr;
  select: Field[];
}

type Token = { t: 'punct'; v: string; at: number } | { t: 'word'; v: string; at: number } | { t: 'string'; v: string; at: number } | { t: 'end'; at: number };

const PUNCT = ['&&', '||', '=~', '!~', '!=', '>=', '<=', '>>', '<<', '!>>', '!<<', '!>', '!<', '!~', '&>>', '&<<', '&>', '&<', '&~', '{', '}', '(', ')', ',', '|', '=', '>', '<', '~', '!', '+', '-', '*', '/', '%', '^', '['];
const PUNCT_SORTED = [...PUNCT].sort((a, b) => b.length - a.length);
/** Characters that end a word: what TraceQL does not allow unquoted in an attribute name. */
const WORD_END = /[\s{}()=!<>&|,"`~+*/%^[\]]/;

function unquote(text: string, from: number, quote: string): { value: string; end: number } {
  let out = '';
  for (let i = from + 1; i < text.length; i++) {
    const ch = text[i];
    if (ch === quote) return { value: out, end: i + 1 };
    if (ch === '\\' && quote === '"') {
      const next = text[++i];
      const escapes: Record<string, string> = { n: '\n', t: '\t', r: '\r', '\\': '\\', '"': '"' };
      out += escapes[next] ?? `\\${next ?? ''}`;
      continue;
    }
    out += ch;
  }
  throw invalidInput(`TraceQL: unterminated string starting at ${from}`);
}

export function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const ch = text[i];
    if (/\s/.test(ch)) {
      i++;
      continue;
    }
    if (ch === '"' || ch === '`') {
      const s = unquote(text, i, ch);
      tokens.push({ t: 'string', v: s.value, at: i });
      i = s.end;
      continue;
    }
    // A minus sign directly before a digit is part of a number (`-1`), not an operator.
    const number = ch === '-' && /\d/.test(text[i + 1] ?? '');
    const punct = number ? undefined : PUNCT_SORTED.find((p) => text.startsWith(p, i));
    if (punct !== undefined) {
      tokens.push({ t: 'punct', v: punct, at: i });
      i += punct.length;
      continue;
    }
    let j = i + 1;
    // A quoted attribute name after its scope: span."a b".
    while (j < text.length && !WORD_END.test(text[j])) j++;
    let word = text.slice(i, j);
    if (word.endsWith('.') && text[j] === '"') {
      const s = unquote(text, j, '"');
      word += s.value;
      j = s.end;
    }
    tokens.push({ t: 'word', v: word, at: i });
    i = j;
  }
  tokens.push({ t: 'end', at: text.length });
  return tokens;
}

const INTRINSICS: Record<string, Intrinsic> = {
  name: 'name',
  status: 'status',
  statusMessage: 'statusMessage',
  kind: 'kind',
  duration: 'duration',
  traceDuration: 'traceDuration',
  rootName: 'rootName',
  rootServiceName: 'rootServiceName',
  'span:name': 'name',
  'span:status': 'status',
  'span:statusMessage': 'statusMessage',
  'span:kind': 'kind',
  'span:duration': 'duration',
  'trace:duration': 'traceDuration',
  'trace:rootName': 'rootName',
  'trace:rootService': 'rootServiceName',
};
const UNSUPPORTED_SCOPES = ['event', 'link', 'instrumentation'];

/** A field as written: `.a.b`, `span.a`, `resource.a`, an intrinsic. */
export function parseField(word: string): Field {
  const intrinsic = INTRINSICS[word];
  if (intrinsic !== undefined) return { kind: 'intrinsic', name: intrinsic };
  const attr = (scope: Scope, name: string): Field => {
    if (name === '') throw invalidInput(`TraceQL: attribute name missing in "${word}"`);
    return { kind: 'attribute', scope, name };
  };
  if (word.startsWith('.')) return attr('any', word.slice(1));
  if (word.startsWith('span.')) return attr('span', word.slice(5));
  if (word.startsWith('resource.')) return attr('resource', word.slice(9));
  const scope = word.split(/[.:]/, 1)[0];
  if (UNSUPPORTED_SCOPES.includes(scope) || word.startsWith('span:') || word.startsWith('trace:')) {
    throw invalidInput(`TraceQL: "${word}" is not supported (${scope} attributes and intrinsics other than name, status, statusMessage, kind, duration, traceDuration, rootName, rootServiceName)`);
  }
  throw invalidInput(`TraceQL: unknown field "${word}" (attributes are written .name, span.name or resource.name)`);
}

const DURATION = /^(-?\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)$/;
const UNIT_NANOS: Record<string, number> = { ns: 1, us: 1e3, µs: 1e3, ms: 1e6, s: 1e9, m: 60e9, h: 3600e9 };

/** A Go-style duration (`1h30m`, `250ms`, `1.5s`) in nanoseconds, or undefined. */
export function parseDuration(text: string): number | undefined {
  let rest = text;
  let total = 0;
  if (rest === '') return undefined;
  while (rest !== '') {
    const m = /^(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/.exec(rest);
    if (!m) return undefined;
    total += Number(m[1]) * UNIT_NANOS[m[2]];
    rest = rest.slice(m[0].length);
  }
  return Math.round(total);
}

function literalOf(tok: Token): Literal {
  if (tok.t === 'string') return { type: 'string', value: tok.v };
  if (tok.t !== 'word') throw invalidInput(`TraceQL: a value expected at ${tok.at}`);
  const w = tok.v;
  if (/^-?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(w)) return { type: 'number', value: Number(w) };
  if (DURATION.test(w) || (/^\d/.test(w) && parseDuration(w) !== undefined)) {
    const negative = w.startsWith('-');
    const nanos = parseDuration(negative ? w.slice(1) : w);
    if (nanos !== undefined) return { type: 'duration', nanos: negative ? -nanos : nanos };
  }
  if (w === 'true' || w === 'false') return { type: 'bool', value: w === 'true' };
  if (w === 'nil') return { type: 'nil' };
  if ((STATUSES as readonly string[]).includes(w)) return { type: 'status', value: w as Status };
  if ((KINDS as readonly string[]).includes(w)) return { type: 'kind', value: w as Kind };
  throw invalidInput(`TraceQL: "${w}" is not a value (strings are quoted: "${w}")`);
}

const OPERATORS = new Set(['=', '!=', '>', '>=', '<', '<=', '=~', '!~']);
const STRUCTURAL = new Set(['>>', '<<', '>', '<', '~', '!>>', '!<<', '!>', '!<', '!~', '&>>', '&<<', '&>', '&<', '&~']);
const ARITHMETIC = new Set(['+', '-', '*', '/', '%', '^']);

/** The parser: one token of lookahead over the list `tokenize` made. */
class Parser {
  private pos = 0;
  constructor(private readonly tokens: Token[]) {}

  peek(): Token {
    return this.tokens[this.pos];
  }
  next(): Token {
    return this.tokens[this.pos++];
  }
  isPunct(v: string): boolean {
    const t = this.peek();
    return t.t === 'punct' && t.v === v;
  }
  expect(v: string): void {
    const t = this.next();
    if (t.t !== 'punct' || t.v !== v) throw invalidInput(`TraceQL: "${v}" expected at ${t.at}${t.t === 'end' ? ' (end of query)' : `, found "${t.v}"`}`);
  }

  query(): TraceqlQuery {
    const expr = this.spansetOr();
    const select: Field[] = [];
    while (this.isPunct('|')) {
      this.next();
      select.push(...this.pipelineStage());
    }
    const t = this.peek();
    if (t.t !== 'end') {
      if (t.t === 'punct' && STRUCTURAL.has(t.v)) throw invalidInput(`TraceQL: the structural operator "${t.v}" is not supported`);
      if (t.t === 'punct' && ARITHMETIC.has(t.v)) throw invalidInput(`TraceQL: arithmetic ("${t.v}") is not supported`);
      throw invalidInput(`TraceQL: unexpected "${t.t === 'word' || t.t === 'punct' || t.t === 'string' ? t.v : ''}" at ${t.at}`);
    }
    return { expr, select };
  }

  /** `| select(a, b)`; any other pipeline stage is named and refused. */
  pipelineStage(): Field[] {
    const t = this.next();
    if (t.t !== 'word') throw invalidInput(`TraceQL: a pipeline stage expected at ${t.at}`);
    if (t.v !== 'select') {
      if (t.t === 'word' && /^[a-z_]+$/i.test(t.v)) throw invalidInput(`TraceQL: the pipeline stage "${t.v}()" is not supported (only select())`);
      throw invalidInput(`TraceQL: pipeline stages other than select() are not supported ("${t.v}")`);
    }
    this.expect('(');
    const fields: Field[] = [];
    for (;;) {
      const f = this.next();
      if (f.t !== 'word') throw invalidInput(`TraceQL: a field expected in select() at ${f.at}`);
      fields.push(parseField(f.v));
      if (this.isPunct(',')) {
        this.next();
        continue;
      }
      this.expect(')');
      return fields;
    }
  }

  spansetOr(): SpansetExpr {
    let left = this.spansetAnd();
    while (this.isPunct('||')) {
      this.next();
      left = { op: 'or', left, right: this.spansetAnd() };
    }
    return left;
  }

  spansetAnd(): SpansetExpr {
    let left = this.spansetPrimary();
    while (this.isPunct('&&')) {
      this.next();
      left = { op: 'and', left, right: this.spansetPrimary() };
    }
    return left;
  }

  spansetPrimary(): SpansetExpr {
    const t = this.peek();
    if (t.t === 'punct' && t.v === '(') {
      this.next();
      const inner = this.spansetOr();
      this.expect(')');
      return inner;
    }
    if (t.t === 'word' && /^[a-z_]+$/i.test(t.v) && this.tokens[this.pos + 1]?.t === 'punct' && (this.tokens[this.pos + 1] as { v: string }).v === '(') {
      throw invalidInput(`TraceQL: "${t.v}()" is not supported (aggregates, by(), coalesce() and metrics functions are not)`);
    }
    this.expect('{');
    if (this.isPunct('}')) {
      this.next();
      return { op: 'spanset', condition: { op: 'const', value: true } };
    }
    const condition = this.condOr();
    this.expect('}');
    return { op: 'spanset', condition };
  }

  condOr(): Condition {
    let left = this.condAnd();
    while (this.isPunct('||')) {
      this.next();
      left = { op: 'or', left, right: this.condAnd() };
    }
    return left;
  }

  condAnd(): Condition {
    let left = this.condPrimary();
    while (this.isPunct('&&')) {
      this.next();
      left = { op: 'and', left, right: this.condPrimary() };
    }
    return left;
  }

  condPrimary(): Condition {
    const t = this.next();
    if (t.t === 'punct' && t.v === '(') {
      const inner = this.condOr();
      this.expect(')');
      return inner;
    }
    if (t.t === 'punct' && t.v === '!') throw invalidInput('TraceQL: negation with "!" is not supported (use != or !~)');
    if (t.t === 'word' && (t.v === 'true' || t.v === 'false') && !this.isOperator()) return { op: 'const', value: t.v === 'true' };
    if (t.t !== 'word') throw invalidInput(`TraceQL: a field expected at ${t.at}`);
    const field = parseField(t.v);
    const op = this.next();
    if (op.t !== 'punct' || !OPERATORS.has(op.v)) {
      if (op.t === 'punct' && ARITHMETIC.has(op.v)) throw invalidInput(`TraceQL: arithmetic ("${op.v}") is not supported`);
      throw invalidInput(`TraceQL: a comparison (= != > >= < <= =~ !~) expected after "${t.v}" (a field alone is not supported)`);
    }
    const value = literalOf(this.next());
    if (this.peek().t === 'punct' && ARITHMETIC.has((this.peek() as { v: string }).v)) throw invalidInput('TraceQL: arithmetic is not supported');
    return { op: 'compare', field, operator: op.v as Operator, value };
  }

  private isOperator(): boolean {
    const t = this.peek();
    return t.t === 'punct' && OPERATORS.has(t.v);
  }
}

const MAX_NESTING = 64;

/** Parses a TraceQL query; throws `invalid` naming what is wrong or unsupported. */
export function parseTraceql(text: string): TraceqlQuery {
  if (text.length > 64 * 1024) throw invalidInput('TraceQL: the query is longer than 64 KiB');
  const trimmed = text.trim();
  if (trimmed === '') return { expr: { op: 'spanset', condition: { op: 'const', value: true } }, select: [] };
  const tokens = tokenize(trimmed);
  // The parser recurses once per bracket: a bound keeps a hostile query from exhausting the stack.
  let depth = 0;
  for (const t of tokens) {
    if (t.t !== 'punct') continue;
    if (t.v === '(' || t.v === '{') depth++;
    else if (t.v === ')' || t.v === '}') depth--;
    if (depth > MAX_NESTING) throw invalidInput(`TraceQL: brackets nested deeper than ${MAX_NESTING}`);
  }
  return new Parser(tokens).query();
}
