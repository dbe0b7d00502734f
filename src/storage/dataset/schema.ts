import { inferType, type TypeSummary } from '../../model.ts';
import type { ColumnType } from '../../model.ts';

/**
 * Column name → type, in the order columns were first seen. Schemas made here have no prototype, so a
 * column may be called `constructor` or `__proto__` like any other; read them with `typeOf`.
 */
export type Schema = Record<string, ColumnType>;


/**
 * The one JSON column holding, per row, the fields that cannot have a column of their own (docs/ingestion.md
 * "Schema inference and evolution"). It does not count against P_MAX_COLUMNS.
 */
export const OVERFLOW_COLUMN = 'p_overflow';
/** Longest column name, in UTF-16 code units; a longer name's values go to the overflow column. */
export const MAX_NAME_LENGTH = 255;

export const emptySchema = (): Schema => Object.create(null) as Schema;

export function typeOf(schema: Schema, name: string): ColumnType | undefined {
  return Object.hasOwn(schema, name) ? schema[name] : undefined;
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
  const out = emptySchema();
  for (const schema of schemas) {
    for (const [name, type] of Object.entries(schema)) {
      const have = typeOf(out, name);
      out[name] = have === undefined ? type : (widen(have, type) ?? 'VARCHAR');
    }
  }
  return out;
}

/** The suffix of a typed sibling column (`level` → `level_utf8`), named as Parseable names them (Arrow's types). */
export const TYPE_SUFFIX: Record<ColumnType, string> = {
  VARCHAR: 'utf8',
  BIGINT: 'int64',
  DOUBLE: 'float64',
  BOOLEAN: 'bool',
  TIMESTAMP: 'timestamp_ms',
  TIMESTAMP_NS: 'timestamp_ns',
  'BIGINT[]': 'list',
  'DOUBLE[]': 'list',
  'VARCHAR[]': 'list',
};

const CONTROL_CHAR = /[\u0000-\u001f\u007f]/;

/** Whether a name can be a column at all: not empty, not too long, no control characters or lone surrogates. */
export function isColumnName(name: string): boolean {
  return name.length > 0 && name.length <= MAX_NAME_LENGTH && !CONTROL_CHAR.test(name) && (name as unknown as { isWellFormed(): boolean }).isWellFormed();
}

/**
 * How a value of some type fits a column of another: as it is, as text (a VARCHAR column takes any
 * value as its text), by widening the column (BIGINT → DOUBLE), or not at all.
 */
export type Fit = 'same' | 'text' | 'widen' | 'conflict';

export function fit(column: ColumnType, value: ColumnType): Fit {
  if (column === value) return 'same';
  const w = widen(column, value);
  if (w === column) return 'same';
  if (w !== undefined) return 'widen';
  return column === 'VARCHAR' ? 'text' : 'conflict';
}

/**
 * A schema being extended by one batch: the current columns plus those the batch adds or widens,
 * with what the rules need (a case-insensitive index, the column count).
 */
export class SchemaView {
  private added?: Schema;
  private lower?: Map<string, string>;
  private count: number;

  constructor(
    readonly current: Schema,
    private readonly maxColumns: number,
    /** Columns the service or the format defines: always added, whatever the count. */
    private readonly fixed: ReadonlySet<string>,
  ) {
    this.count = Object.keys(current).length;
  }

  typeOf(name: string): ColumnType | undefined {
    return (this.added && typeOf(this.added, name)) ?? typeOf(this.current, name);
  }

  /** Why a new column of this name cannot be added, or undefined when it can. */
  refusal(name: string): string | undefined {
    if (!isColumnName(name)) return name.length === 0 ? 'an empty name' : name.length > MAX_NAME_LENGTH ? `a name longer than ${MAX_NAME_LENGTH} characters` : 'control characters in the name';
    if (!this.lower) {
      this.lower = new Map();
      for (const n of Object.keys(this.current)) this.lower.set(n.toLowerCase(), n);
      for (const n of Object.keys(this.added ?? {})) this.lower.set(n.toLowerCase(), n);
    }
    const clash = this.lower.get(name.toLowerCase());
    if (clash !== undefined && clash !== name) return `it differs only in letter case from column "${clash}"`;
    if (name !== OVERFLOW_COLUMN && !this.fixed.has(name) && this.count >= this.maxColumns) return `the dataset has reached P_MAX_COLUMNS (${this.maxColumns})`;
    return undefined;
  }

  add(name: string, type: ColumnType): void {
    this.set(name, type);
    this.count++;
    this.lower?.set(name.toLowerCase(), name);
  }

  set(name: string, type: ColumnType): void {
    this.added ??= emptySchema();
    this.added[name] = type;
  }

  /** The schema with this batch's changes, or undefined when there are none. */
  next(): Schema | undefined {
    if (!this.added) return undefined;
    const out = emptySchema();
    for (const [n, t] of Object.entries(this.current)) out[n] = t;
    for (const [n, t] of Object.entries(this.added)) out[n] = t;
    return out;
  }
}

export type SchemaPlan = { next?: Schema; conflict?: undefined } | { next?: undefined; conflict: string };

/**
 * The main thread's check of a batch an ingest worker prepared against an earlier copy of the schema.
 * The worker has already moved every value that did not fit (docs/ingestion.md "Schema inference and evolution"),
 * so here a batch either fits as it is (new columns, widenings) or the schema changed in between and
 * the batch must be prepared again: `conflict` says why. Nothing is ever rewritten here.
 */
export function planSchema(current: Schema, summary: TypeSummary, maxColumns: number, fixed: ReadonlySet<string> = new Set()): SchemaPlan {
  const view = new SchemaView(current, maxColumns, fixed);
  for (const [name, types] of summary) {
    for (const type of types) {
      const have = view.typeOf(name);
      if (have === undefined) {
        const refusal = view.refusal(name);
        if (refusal !== undefined) return { conflict: `field "${name}" cannot be a column: ${refusal}` };
        view.add(name, type);
        continue;
      }
      const f = fit(have, type);
      if (f === 'widen') view.set(name, widen(have, type)!);
      else if (f !== 'same') return { conflict: `field "${name}" has type ${type} but column "${name}" is ${have}` };
    }
  }
  return { next: view.next() };
}

export { inferType, type TypeSummary };
