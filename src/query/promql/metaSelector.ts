import type { Matcher } from './storage.ts';

/*
 * The match[] selectors the in-process label index (labelIndex.ts) may answer: a safe subset of
 * PromQL's metric selector, parsed and matched here exactly as Prometheus would. Anything outside the
 * subset (escapes in strings, quoted label names, keywords as metric names, regexes beyond plain
 * alternatives of literals, `.*` and `.+`, every syntax error) gives undefined: the call then goes to
 * the engine as before, which parses it with Prometheus' own parser and answers or rejects it.
 */

/** A matcher checked in process: a label's value (`''` when the set lacks the label) → whether it matches. */
export type ValueTest = (value: string) => boolean;

export interface ParsedMatcher {
  name: string;
  test: ValueTest;
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;
/** Strings without escapes in any of PromQL's three quotes; an escape sends the selector to the engine. */
const STRING = /^(?:"([^"\\\n]*)"|'([^'\\\n]*)'|`([^`]*)`)/;
const OPERATOR = /^(=~|!~|!=|=)/;
/** A regex that is only alternatives of plain literals (no metacharacter at all): equality to one of them. */
const LITERALS = /^[A-Za-z0-9_:\-/ ]+(?:\|[A-Za-z0-9_:\-/ ]+)*$/;

/**
 * Words PromQL's lexer reads as keywords where a metric name could stand (aggregations, set and
 * vector-matching operators, modifiers…): such a selector goes to the engine, whatever it makes of it.
 */
const KEYWORDS = new Set([
  'sum', 'avg', 'count', 'min', 'max', 'group', 'stddev', 'stdvar', 'topk', 'bottomk', 'count_values', 'quantile', 'limitk', 'limit_ratio',
  'and', 'or', 'unless', 'atan2', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'offset', 'bool', 'start', 'end',
  'step', 'range', 'inf', 'nan', 'smoothed', 'anchored',
]);

/** A regex matcher's value test (Prometheus anchors it: the whole value), or undefined outside the safe subset. */
function regexTest(value: string): ValueTest | undefined {
  // RE2's `.` under Prometheus 3's (?s): any value, or any non-empty one.
  if (value === '.*') return () => true;
  if (value === '.+') return (v) => v !== '';
  if (!LITERALS.test(value)) return undefined;
  const set = new Set(value.split('|'));
  return (v) => set.has(v);
}

/** The test of one matcher, or undefined when outside the subset. */
export function matcherTest(m: Matcher): ValueTest | undefined {
  switch (m.type) {
    case '=':
      return (v) => v === m.value;
    case '!=':
      return (v) => v !== m.value;
    case '=~':
      return regexTest(m.value);
    case '!~': {
      const t = regexTest(m.value);
      return t && ((v) => !t(v));
    }
    default:
      return undefined;
  }
}

/** A small cursor over the selector text. */
class Cursor {
  constructor(private rest: string) {}
  skip(): void {
    this.rest = this.rest.replace(/^\s+/, '');
  }
  take(re: RegExp): RegExpExecArray | undefined {
    this.skip();
    const m = re.exec(this.rest);
    if (!m) return undefined;
    this.rest = this.rest.slice(m[0].length);
    return m;
  }
  eat(ch: string): boolean {
    this.skip();
    if (!this.rest.startsWith(ch)) return false;
    this.rest = this.rest.slice(ch.length);
    return true;
  }
  get done(): boolean {
    this.skip();
    return this.rest === '';
  }
}

/** The `{…}` part's matchers after the opening brace, or undefined outside the subset. */
function braceMatchers(c: Cursor): Matcher[] | undefined {
  const out: Matcher[] = [];
  while (!c.eat('}')) {
    const name = c.take(LABEL_NAME)?.[0];
    const op = c.take(OPERATOR)?.[0];
    const str = c.take(STRING);
    if (name === undefined || op === undefined || !str) return undefined;
    out.push({ type: op as Matcher['type'], name, value: str[1] ?? str[2] ?? str[3] });
    if (!c.eat(',')) {
      if (!c.eat('}')) return undefined;
      break;
    }
  }
  return out;
}

/**
 * One match[] selector as tests, or undefined when it is outside the subset or not valid (the engine
 * then answers, its errors included). Prometheus' rules kept: the metric name at most once, and at
 * least one matcher that does not match the empty value.
 */
export function parseMetaSelector(text: string): ParsedMatcher[] | undefined {
  const c = new Cursor(text);
  const matchers: Matcher[] = [];
  const name = c.take(METRIC_NAME)?.[0];
  if (name !== undefined) {
    if (KEYWORDS.has(name.toLowerCase())) return undefined;
    matchers.push({ type: '=', name: '__name__', value: name });
  }
  if (c.eat('{')) {
    const inner = braceMatchers(c);
    if (!inner) return undefined;
    if (name !== undefined && inner.some((m) => m.name === '__name__')) return undefined;
    matchers.push(...inner);
  }
  if (!c.done || !matchers.length) return undefined;
  const out: ParsedMatcher[] = [];
  for (const m of matchers) {
    const test = matcherTest(m);
    if (!test) return undefined;
    out.push({ name: m.name, test });
  }
  if (out.every((m) => m.test(''))) return undefined;
  return out;
}
