/**
 * Where each value of a batch is stored, decided in the ingest worker against a copy of the dataset's
 * schema (docs/ingestion.md "Schema inference and evolution"). Nothing a client sends is refused for its names or
 * types; a value that does not fit is moved, never dropped:
 *
 * - a new name adds a column; a fraction into a BIGINT column widens it to DOUBLE; a JSON string
 *   holding a time under a time-like name is a TIMESTAMP value (docs/time.md, `TimeGuess`);
 * - any value into a VARCHAR column is stored as its text;
 * - a value whose type conflicts with its column goes to the typed sibling `<name>_<type>` (Parseable's
 *   naming: `_utf8`, `_int64`, `_float64`, `_bool`, `_list`, `_timestamp_ms`, `_timestamp_ns`);
 * - a name that cannot be a column (empty, over 255 characters, differing only in letter case from a
 *   column, beyond P_MAX_COLUMNS, a duplicate, a sibling that conflicts too) goes into the row's
 *   `p_overflow` JSON object under its name.
 *
 * The batch is checked per distinct (name, type) pair; rows are rewritten only when something moves.
 * The main thread re-checks the result against the schema as it is by then (`planSchema`): if another
 * request changed it in between, the job runs again here with the new schema.
 */
import { fit, OVERFLOW_COLUMN, SchemaView, TYPE_SUFFIX, inferType, typeOf, widen, type Schema, type TypeSummary } from '../../storage/dataset/schema.ts';
import { isTimeName, isoOf, parseTimestamp } from '../json/eventTime.ts';
import { invalidInput, tooLarge } from '../../errors.ts';
import { asText, cleanName, overflowText, setField } from '../names.ts';
import { OVERFLOW, type ColumnType, type FlatRow, type FlatValue } from '../../model.ts';

/** Where values of one (name, type) go: a column (as text or not), or the overflow column (null). */
export interface Target {
  column: string | null;
  text: boolean;
}
export type Moves = Map<string, Map<ColumnType, Target>>;

type Known = Record<string, ColumnType>;

/** A prototype-free copy, so that looking up a field called `constructor` finds nothing. */
export const knownTypesOf = (known: Record<string, ColumnType>): Known => Object.assign(Object.create(null) as Known, known);

/**
 * Whether a field's string values are tried as times (JSON events, docs/time.md): Parseable's rule, a
 * name with a time-like part (`isTimeName`), unless the dataset already holds that column as text
 * (values into a VARCHAR column stay text as they came, and the common path never parses them).
 */
export type TimeGuess = (name: string) => boolean;

export function timeGuess(schema: Schema): TimeGuess {
  const seen = new Map<string, boolean>();
  return (name) => {
    let yes = seen.get(name);
    if (yes === undefined) {
      yes = isTimeName(name) && typeOf(schema, name) !== 'VARCHAR';
      seen.set(name, yes);
    }
    return yes;
  };
}

export function valueType(known: Known, name: string, value: FlatValue, guess?: TimeGuess): ColumnType | undefined {
  const k = known[name];
  if (k !== undefined) return k;
  if (guess !== undefined && typeof value === 'string' && guess(name) && !Number.isNaN(parseTimestamp(value))) return 'TIMESTAMP';
  return inferType(value);
}

/**
 * Per column, the types the rows carry; rows with overflow entries bring the overflow column. More
 * than `maxNames` distinct names is 413 (see RequestLimits.maxNames), checked as they come.
 */
export function summarizeTypes(rows: FlatRow[], knownTypes: Record<string, ColumnType>, maxNames = Infinity, guess?: TimeGuess): TypeSummary {
  const known = knownTypesOf(knownTypes);
  const summary: TypeSummary = new Map();
  for (const row of rows) {
    for (const name in row) {
      const value = row[name];
      if (value === null) continue;
      const type = valueType(known, name, value, guess);
      if (type === undefined) continue;
      const seen = summary.get(name);
      if (!seen) {
        summary.set(name, [type]);
        if (summary.size > maxNames) throw tooLarge(`request holds more than ${maxNames} distinct field names (4 × P_MAX_COLUMNS); send smaller batches or fewer distinct names`);
      } else if (!seen.includes(type)) seen.push(type);
    }
    if (row[OVERFLOW] !== undefined && !summary.has(OVERFLOW_COLUMN)) summary.set(OVERFLOW_COLUMN, ['VARCHAR']);
  }
  return summary;
}

