import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseTraceql, parseDuration, type Condition, type Field, type Literal, type SpansetExpr } from '../../src/query/traceql/parse.ts';
import { searchSql } from '../../src/query/traceql/search.ts';
import type { TraceSchema } from '../../src/query/traceql/conditions.ts';
import { planStatement } from '../../src/query/sql/sandbox.ts';

/**
 * TraceQL → SQL, checked against an evaluator written here the obvious way (Tempo's documented
 * semantics, over a list of span objects): every query's SQL runs in DuckDB over the same spans laid out
 * as the service stores them (attributes as columns by key, a conflicting type in its typed sibling,
 * resource keys listed per span as a JSON array), and must give the same traces, matched counts and spans.
 */

type Value = string | number | boolean;
interface Span {
  trace: string;
  id: string;
  parent: string | null;
  name: string;
  kind: number;
  status: number;
  statusMessage: string | null;
  start: bigint;
  end: bigint;
  resource: Record<string, Value>;
  attrs: Record<string, Value>;
}

/** A deterministic pseudo-random sequence (the test data never changes between runs). */
function rng(seed: number) {
  let s = seed;
  return () => {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    return s / 2 ** 31;
  };
}

function makeSpans(): Span[] {
  const r = rng(7);
  const pick = <T>(xs: T[]) => xs[Math.floor(r() * xs.length)];
  const services = ['frontend', 'cart', 'payment', 'db'];
  const names = ['GET /', 'GET /cart', 'POST /pay', 'SELECT', 'render', 'auth'];
  const spans: Span[] = [];
  const base = 1_700_000_000_000_000_000n;
  for (let t = 0; t < 24; t++) {
    const trace = t.toString(16).padStart(32, '0');
    const n = 1 + Math.floor(r() * 6);
    const tStart = base + BigInt(t) * 10_000_000_000n;
    for (let i = 0; i < n; i++) {
      const start = tStart + BigInt(Math.floor(r() * 1_000_000_000)) * (i === 0 ? 0n : 1n);
      const durationNs = BigInt(Math.floor(r() * 2_000_000_000));
      const attrs: Record<string, Value> = {};
      if (r() < 0.7) attrs['http.status_code'] = pick([200, 201, 404, 500, 503]);
      if (r() < 0.6) attrs['http.method'] = pick(['GET', 'POST', 'get']);
      // retry: integers mostly, a few strings (a conflicting type: the typed sibling retry_utf8).
      if (r() < 0.5) attrs.retry = r() < 0.8 ? pick([0, 1, 2, 3]) : pick(['1', 'many']);
      if (r() < 0.4) attrs['cache.hit'] = r() < 0.5;
      if (r() < 0.3) attrs.ratio = pick([0.25, 0.5, 1.5, 3]);
      const resource: Record<string, Value> = { 'service.name': pick(services), region: pick(['eu', 'us']) };
      // deployment is a resource attribute on some spans and a span attribute on others.
      if (r() < 0.3) resource.deployment = pick(['blue', 'green']);
      else if (r() < 0.3) attrs.deployment = pick(['blue', 'green']);
      spans.push({
        trace,
        id: `${t.toString(16).padStart(8, '0')}${i.toString(16).padStart(8, '0')}`,
        parent: i === 0 ? null : `${t.toString(16).padStart(8, '0')}${Math.floor(r() * i).toString(16).padStart(8, '0')}`,
        name: pick(names),
        kind: Math.floor(r() * 6),
        status: pick([0, 0, 1, 2]),
        statusMessage: r() < 0.2 ? 'boom' : null,
        start,
        end: start + durationNs,
        resource,
        attrs,
      });
    }
  }
  return spans;
}

// ---- the evaluator: Tempo's semantics, the obvious way -------------------------------------------

const KINDS = ['unspecified', 'internal', 'server', 'client', 'producer', 'consumer'];
const STATUSES = ['unset', 'ok', 'error'];

function traceFacts(spans: Span[]) {
  const start = spans.reduce((m, s) => (s.start < m ? s.start : m), spans[0].start);
  const end = spans.reduce((m, s) => (s.end > m ? s.end : m), spans[0].end);
  const root = spans.find((s) => s.parent === null);
  return { start, duration: Number(end - start), rootName: root?.name ?? null, rootService: (root?.resource['service.name'] as string | undefined) ?? null };
}

