import { describe, expect, it } from 'vitest';
import type { ColumnType } from '../../src/model.ts';
import { currentSchema, emptyTable, evolveSchema, hiddenColumns, lakeColumns, timestampBound } from '../../src/storage/iceberg/metadata.ts';
import { staleSchema } from '../../src/storage/iceberg/publisher.ts';
import { dataFile, fileHour } from '../../src/storage/iceberg/snapshot.ts';

const types = (m: ReturnType<typeof emptyTable>) => Object.fromEntries(currentSchema(m).fields.map((f) => [f.name, f.type]));
const ids = (m: ReturnType<typeof emptyTable>) => Object.fromEntries(currentSchema(m).fields.map((f) => [f.name, f.id]));
const mapping = (m: ReturnType<typeof emptyTable>) => JSON.parse(m.properties['schema.name-mapping.default']) as { 'field-id': number; names: string[] }[];

describe('Iceberg schema of a dataset', () => {
  it.each<[ColumnType, unknown]>([
    ['VARCHAR', 'string'],
    ['BIGINT', 'long'],
    ['DOUBLE', 'double'],
    ['BOOLEAN', 'boolean'],
    ['TIMESTAMP', 'timestamp'],
    ['BIGINT[]', { type: 'list', 'element-id': 3, element: 'long', 'element-required': false }],
    ['DOUBLE[]', { type: 'list', 'element-id': 3, element: 'double', 'element-required': false }],
    ['VARCHAR[]', { type: 'list', 'element-id': 3, element: 'string', 'element-required': false }],
  ])('%s is %j', (type, iceberg) => {
    const m = emptyTable('file:///x', { p_timestamp: 'TIMESTAMP', 'odd.name': type }, 'p_timestamp', 0);
    expect(types(m)['odd.name']).toEqual(iceberg);
    expect(mapping(m).find((e) => e.names[0] === 'odd.name')?.['field-id']).toBe(ids(m)['odd.name']);
  });

  it('never registers a TIMESTAMP_NS column: it is named in the name mapping only, and the µs copy is the time column', () => {
    const lake = lakeColumns({ time_unix_nano: 'TIMESTAMP_NS', observed_time_unix_nano: 'TIMESTAMP_NS', body: 'VARCHAR' }, 'time_unix_nano');
    const m = emptyTable('file:///x', lake.columns, lake.timeColumn, 0);
    expect(Object.keys(types(m)).sort()).toEqual(['body', 'p_time_us']);
    expect(types(m).p_time_us).toBe('timestamp');
    expect(hiddenColumns(m).map((h) => h.name).sort()).toEqual(['observed_time_unix_nano', 'time_unix_nano']);
    const spec = m['partition-specs'][0].fields[0];
    expect(spec).toMatchObject({ transform: 'hour', 'source-id': ids(m).p_time_us });
    // Every id is unique across the schema and the hidden columns.
    const all = mapping(m).map((e) => e['field-id']);
    expect(new Set(all).size).toBe(all.length);
  });

  it('keeps ids when columns are added, and gives a widened column a new id (long → double is no Iceberg promotion)', () => {
    const v0 = emptyTable('file:///x', { p_timestamp: 'TIMESTAMP', n: 'BIGINT', t: 'TIMESTAMP_NS' }, 'p_timestamp', 0);
    const v1 = evolveSchema(v0, { p_timestamp: 'TIMESTAMP', n: 'BIGINT', t: 'TIMESTAMP_NS', s: 'VARCHAR' });
    expect(ids(v1)).toMatchObject({ p_timestamp: ids(v0).p_timestamp, n: ids(v0).n });
    expect(hiddenColumns(v1)).toEqual(hiddenColumns(v0));
    expect(v1['current-schema-id']).toBe(1);
    const v2 = evolveSchema(v1, { p_timestamp: 'TIMESTAMP', n: 'DOUBLE', t: 'TIMESTAMP_NS', s: 'VARCHAR' });
    expect(types(v2).n).toBe('double');
    expect(ids(v2).n).toBeGreaterThan(v1['last-column-id']);
    expect(v2['last-column-id']).toBe(ids(v2).n);
    expect(evolveSchema(v2, { p_timestamp: 'TIMESTAMP', n: 'DOUBLE', t: 'TIMESTAMP_NS', s: 'VARCHAR' })).toBe(v2);
  });

  it.each<[string, Record<string, ColumnType>, boolean]>([
    ['same view', { n: 'DOUBLE', s: 'VARCHAR' }, false],
    ['a column the table has is unknown here', { n: 'DOUBLE' }, true],
    ['the table widened a column this worker still sees as BIGINT', { n: 'BIGINT', s: 'VARCHAR' }, true],
    ['this worker knows more columns', { n: 'DOUBLE', s: 'VARCHAR', x: 'BOOLEAN' }, false],
  ])('stale view of the schema: %s → %s', (_name, columns, stale) => {
    expect(staleSchema({ fields: [{ name: 'n', type: 'double' }, { name: 's', type: 'string' }] }, columns)).toBe(stale);
  });
});

describe('Iceberg data files', () => {
  it.each([
    ['2026-01-01T00:00:00.000Z', '2026-01-01T00:59:59.999Z', true],
    ['2026-01-01T00:30:00.000Z', '2026-01-01T01:00:00.000Z', false],
  ])('a file from %s to %s lies in one hour: %s', (from, to, one) => {
    const f = { minMs: Date.parse(from), maxMs: Date.parse(to) };
    expect(fileHour(f)).toBe(one ? Math.floor(Date.parse(from) / 3_600_000) : undefined);
  });

  it('bounds contain every row: lower at the first ms, upper at the last µs of the last ms', () => {
    const minMs = Date.parse('2026-03-04T05:06:07.123Z');
    const maxMs = Date.parse('2026-03-04T05:59:00.456Z');
    const df = dataFile({ key: 'd/x.parquet', rows: 5, bytes: 10, minMs, maxMs, columns: [], nodeId: 'n' }, 'file:///d/x.parquet', 4, 'p_timestamp_hour');
    const lower = df.lower_bounds![0].value.readBigInt64LE();
    const upper = df.upper_bounds![0].value.readBigInt64LE();
    // A row at 05:59:00.456789 (µs the catalog's ms floor dropped) must be within the bounds.
    expect(lower).toBe(BigInt(minMs) * 1000n);
    expect(upper >= BigInt(maxMs) * 1000n + 789n).toBe(true);
    expect(upper < BigInt(maxMs + 1) * 1000n).toBe(true);
    expect(df.partition).toEqual({ p_timestamp_hour: Math.floor(minMs / 3_600_000) });
    expect(timestampBound(-1n).readBigInt64LE()).toBe(-1n);
  });
});
