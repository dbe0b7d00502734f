/**
 * TraceQL conditions as SQL boolean expressions over one span row (`s.`) and its trace's row (`t.`),
 * against the dataset's schema. Attributes are columns named by their key (src/ingest/otlp/attributes.ts);
 * a value whose type conflicts with its column sits in the typed sibling `<key>_<type>` (storage's
 * placement), so a comparison looks at every column that holds values of the literal's type, and a
 * comparison across types is false, as in Tempo (`.code = "200"` never matches the integer 200).
 */
import { invalidInput } from '../../errors.ts';
import { sqlIdent, sqlString } from '../../duckdb.ts';
import type { ColumnType } from '../../model.ts';
import { TRACES_KNOWN_TYPES } from '../../ingest/otlp/traces.ts';
import { KINDS, STATUSES, type Condition, type Field, type Intrinsic, type Literal } from './parse.ts';

export interface TraceSchema {
  /** The dataset's columns and their types. */
  columns: Record<string, ColumnType>;
  /**
   * The column listing, per span, the attribute keys whose column holds the resource's value (a JSON
   * array as text, or VARCHAR[]), when the dataset has one; without it, and on a span where it is null
   * (written before it existed), resource and span attributes cannot be told apart (docs/traces.md).
   */
  resourceKeys?: string;
}

type ValueType = 'string' | 'number' | 'bool';

const TYPES_OF: Record<ValueType, ColumnType[]> = { string: ['VARCHAR'], number: ['BIGINT', 'DOUBLE'], bool: ['BOOLEAN'] };
const SIBLINGS: Record<ValueType, string[]> = { string: ['utf8'], number: ['int64', 'float64'], bool: ['bool'] };

/** Whether a column is one the service writes (so no attribute can live in it). */
export function isFixedColumn(name: string): boolean {
  return Object.hasOwn(TRACES_KNOWN_TYPES, name) || name === 'resource_attribute_keys' || /^p_/i.test(name);
}

/** Columns that may hold attribute `name`'s values of one type (the column itself, its typed siblings). */
export function attributeColumns(schema: TraceSchema, name: string, type: ValueType | 'any'): string[] {
  if (isFixedColumn(name)) return [];
  const types = type === 'any' ? (['string', 'number', 'bool'] as ValueType[]) : [type];
  const out: string[] = [];
  for (const t of types) {
    const own = schema.columns[name];
    if (own !== undefined && TYPES_OF[t].includes(own) && !out.includes(name)) out.push(name);
    for (const suffix of SIBLINGS[t]) {
      const sibling = `${name}_${suffix}`;
      if (schema.columns[sibling] !== undefined && TYPES_OF[t].includes(schema.columns[sibling])) out.push(sibling);
    }
  }
  return out;
}

const SIBLING = /_(utf8|int64|float64|bool|list|timestamp_ms|timestamp_ns)$/;

/** The attribute names a dataset's columns hold (a typed sibling holds its base's values), sorted. */
export function attributeNames(columns: Record<string, ColumnType>): string[] {
  const names = Object.keys(columns)
    .filter((c) => !isFixedColumn(c))
    .map((c) => {
      const base = c.replace(SIBLING, '');
      return base !== c && Object.hasOwn(columns, base) ? base : c;
    });
  return [...new Set(names)].sort();
}

/** Where an intrinsic lives: a span column or the trace row's computed column. */
export const INTRINSIC_SQL: Record<Intrinsic, string> = {
  name: 's.span_name',
  statusMessage: 's.span_status_message',
  status: 's.span_status_code',
  kind: 's.span_kind',
  duration: 's.span_duration_ns',
  traceDuration: 't.p_tdur',
  rootName: 't.p_root_name',
  rootServiceName: 't.p_root_svc',
};
export const TRACE_LEVEL: ReadonlySet<Intrinsic> = new Set(['traceDuration', 'rootName', 'rootServiceName']);

function literalSql(v: Literal): string {
  switch (v.type) {
    case 'string':
      return sqlString(v.value);
    case 'number':
      return Number.isInteger(v.value) ? String(v.value) : `CAST(${sqlString(String(v.value))} AS DOUBLE)`;
    case 'bool':
      return v.value ? 'true' : 'false';
    case 'duration':
      return String(v.nanos);
    case 'status':
      return String(STATUSES.indexOf(v.value));
    case 'kind':
      return String(KINDS.indexOf(v.value));
    default:
      throw invalidInput('TraceQL: nil compares only with = and != on an attribute');
  }
}

/** `expr <op> literal` for one column expression. */
function comparison(expr: string, operator: string, v: Literal): string {
  const lit = literalSql(v);
  if (operator === '=~') return `regexp_full_match(${expr}, ${lit})`;
  if (operator === '!~') return `NOT regexp_full_match(${expr}, ${lit})`;
  if (operator === 'contains') return `contains(lower(${expr}), lower(${lit}))`;
  return `${expr} ${operator} ${lit}`;
}