/** The values a field has on a span (an unscoped attribute: resource OR span). */
function valuesOf(f: Field, s: Span, facts: ReturnType<typeof traceFacts>): Value[] {
  if (f.kind === 'attribute') {
    const out: Value[] = [];
    if (f.scope !== 'span' && f.name in s.resource) out.push(s.resource[f.name]);
    if (f.scope !== 'resource' && f.name in s.attrs) out.push(s.attrs[f.name]);
    return out;
  }
  const v: Record<string, Value | null> = {
    name: s.name,
    statusMessage: s.statusMessage,
    status: STATUSES[s.status],
    kind: KINDS[s.kind],
    duration: Number(s.end - s.start),
    traceDuration: facts.duration,
    rootName: facts.rootName,
    rootServiceName: facts.rootService,
  };
  const x = v[f.name];
  return x === null ? [] : [x];
}

/** RE2's `(?i)` prefix as JavaScript's i flag. */
const anchored = (re: string) => (re.startsWith('(?i)') ? new RegExp(`^(?:${re.slice(4)})$`, 'i') : new RegExp(`^(?:${re})$`));

function compare(a: Value, op: string, lit: Literal): boolean {
  const b = lit.type === 'duration' ? lit.nanos : 'value' in lit ? lit.value : null;
  if (typeof a !== typeof b) return false;
  switch (op) {
    case '=':
      return a === b;
    case '!=':
      return a !== b;
    case '>':
      return a > b!;
    case '>=':
      return a >= b!;
    case '<':
      return a < b!;
    case '<=':
      return a <= b!;
    case '=~':
      return anchored(b as string).test(a as string);
    case '!~':
      return !anchored(b as string).test(a as string);
    default:
      throw new Error(op);
  }
}

function holds(c: Condition, s: Span, facts: ReturnType<typeof traceFacts>): boolean {
  if (c.op === 'and' || c.op === 'or') return c.op === 'and' ? holds(c.left, s, facts) && holds(c.right, s, facts) : holds(c.left, s, facts) || holds(c.right, s, facts);
  if (c.op === 'const') return c.value;
  if (c.op !== 'compare') throw new Error('unreachable');
  const values = valuesOf(c.field, s, facts);
  if (c.value.type === 'nil') return c.operator === '=' ? values.length === 0 : values.length > 0;
  return values.some((v) => compare(v, c.operator, c.value));
}

function spanset(e: SpansetExpr, spans: Span[], facts: ReturnType<typeof traceFacts>): Set<Span> {
  if (e.op === 'spanset') return new Set(spans.filter((s) => holds(e.condition, s, facts)));
  const l = spanset(e.left, spans, facts);
  const r = spanset(e.right, spans, facts);
  if (e.op === 'and' && (l.size === 0 || r.size === 0)) return new Set();
  return new Set([...l, ...r]);
}

function evaluate(query: string, all: Span[], limit: number, spss: number) {
  const q = parseTraceql(query);
  const byTrace = new Map<string, Span[]>();
  for (const s of all) byTrace.set(s.trace, [...(byTrace.get(s.trace) ?? []), s]);
  const hits = [];
  for (const [trace, spans] of byTrace) {
    const facts = traceFacts(spans);
    const set = [...spanset(q.expr, spans, facts)];
    if (set.length === 0) continue;
    set.sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : a.id < b.id ? -1 : 1));
    hits.push({ trace, start: facts.start, matched: set.length, spans: set.slice(0, spss).map((s) => s.id), rootName: facts.rootName, rootService: facts.rootService, duration: facts.duration });
  }
  hits.sort((a, b) => (a.start > b.start ? -1 : a.start < b.start ? 1 : a.trace < b.trace ? -1 : 1));
  return hits.slice(0, limit).map(({ start, ...rest }) => ({ ...rest, start: String(start) }));
}

// ---- the spans as the service stores them -----------------------------------------------------