/** A value of `type` in `column`: added or widened as needed; 'conflict' when the column cannot hold it. */
function tryColumn(view: SchemaView, column: string, type: ColumnType): Target | 'conflict' {
  const have = view.typeOf(column);
  if (have === undefined) {
    if (view.refusal(column) !== undefined) return { column: null, text: false };
    view.add(column, type);
    return { column, text: false };
  }
  const f = fit(have, type);
  if (f === 'widen') view.set(column, widen(have, type)!);
  return f === 'conflict' ? 'conflict' : { column, text: f === 'text' };
}

/** The field's own column, else its typed sibling (`<name>_<type>`), else the overflow. */
function place(view: SchemaView, name: string, type: ColumnType): Target {
  const own = tryColumn(view, name, type);
  if (own !== 'conflict') return own;
  const sibling = tryColumn(view, `${name}_${TYPE_SUFFIX[type]}`, type);
  return sibling === 'conflict' ? { column: null, text: false } : sibling;
}

/**
 * Decides where every (name, type) of a batch goes; undefined when every value stays where it is (the
 * common case: the rows are stored as they are). Columns the format defines (`fixed`) are placed first,
 * so they win a letter-case clash with a data field of the same batch, and never count against the limit.
 */
export function placeValues(current: Schema, summary: TypeSummary, maxColumns: number, fixed: ReadonlySet<string>): Moves | undefined {
  const view = new SchemaView(current, maxColumns, fixed);
  let moves: Moves | undefined;
  let overflow = summary.has(OVERFLOW_COLUMN);
  const names = [...summary.keys()].filter((n) => n !== OVERFLOW_COLUMN);
  names.sort((a, b) => Number(fixed.has(b)) - Number(fixed.has(a)));
  for (const name of names) {
    const clean = cleanName(name);
    for (const type of summary.get(name)!) {
      const target = place(view, clean, type);
      if (target.column === name && !target.text) continue;
      if (target.column === null) overflow = true;
      moves ??= new Map();
      let byType = moves.get(name);
      if (!byType) moves.set(name, (byType = new Map()));
      byType.set(type, target);
    }
  }
  if (!overflow) return moves;
  const have = view.typeOf(OVERFLOW_COLUMN);
  if (have === undefined ? view.refusal(OVERFLOW_COLUMN) !== undefined : have !== 'VARCHAR') {
    throw invalidInput(`the dataset has a column that keeps "${OVERFLOW_COLUMN}" from being created; values that fit no column cannot be stored`);
  }
  return moves ?? new Map();
}

/**
 * Rewrites the rows as `moves` says, and writes every row's overflow into the overflow column. A time
 * found in a string (`guess`) is stored in its TIMESTAMP column in ISO form, and as it came as text.
 */
export function applyMoves(rows: FlatRow[], moves: Moves, knownTypes: Record<string, ColumnType>, guess?: TimeGuess): void {
  const known = knownTypesOf(knownTypes);
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i];
    const overflow = row[OVERFLOW] ? [...row[OVERFLOW]] : [];
    const out: FlatRow = {};
    for (const name in row) {
      const value = row[name];
      if (value === null) continue;
      const type = valueType(known, name, value, guess);
      const target = (type && moves.get(name)?.get(type)) || { column: name, text: false };
      // Two fields moved to one column (a cleaned name meeting the same name, say): the first keeps it.
      if (target.column === null || Object.hasOwn(out, target.column)) overflow.push([name, value]);
      else if (target.text) setField(out, target.column, asText(value));
      else if (type === 'TIMESTAMP' && typeof value === 'string' && known[name] === undefined) setField(out, target.column, isoOf(value, parseTimestamp(value)));
      else setField(out, target.column, value);
    }
    if (overflow.length) out[OVERFLOW_COLUMN] = overflowText(overflow);
    rows[i] = out;
  }
}

/**
 * Places a batch's values against the schema and rewrites the rows if anything moves. Returns the
 * summary of what the rows now hold.
 */
export function placeRows(rows: FlatRow[], knownTypes: Record<string, ColumnType>, schema: Schema, maxColumns: number, maxNames = Infinity, guess?: TimeGuess): TypeSummary {
  const summary = summarizeTypes(rows, knownTypes, maxNames, guess);
  const moves = placeValues(schema, summary, maxColumns, new Set(Object.keys(knownTypes)));
  // Times found in strings are rewritten to their ISO form even when nothing moves.
  const guessed = guess !== undefined && [...summary].some(([name, types]) => !Object.hasOwn(knownTypes, name) && types.includes('TIMESTAMP'));
  if (!moves && !guessed) return summary;
  applyMoves(rows, moves ?? new Map(), knownTypes, guess);
  return summarizeTypes(rows, knownTypes, Infinity, guess);
}
