import { describe, expect, it } from 'vitest';
import { spanRows } from '../../src/ingest/otlp/traces.ts';
import { Rejections } from '../../src/ingest/otlp/values.ts';
import { spanFromRow } from '../../src/query/traces/model.ts';
import { attributeFrom, normalTraceId, searchConditions, tagCondition } from '../../src/query/traces/sql.ts';

const kv = (key: string, v: string) => ({ key, value: { stringValue: v } });
const request = (resource: string[], scope: string[], span: string[]) => ({
  resourceSpans: [
    {
      resource: { attributes: resource.map((k) => kv(k, `r-${k}`)) },
      scopeSpans: [{ scope: { name: 'lib', attributes: scope.map((k) => kv(k, `s-${k}`)) }, spans: [{ traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', name: 'op', startTimeUnixNano: '1700000000000000000', endTimeUnixNano: '1700000000100000000', attributes: span.map((k) => kv(k, `x-${k}`)) }] }],
    },
  ],
});

/** Reading a stored row back: as the query returns it (start/end added as nanosecond text). */
const readBack = (row: Record<string, unknown>) => spanFromRow({ ...row, '@start_ns': '1700000000000000000', '@end_ns': '1700000000100000000' });

describe('resource_attribute_keys: which flattened columns came from the resource', () => {
  it.each([
    ['resource only', ['service.name', 'a'], [], [], { resource: ['service.name', 'a'], span: [] }],
    ['span attribute of the same name wins', ['service.name', 'a'], [], ['a'], { resource: ['service.name'], span: ['a'] }],
    ['scope attribute of the same name wins', ['service.name', 'a'], ['a'], [], { resource: ['service.name'], span: ['a'] }],
    ['custom resource keys are told apart', ['service.name', 'team'], [], ['http.route'], { resource: ['service.name', 'team'], span: ['http.route'] }],
  ])('%s', (_name, resource, scope, span, expected) => {
    const rows = spanRows(request(resource, scope, span), { receivedAt: '2024-01-01T00:00:00.000000000Z', rejections: new Rejections() });
    expect(rows).toHaveLength(1);
    const s = readBack(rows[0] as Record<string, unknown>);
    expect(Object.keys(s.resource).sort()).toEqual([...expected.resource].sort());
    expect(Object.keys(s.attributes).sort()).toEqual([...expected.span].sort());
    // The value in each place is the one sent at that level.
    for (const k of expected.span) expect(s.attributes[k]).toMatch(/^[xs]-/);
    for (const k of expected.resource) expect(s.resource[k]).toBe(`r-${k}`);
  });

  it('rows written before the column: well-known resource prefixes are the resource (documented limit)', () => {
    const s = readBack({ span_trace_id: 't', span_span_id: 's', 'service.name': 'svc', 'host.name': 'h', team: 'x', 'http.route': '/' });
    expect(s.resource).toEqual({ 'service.name': 'svc', 'host.name': 'h' });
    expect(s.attributes).toEqual({ team: 'x', 'http.route': '/' });
    expect(s.serviceName).toBe('svc');
  });

  it('a malformed stored cell is refused, not passed on', () => {
    expect(() => readBack({ span_trace_id: 't', span_span_id: 's', span_events: 'not json' })).toThrow();
  });
});

describe('trace ids', () => {
  it.each([
    ['0AF7651916CD43DD8448EB211C80319C', '0af7651916cd43dd8448eb211c80319c'],
    ['8448eb211c80319c', '00000000000000008448eb211c80319c'],
    ['xyz', undefined],
    ['0'.repeat(33), undefined],
  ])('%s', (id, expected) => expect(normalTraceId(id)).toBe(expected));
});

describe('search conditions', () => {
  const cols = new Set(['span_trace_id', 'span_name', 'span_status_code', 'span_kind', 'span_duration_ns', 'service.name', 'tier']);
  it.each([
    ['a column the dataset lacks matches nothing', 'missing', 'v', 'false'],
    ['an attribute column compares as text', 'tier', "it's", `CAST("tier" AS VARCHAR) = 'it''s'`],
    ['error=true is the error status', 'error', 'true', '(coalesce(span_status_code, 0) = 2 OR false)'],
    ['span.kind is the kind column', 'span.kind', 'server', '(span_kind = 2 OR false)'],
  ])('%s', (_name, k, v, sql) => expect(tagCondition(cols, k, v)).toBe(sql));
  it('no condition is true', () => expect(searchConditions(cols, { limit: 1 })).toEqual(['true']));
});

describe('attributeFrom: resource or span, in SQL, checked against DuckDB', () => {
  // Rows: which level each `team`/`host.name` value came from, and whether the row predates the column.
  const rows = [
    { id: 1, keys: '["team","host.name"]', team: 'r', host: 'h' },
    { id: 2, keys: '["host.name"]', team: 's', host: 'h' },
    { id: 3, keys: null, team: 's', host: 'h' },
    { id: 4, keys: '[]', team: null, host: 's' },
  ];
  it.each([
    ['resource', 'team', [1]],
    ['span', 'team', [2, 3]],
    ['resource', 'host.name', [1, 2, 3]],
    ['span', 'host.name', [4]],
    ['resource', 'missing', []],
  ] as const)('%s.%s', async (scope, key, expected) => {
    const { DuckDBInstance } = await import('@duckdb/node-api');
    const conn = await (await DuckDBInstance.create(':memory:')).connect();
    const values = rows.map((r) => `(${r.id}, ${r.keys === null ? 'NULL' : `'${r.keys}'`}, ${r.team === null ? 'NULL' : `'${r.team}'`}, '${r.host}')`).join(', ');
    await conn.run(`CREATE TABLE t AS SELECT * FROM (VALUES ${values}) v(id, resource_attribute_keys, team, "host.name")`);
    const cols = new Set(['resource_attribute_keys', 'team', 'host.name']);
    const got = (await conn.runAndReadAll(`SELECT id FROM t WHERE ${attributeFrom(cols, scope, key)} ORDER BY id`)).getRows().map(([id]) => Number(id));
    expect(got).toEqual(expected);
  });
});