async function load(conn: DuckDBConnection, spans: Span[]): Promise<TraceSchema> {
  const columns: TraceSchema['columns'] = {};
  const typeOf = (v: Value) => (typeof v === 'string' ? 'VARCHAR' : typeof v === 'boolean' ? 'BOOLEAN' : Number.isInteger(v) ? 'BIGINT' : 'DOUBLE');
  const suffix = { VARCHAR: 'utf8', BIGINT: 'int64', DOUBLE: 'float64', BOOLEAN: 'bool' } as const;
  const rows = spans.map((s) => {
    const row: Record<string, Value | null> = {};
    for (const [k, v] of Object.entries({ ...s.resource, ...s.attrs })) {
      const t = typeOf(v);
      columns[k] ??= t;
      const col = columns[k] === t ? k : `${k}_${suffix[t]}`;
      columns[col] ??= t;
      row[col] = v;
    }
    return { s, row };
  });
  const attrCols = Object.keys(columns);
  await conn.run(`CREATE TABLE otel_traces (span_trace_id VARCHAR, span_span_id VARCHAR, span_parent_span_id VARCHAR, span_name VARCHAR, span_kind BIGINT,
    span_status_code BIGINT, span_status_message VARCHAR, span_start_time_unix_nano TIMESTAMP_NS, span_end_time_unix_nano TIMESTAMP_NS, span_duration_ns BIGINT,
    resource_attribute_keys VARCHAR${attrCols.map((c) => `, "${c}" ${columns[c]}`).join('')})`);
  const lit = (v: Value | null | undefined) => (v === null || v === undefined ? 'NULL' : typeof v === 'string' ? `'${v.replaceAll("'", "''")}'` : String(v));
  for (const { s, row } of rows) {
    const ts = (n: bigint) => `make_timestamp_ns(${n})`;
    await conn.run(
      `INSERT INTO otel_traces VALUES (${lit(s.trace)}, ${lit(s.id)}, ${lit(s.parent)}, ${lit(s.name)}, ${s.kind}, ${s.status}, ${lit(s.statusMessage)}, ${ts(s.start)}, ${ts(s.end)}, ${s.end - s.start},
        ${lit(JSON.stringify(Object.keys(s.resource)))}${attrCols.map((c) => `, ${lit(row[c])}`).join('')})`,
    );
  }
  return { columns: { ...columns, span_name: 'VARCHAR', resource_attribute_keys: 'VARCHAR' }, resourceKeys: 'resource_attribute_keys' };
}

const QUERIES = [
  '{}',
  '{ }',
  '{ name = "GET /cart" }',
  '{ name != "GET /cart" }',
  '{ name =~ "GET.*" }',
  '{ name !~ "GET.*" }',
  '{ name =~ "GET" }',
  '{ status = error }',
  '{ status != unset }',
  '{ kind = server || kind = client }',
  '{ duration > 1s }',
  '{ duration <= 500ms && status = ok }',
  '{ span:duration >= 1.5s }',
  '{ traceDuration > 1500ms }',
  '{ trace:duration < 1s }',
  '{ rootName = "GET /" }',
  '{ rootServiceName = "frontend" && status = error }',
  '{ .http.status_code = 500 }',
  '{ .http.status_code >= 404 && .http.status_code < 500 }',
  '{ span.http.status_code != 200 }',
  '{ .http.status_code = "500" }',
  '{ .http.method = "GET" }',
  '{ .http.method =~ "(?i)get" }',
  '{ resource.service.name = "cart" }',
  '{ span.service.name = "cart" }',
  '{ .service.name = "cart" || .service.name = "db" }',
  '{ resource.region = "eu" && span.http.method = "POST" }',
  '{ .deployment = "blue" }',
  '{ resource.deployment = "blue" }',
  '{ span.deployment = "blue" }',
  '{ .retry = 1 }',
  '{ .retry = "1" }',
  '{ .retry > 1 }',
  '{ .retry != nil }',
  '{ .retry = nil }',
  '{ .cache.hit = true }',
  '{ .cache.hit != false }',
  '{ .ratio > 0.4 }',
  '{ .ratio = 1.5 }',
  '{ .nope = "x" }',
  '{ .nope = nil }',
  '{ statusMessage = "boom" }',
  '{ (.http.status_code = 500 || .http.status_code = 503) && .service.name = "payment" }',
  '{ .service.name = "frontend" } && { .service.name = "db" }',
  '{ .service.name = "frontend" } || { status = error }',
  '{ status = error } && { kind = client }',
  '({ .service.name = "cart" } && { .service.name = "db" }) || { .http.status_code = 503 }',
  '{ .service.name = "cart" } && ({ .service.name = "db" } || { name = "auth" })',
  '{ status = error } | select(span.http.method, resource.region)',
  '{ true }',
  '{ false }',
];