const describe = (f: Field) => (f.kind === 'intrinsic' ? f.name : `${f.scope === 'any' ? '' : f.scope}.${f.name}`);

function intrinsicCondition(name: Intrinsic, operator: string, v: Literal): string {
  const expr = INTRINSIC_SQL[name];
  const wants: Record<Intrinsic, Literal['type']> = {
    name: 'string',
    statusMessage: 'string',
    rootName: 'string',
    rootServiceName: 'string',
    status: 'status',
    kind: 'kind',
    duration: 'duration',
    traceDuration: 'duration',
  };
  if (v.type !== wants[name]) throw invalidInput(`TraceQL: ${name} compares with a ${wants[name]} value, not a ${v.type}`);
  if ((name === 'status' || name === 'kind') && operator !== '=' && operator !== '!=') throw invalidInput(`TraceQL: ${name} compares only with = and !=`);
  if (v.type !== 'string' && (operator === '=~' || operator === '!~')) throw invalidInput(`TraceQL: ${operator} needs a string`);
  return comparison(expr, operator, v);
}

/** The resource keys of a span as a VARCHAR[] expression (`s.` row). */
export function resourceKeysList(schema: TraceSchema): string | undefined {
  if (schema.resourceKeys === undefined) return undefined;
  const col = `s.${sqlIdent(schema.resourceKeys)}`;
  return schema.columns[schema.resourceKeys] === 'VARCHAR[]' ? col : `CAST(CAST(${col} AS JSON) AS VARCHAR[])`;
}

function scopeCondition(schema: TraceSchema, scope: Field & { kind: 'attribute' }): string | undefined {
  const keys = resourceKeysList(schema);
  if (scope.scope === 'any' || keys === undefined) return undefined;
  const contains = `list_contains(${keys}, ${sqlString(scope.name)})`;
  // A span without the list (written before it existed) may hold either: both scopes match it.
  return scope.scope === 'resource' ? `coalesce(${contains}, true)` : `NOT coalesce(${contains}, false)`;
}

function attributeCondition(schema: TraceSchema, field: Field & { kind: 'attribute' }, operator: string, v: Literal): string {
  const scoped = (cond: string) => {
    const scope = scopeCondition(schema, field);
    return scope === undefined ? cond : `(${scope} AND ${cond})`;
  };
  if (v.type === 'nil') {
    if (operator !== '=' && operator !== '!=') throw invalidInput('TraceQL: nil compares only with = and !=');
    const columns = attributeColumns(schema, field.name, 'any');
    const exists = columns.length ? scoped(`(${columns.map((c) => `s.${sqlIdent(c)} IS NOT NULL`).join(' OR ')})`) : 'false';
    return operator === '!=' ? exists : `NOT ${exists}`;
  }
  if (operator === 'contains') {
    // The older tag search matches a value's text, whatever its type (`http.status_code=500`).
    const columns = attributeColumns(schema, field.name, 'any');
    return columns.length ? scoped(`(${columns.map((c) => comparison(`CAST(s.${sqlIdent(c)} AS VARCHAR)`, operator, v)).join(' OR ')})`) : 'false';
  }
  if (v.type !== 'string' && v.type !== 'number' && v.type !== 'bool') throw invalidInput(`TraceQL: ${describe(field)} cannot be compared with a ${v.type} value`);
  if (v.type !== 'string' && (operator === '=~' || operator === '!~')) throw invalidInput(`TraceQL: ${operator} needs a string`);
  if (v.type === 'bool' && operator !== '=' && operator !== '!=') throw invalidInput('TraceQL: booleans compare only with = and !=');
  const columns = attributeColumns(schema, field.name, v.type);
  if (!columns.length) return 'false';
  return scoped(`(${columns.map((c) => comparison(`s.${sqlIdent(c)}`, operator, v)).join(' OR ')})`);
}

/** A condition as SQL that is never NULL (a missing attribute makes a comparison false, as in Tempo). */
export function conditionSql(c: Condition, schema: TraceSchema): string {
  switch (c.op) {
    case 'and':
    case 'or':
      return `(${conditionSql(c.left, schema)} ${c.op.toUpperCase()} ${conditionSql(c.right, schema)})`;
    case 'const':
      return c.value ? 'true' : 'false';
    default: {
      const sql = c.field.kind === 'intrinsic' ? intrinsicCondition(c.field.name, c.operator, c.value) : attributeCondition(schema, c.field, c.operator, c.value);
      return `coalesce(${sql}, false)`;
    }
  }
}

/** Every field a condition names. */
export function fieldsOf(c: Condition): Field[] {
  if (c.op === 'and' || c.op === 'or') return [...fieldsOf(c.left), ...fieldsOf(c.right)];
  return c.op === 'compare' ? [c.field] : [];
}
