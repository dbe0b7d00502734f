/**
 * A dataset's schema as the console uses it, from either shape the API may answer with: today's
 * `{fields: [{name, data_type: "VARCHAR"}]}` (DuckDB type names) or Arrow's schema JSON
 * (`data_type: "Utf8" | "Int64" | {"Timestamp": [...]}` …), with or without our extra keys.
 */
export interface Field {
  name: string;
  /** Display name of the type. */
  type: string;
  kind: 'text' | 'number' | 'bool' | 'time' | 'list' | 'other';
}

export interface DatasetSchema {
  fields: Field[];
  timeColumn?: string;
  kind?: string;
}

const ARROW_KIND: Record<string, Field['kind']> = {
  Utf8: 'text', LargeUtf8: 'text', Utf8View: 'text',
  Int8: 'number', Int16: 'number', Int32: 'number', Int64: 'number',
  UInt8: 'number', UInt16: 'number', UInt32: 'number', UInt64: 'number',
  Float16: 'number', Float32: 'number', Float64: 'number', Decimal128: 'number',
  Boolean: 'bool', Date32: 'time', Date64: 'time',
};

function classify(dataType: unknown): Pick<Field, 'type' | 'kind'> {
  if (typeof dataType === 'string') {
    if (ARROW_KIND[dataType]) return { type: dataType, kind: ARROW_KIND[dataType] };
    const t = dataType.toUpperCase();
    if (t.endsWith('[]') || t.startsWith('LIST') || t.startsWith('STRUCT') || t.startsWith('MAP')) return { type: dataType, kind: 'list' };
    if (t.startsWith('TIMESTAMP') || t === 'DATE') return { type: dataType, kind: 'time' };
    if (/^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|FLOAT|DOUBLE|REAL|DECIMAL)/.test(t)) return { type: dataType, kind: 'number' };
    if (t === 'BOOLEAN') return { type: dataType, kind: 'bool' };
    if (t === 'VARCHAR' || t === 'TEXT' || t === 'JSON') return { type: dataType, kind: 'text' };
    return { type: dataType, kind: 'other' };
  }
  if (dataType && typeof dataType === 'object') {
    const [key] = Object.keys(dataType);
    if (key === 'Timestamp') return { type: 'Timestamp', kind: 'time' };
    if (key === 'List' || key === 'LargeList' || key === 'Struct' || key === 'Map') return { type: key, kind: 'list' };
    if (key?.startsWith('Decimal')) return { type: key, kind: 'number' };
    return { type: key ?? 'unknown', kind: 'other' };
  }
  return { type: 'unknown', kind: 'other' };
}

/** Time column by dataset kind, for answers that do not name it (Arrow's shape has no such key). */
const TIME_BY_KIND: Record<string, string> = {
  json: 'p_timestamp',
  'otel-logs': 'time_unix_nano',
  'otel-traces': 'span_start_time_unix_nano',
  'otel-metrics': 'time_unix_nano',
};

export function normalizeSchema(body: unknown, kindHint?: string): DatasetSchema {
  const b = (body ?? {}) as Record<string, unknown>;
  const raw = Array.isArray(b.fields) ? b.fields : [];
  const fields = raw
    .filter((f): f is Record<string, unknown> => !!f && typeof f === 'object' && typeof (f as Record<string, unknown>).name === 'string')
    .map((f) => ({ name: f.name as string, ...classify(f.data_type) }));
  const kind = typeof b.kind === 'string' ? b.kind : typeof b.log_source === 'string' ? b.log_source : kindHint;
  const named = typeof b.time_column === 'string' ? b.time_column : undefined;
  const byKind = kind ? TIME_BY_KIND[kind] : undefined;
  const timeColumn =
    named ?? (byKind && fields.some((f) => f.name === byKind) ? byKind : fields.find((f) => f.name === 'p_timestamp')?.name ?? fields.find((f) => f.kind === 'time')?.name ?? byKind);
  return { fields, timeColumn, kind };
}