describe('TraceQL search against an independent evaluator', () => {
  let conn: DuckDBConnection;
  let schema: TraceSchema;
  const spans = makeSpans();
  beforeAll(async () => {
    conn = await (await DuckDBInstance.create(':memory:')).connect();
    schema = await load(conn, spans);
  });
  afterAll(() => conn.closeSync());

  it.each(QUERIES.flatMap((q) => [[q, 5, 3] as const, [q, 100, 100] as const]))('%s (limit %i, spss %i)', async (query, limit, spss) => {
    const expected = evaluate(query, spans, limit, spss);
    const { sql } = searchSql(parseTraceql(query), schema, { dataset: 'otel_traces', limit, spss });
    // The statement passes the SQL sandbox every user statement passes.
    await planStatement(conn, sql, { maxSqlBytes: 1 << 20, maxDepth: 20 });
    const rows = (await conn.runAndReadAll(sql)).getRowObjectsJson() as Record<string, unknown>[];
    const got = rows.map((r) => ({
      trace: r.trace_id,
      matched: Number(r.matched),
      spans: (JSON.parse(String(r.spans)) as { id: string }[]).map((s) => s.id),
      rootName: r.root_name,
      rootService: r.root_service,
      duration: Number(r.duration_ns),
      start: r.start_ns,
    }));
    expect(got).toEqual(expected);
  });

  it.each([
    ['{ resource.a = "x" }', ['from resource', 'unknown']],
    ['{ span.a = "x" }', ['from span', 'unknown']],
    ['{ .a = "x" }', ['from resource', 'from span', 'unknown']],
  ])('%s: a span written before resource keys were kept (null) matches either scope', async (query, names) => {
    const keys: TraceSchema = { columns: { a: 'VARCHAR', span_name: 'VARCHAR', resource_attribute_keys: 'VARCHAR' }, resourceKeys: 'resource_attribute_keys' };
    await conn.run(`CREATE OR REPLACE TABLE scoped AS SELECT * FROM (VALUES
      ('t1', 's1', 'from resource', '["a"]'), ('t2', 's2', 'from span', '[]'), ('t3', 's3', 'unknown', NULL)) v(span_trace_id, span_span_id, span_name, resource_attribute_keys)`);
    await conn.run(`ALTER TABLE scoped ADD COLUMN a VARCHAR DEFAULT 'x'`);
    await conn.run(`ALTER TABLE scoped ADD COLUMN span_parent_span_id VARCHAR`);
    await conn.run(`ALTER TABLE scoped ADD COLUMN span_start_time_unix_nano TIMESTAMP_NS DEFAULT make_timestamp_ns(1)`);
    await conn.run(`ALTER TABLE scoped ADD COLUMN span_end_time_unix_nano TIMESTAMP_NS DEFAULT make_timestamp_ns(2)`);
    await conn.run(`ALTER TABLE scoped ADD COLUMN span_duration_ns BIGINT DEFAULT 1`);
    const { sql } = searchSql(parseTraceql(query), keys, { dataset: 'scoped', limit: 10, spss: 10 });
    const rows = (await conn.runAndReadAll(sql)).getRowObjectsJson() as Record<string, unknown>[];
    expect(rows.map((r) => r.root_name).sort()).toEqual(names);
  });

  it('answers the attributes a query names and select()s, typed', async () => {
    const { sql, fields } = searchSql(parseTraceql('{ .http.status_code = 500 } | select(resource.service.name, status)'), schema, { dataset: 'otel_traces', limit: 100, spss: 100 });
    expect(fields.map((f) => f.key)).toEqual(['http.status_code', 'service.name', 'status']);
    const rows = (await conn.runAndReadAll(sql)).getRowObjectsJson() as Record<string, unknown>[];
    const byId = new Map(spans.map((s) => [s.id, s]));
    for (const r of rows) {
      for (const s of JSON.parse(String(r.spans)) as { id: string; a: unknown[] }[]) {
        const span = byId.get(s.id)!;
        expect(s.a).toEqual([500, span.resource['service.name'], STATUSES[span.status]]);
      }
    }
    expect(rows.length).toBeGreaterThan(0);
  });
});

