import type { ColumnType, FlatRow, FlatValue, RowBatch } from '../model.ts';
import { invalidInput } from '../errors.ts';

/** Column name → type, in the order columns were first seen. */
export type Schema = Record<string, ColumnType>;

export function inferType(value: FlatValue): ColumnType | undefined {
  switch (typeof value) {
    case 'string':
      return 'VARCHAR';
    case 'boolean':
      return 'BOOLEAN';
    case 'number':
      return Number.isSafeInteger(value) ? 'BIGINT' : 'DOUBLE';
    default:
      if (Array.isArray(value)) return value.every((v) => typeof v === 'number') ? 'DOUBLE[]' : 'VARCHAR[]';
      return undefined;
  }
}

/**
 * The type a column must have to hold both: equal types stay, BIGINT and DOUBLE widen to DOUBLE, and
 * anything else has no common type here (undefined). Used when one dataset's schemas from several
 * workers meet, where VARCHAR is the fallback.
 */
export function widen(a: ColumnType, b: ColumnType): ColumnType | undefined {
  if (a === b) return a;
  if ((a === 'BIGINT' && b === 'DOUBLE') || (a === 'DOUBLE' && b === 'BIGINT')) return 'DOUBLE';
  if ((a === 'TIMESTAMP' && b === 'TIMESTAMP_NS') || (a === 'TIMESTAMP_NS' && b === 'TIMESTAMP')) return 'TIMESTAMP_NS';
  if ((a === 'BIGINT[]' && b === 'DOUBLE[]') || (a === 'DOUBLE[]' && b === 'BIGINT[]')) return 'DOUBLE[]';
  return undefined;
}

export function unionSchemas(schemas: Schema[]): Schema {
  const out: Schema = {};
  for (const schema of schemas) {
    for (const [name, type] of Object.entries(schema)) {
      const have = out[name];
      out[name] = have === undefined ? type : (widen(have, type) ?? 'VARCHAR');
    }
  }
  return out;
}

/** Per column, the distinct types a batch brings, in the order they first appear. */
export type TypeSummary = Map<string, ColumnType[]>;

export function summarizeTypes(rows: FlatRow[], knownTypes: Record<string, ColumnType>): TypeSummary {
  const summary: TypeSummary = new Map();
  for (const row of rows) {
    for (const name in row) {
      const value = row[name];
      if (value === null) continue;
      const type = knownTypes[name] ?? inferType(value);
      if (type === undefined) continue;
      const seen = summary.get(name);
      if (!seen) summary.set(name, [type]);
      else if (!seen.includes(type)) seen.push(type);
    }
  }
  return summary;
}

export interface SchemaPlan {
  /** The schema after this batch, or undefined when the batch fits the current schema as is. */
  next?: Schema;
  /** Columns whose non-text values must be stored as text (a number into a VARCHAR column). */
  coerceToText: Set<string>;
}

/**
 * Checks what a batch brings against the dataset schema. Rules (README "Schema inference and
 * evolution"): new fields add columns; a fraction into a BIGINT column widens it to DOUBLE; a number or
 * boolean into a VARCHAR column is stored as its text; any other mismatch rejects the whole request
 * with a 400 naming the field, so nothing already stored is ever reinterpreted.
 */
export function planSchema(current: Schema, summary: TypeSummary, maxColumns: number): SchemaPlan {
  let next: Schema | undefined;
  const coerceToText = new Set<string>();
  let lowerNames: Map<string, string> | undefined;
  const setType = (name: string, type: ColumnType) => {
    next ??= { ...current };
    next[name] = type;
  };
  for (const [name, types] of summary) {
    for (const type of types) {
      const have = (next ?? current)[name];
      if (have === undefined) {
        if (name.length === 0) throw invalidInput('an empty field name is not allowed');
        if (name.length > 255) throw invalidInput(`field name "${name.slice(0, 40)}…" is longer than 255 characters`);
        if (!lowerNames) {
          lowerNames = new Map();
          for (const n of Object.keys(next ?? current)) lowerNames.set(n.toLowerCase(), n);
        }
        const clash = lowerNames.get(name.toLowerCase());
        if (clash !== undefined && clash !== name) {
          throw invalidInput(`field "${name}" differs only in letter case from existing column "${clash}" (column names are case-insensitive in SQL)`);
        }
        lowerNames.set(name.toLowerCase(), name);
        setType(name, type);
        if (Object.keys(next!).length > maxColumns) throw invalidInput(`dataset would exceed the limit of ${maxColumns} columns (at field "${name}")`);
        continue;
      }
      if (have === type) continue;
      if (have === 'VARCHAR' && (type === 'BIGINT' || type === 'DOUBLE' || type === 'BOOLEAN')) {
        coerceToText.add(name);
        continue;
      }
      const widened = widen(have, type);
      if (widened === have) continue;
      if (widened !== undefined) {
        setType(name, widened);
        continue;
      }
      throw invalidInput(`field "${name}" has type ${describe(type)} but the dataset stores it as ${describe(have)}`);
    }
  }
  return { next, coerceToText };
}

/** Stores the values of the given columns as text, in place. */
export function coerceRows(rows: FlatRow[], columns: Set<string>): void {
  for (const row of rows) {
    for (const name of columns) {
      const v = row[name];
      if (v !== null && v !== undefined && typeof v !== 'string') row[name] = Array.isArray(v) ? JSON.stringify(v) : String(v);
    }
  }
}

function describe(type: ColumnType): string {
  switch (type) {
    case 'VARCHAR':
      return 'string (VARCHAR)';
    case 'BIGINT':
      return 'integer (BIGINT)';
    case 'DOUBLE':
      return 'number (DOUBLE)';
    case 'BOOLEAN':
      return 'boolean (BOOLEAN)';
    default:
      return type;
  }
}

/** Serialises one row as a WAL line. Non-finite doubles become the strings DuckDB casts back to them. */
export function rowToJsonLine(row: FlatRow): string {
  for (const key in row) {
    const v = row[key];
    if (typeof v === 'number' && !Number.isFinite(v)) row[key] = Number.isNaN(v) ? 'NaN' : v > 0 ? 'Infinity' : '-Infinity';
    else if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        const x = v[i];
        if (typeof x === 'number' && !Number.isFinite(x)) (v as unknown[])[i] = Number.isNaN(x) ? 'NaN' : x > 0 ? 'Infinity' : '-Infinity';
      }
    }
  }
  return JSON.stringify(row);
}