describe('TraceQL parser', () => {
  it.each([
    ['{ .a = "x" }', { kind: 'attribute', scope: 'any', name: 'a' }, { type: 'string', value: 'x' }],
    ['{ span.http.url = `a"b` }', { kind: 'attribute', scope: 'span', name: 'http.url' }, { type: 'string', value: 'a"b' }],
    ['{ resource.k8s.pod-name = "p" }', { kind: 'attribute', scope: 'resource', name: 'k8s.pod-name' }, { type: 'string', value: 'p' }],
    ['{ span."with space" = 1 }', { kind: 'attribute', scope: 'span', name: 'with space' }, { type: 'number', value: 1 }],
    ['{ .x = -2.5 }', { kind: 'attribute', scope: 'any', name: 'x' }, { type: 'number', value: -2.5 }],
    ['{ duration > 1h30m }', { kind: 'intrinsic', name: 'duration' }, { type: 'duration', nanos: 5400e9 }],
    ['{ duration > 250µs }', { kind: 'intrinsic', name: 'duration' }, { type: 'duration', nanos: 250e3 }],
    ['{ kind = consumer }', { kind: 'intrinsic', name: 'kind' }, { type: 'kind', value: 'consumer' }],
    ['{ trace:rootService = "a\\"b" }', { kind: 'intrinsic', name: 'rootServiceName' }, { type: 'string', value: 'a"b' }],
  ])('%s', (query, field, value) => {
    const q = parseTraceql(query);
    expect(q.expr).toEqual({ op: 'spanset', condition: { op: 'compare', field, operator: expect.any(String), value } });
  });

  it.each([
    ['{ .a = 1 } | count() > 2', 'count()'],
    ['{ .a = 1 } | avg(duration) > 1s', 'avg()'],
    ['{ .a = 1 } >> { .b = 2 }', '">>"'],
    ['{ .a = 1 } > { .b = 2 }', '">"'],
    ['{ .a = 1 } ~ { .b = 2 }', '"~"'],
    ['{ .a = 1 } | by(.b)', 'by()'],
    ['{ .a = 1 } | rate()', 'rate()'],
    ['{ event.name = "x" }', 'event.name'],
    ['{ link.traceID = "x" }', 'link.traceID'],
    ['{ instrumentation:name = "x" }', 'instrumentation:name'],
    ['{ span:id = "x" }', 'span:id'],
    ['{ .a + 1 = 2 }', 'arithmetic'],
    ['{ !(.a = 1) }', 'negation'],
    ['{ .a }', 'a field alone'],
    ['{ .a = 1', '"}" expected'],
    ['{ .a = bare }', '"bare" is not a value'],
    ['{ foo = 1 }', 'unknown field "foo"'],
  ])('%s is refused, naming %s', (query, naming) => {
    expect(() => parseTraceql(query)).toThrow(naming);
  });

  it.each([
    ['{ status > error }', 'status compares only with = and !='],
    ['{ duration > 5 }', 'duration compares with a duration value'],
    ['{ name = 1 }', 'name compares with a string value'],
    ['{ .a =~ 1 }', '=~ needs a string'],
    ['{ .a = error }', 'cannot be compared with a status value'],
  ])('%s is refused when translated: %s', (query, message) => {
    expect(() => searchSql(parseTraceql(query), { columns: {} }, { dataset: 'd', limit: 1, spss: 1 })).toThrow(message);
  });

  it.each([
    ['1h', 3600e9],
    ['1m30s', 90e9],
    ['1.5s', 1.5e9],
    ['100ns', 100],
    ['x', undefined],
    ['', undefined],
  ])('duration %s', (text, nanos) => expect(parseDuration(text)).toBe(nanos));
});
