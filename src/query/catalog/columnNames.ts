/**
 * The names PostgreSQL 15 gives a catalog statement's result columns (its parser's FigureColname), for
 * DuckDB's parse tree: DuckDB names an unnamed expression by its text (`CASE WHEN … END`, the rewritten
 * `__pg_regclass(c.oid)`), PostgreSQL by its function, column or construct (`pg_get_expr`, `oid`,
 * `case`, `?column?`), and PostgreSQL folds an unquoted alias to lower case (`NULL AS TABLE_CAT` is
 * `table_cat`). Clients that read columns by name (SQLAlchemy's rows, pandas) see PostgreSQL's names.
 * Computed on the statement as written, before the catalog rewrite replaces casts and renames functions.
 */

import { forEachNode, type Node } from './ast.ts';
import { CATALOG_COLUMN_TYPES, CATALOG_FUNCTION_TYPES } from './pgColumnTypes.ts';

/** A name and how sure it is (PostgreSQL's strength: 2 a column or function, 1 a type or `case`, 0 none). */
type Figured = [name: string, strength: number];

const NONE: Figured = ['?column?', 0];

/** DuckDB's type ids → the name PostgreSQL's parser records for `::type` (its last name). */
const CAST_NAMES: Record<string, string> = {
  INTEGER: 'int4', BIGINT: 'int8', SMALLINT: 'int2', BOOLEAN: 'bool', DOUBLE: 'float8', FLOAT: 'float4', VARCHAR: 'text',
  DATE: 'date', TIMESTAMP: 'timestamp', 'TIMESTAMP WITH TIME ZONE': 'timestamptz', TIME: 'time', INTERVAL: 'interval', DECIMAL: 'numeric',
};

/** DuckDB's operator-like nodes that PostgreSQL names after the construct. */
const CONSTRUCT_NAMES: Record<string, string> = {
  OPERATOR_COALESCE: 'coalesce',
  ARRAY_CONSTRUCTOR: 'array',
};

/** PostgreSQL's column name for one select-list expression. */
function figure(n: Node | null | undefined): Figured {
  if (!n || typeof n !== 'object') return NONE;
  switch (n.class) {
    case 'COLUMN_REF': {
      const names = n.column_names as string[];
      return [names[names.length - 1], 2];
    }
    case 'FUNCTION':
      if (n.is_operator) return NONE;
      return figureFunction(n);
    case 'CAST': {
      const inner = figure(n.child as Node);
      if (inner[1] >= 2) return inner;
      const type = n.cast_type as Node | undefined;
      const info = type?.type_info as Node | null | undefined;
      const written = info?.type === 'UNBOUND_TYPE_INFO' ? String(info.name ?? '') : CAST_NAMES[String(type?.id ?? '')];
      return written ? [written.toLowerCase(), 1] : inner;
    }
    case 'CASE': {
      const inner = figure(n.else_expr as Node);
      return inner[1] >= 2 ? inner : ['case', 1];
    }
    case 'SUBQUERY':
      return figureSubquery(n);
    case 'OPERATOR': {
      const construct = CONSTRUCT_NAMES[String(n.type)];
      if (construct) return [construct, 2];
      // `a[1]`, `a[1:2]`: PostgreSQL names a subscript after what is subscripted.
      if (n.type === 'ARRAY_EXTRACT' || n.type === 'ARRAY_SLICE') return figure((n.children as Node[])[0]);
      return NONE;
    }
    default:
      return NONE;
  }
}

function figureFunction(n: Node): Figured {
  const name = String(n.function_name ?? '').toLowerCase();
  // DuckDB reads `ARRAY[…]` and `ROW(…)` as these functions.
  if (name === 'list_value') return ['array', 2];
  if (name === 'row') return ['row', 2];
  if (name === 'struct_extract' || name === 'array_extract') return figure((n.children as Node[])[0]);
  return [name, 2];
}

function figureSubquery(n: Node): Figured {
  if (n.subquery_type === 'EXISTS') return ['exists', 2];
  if (n.subquery_type !== 'SCALAR') return NONE;
  const select = (n.subquery as Node | undefined)?.node as Node | undefined;
  const first = (select?.select_list as Node[] | undefined)?.[0];
  if (!first) return NONE;
  if (first.alias) return [String(first.alias), 2];
  return figure(first);
}

/** A name as PostgreSQL keeps it: as written when it was quoted in the statement, else in lower case. */
function foldedAlias(alias: string, sql: string): string {
  return alias === alias.toLowerCase() || sql.includes(`"${alias}"`) ? alias : alias.toLowerCase();
}

/** Each select-list item of the statement (and its subqueries) → the name PostgreSQL gives its column. */
export function pgColumnNames(ast: unknown, sql: string): Map<Node, string> {
  const out = new Map<Node, string>();
  forEachNode(ast, (n) => {
    if (n.type !== 'SELECT_NODE') return;
    for (const item of (n.select_list as Node[] | undefined) ?? []) {
      if (item.class === 'STAR' || item.class === 'COLUMNS') continue;
      // A name written (an alias, a column) is folded as PostgreSQL folds it; a figured one is as figured.
      const written = item.alias ? String(item.alias) : item.class === 'COLUMN_REF' ? (item.column_names as string[]).at(-1)! : undefined;
      out.set(item, written ? foldedAlias(written, sql) : figure(item)[0]);
    }
  });
  return out;
}

/** Names the items as figured (after the rewrite, which may have replaced an item's contents); reports a change. */
export function applyColumnNames(names: Map<Node, string>): boolean {
  let changed = false;
  for (const [item, name] of names) {
    if (item.alias === name) continue;
    // A column reference already gives its column's name; only a case change needs the alias.
    if (!item.alias && item.class === 'COLUMN_REF' && (item.column_names as string[]).at(-1) === name) continue;
    item.alias = name;
    changed = true;
  }
  return changed;
}

/** Between a catalog answer's column name and its PostgreSQL type in the statement as it runs (catalogDb.ts). */
export const TYPE_TAG = '\u0001';

/** The select node whose items are the statement's columns (the left-most of a UNION). */
function answerNode(ast: unknown): Node | undefined {
  let n = ((ast as Node | undefined)?.statements as Node[] | undefined)?.[0]?.node as Node | undefined;
  while (n?.type === 'SET_OPERATION_NODE') n = n.left as Node | undefined;
  return n?.type === 'SELECT_NODE' ? n : undefined;
}

/** The derived tables (`FROM (SELECT …) alias`, also joined) of a select node, by alias in lower case. */
function derivedTables(scope: Node): Map<string, Node> {
  const out = new Map<string, Node>();
  const visit = (from: Node | undefined) => {
    if (from?.type === 'JOIN') {
      visit(from.left as Node);
      visit(from.right as Node);
    } else if (from?.type === 'SUBQUERY' && from.alias) {
      const inner = (from.subquery as Node | undefined)?.node as Node | undefined;
      if (inner?.type === 'SELECT_NODE') out.set(String(from.alias).toLowerCase(), inner);
    }
  };
  visit(scope.from_table as Node | undefined);
  return out;
}

/** The name an item's column has as written (its alias, or the column it selects), in lower case. */
const writtenName = (item: Node) =>
  String(item.alias || (item.class === 'COLUMN_REF' ? (item.column_names as string[]).at(-1) : '')).toLowerCase();

/** A column of a derived table in `scope` that a column reference names: the item and its scope. */
function throughDerived(names: string[], scope: Node): { item: Node; scope: Node } | undefined {
  const derived = derivedTables(scope);
  const tables = names.length === 2 ? [derived.get(names[0].toLowerCase())] : names.length === 1 ? [...derived.values()] : [];
  for (const inner of tables) {
    const item = ((inner?.select_list as Node[] | undefined) ?? []).find((i) => writtenName(i) === names.at(-1)!.toLowerCase());
    if (item && inner) return { item, scope: inner };
  }
  return undefined;
}

/** PostgreSQL 15's type of a select-list expression where the catalog model knows it (pgColumnTypes.ts). */
function figureType(n: Node | undefined, scope: Node): string | undefined {
  if (!n) return undefined;
  if (n.class === 'COLUMN_REF') {
    const names = n.column_names as string[];
    // A column of a derived table is typed as what that table selects.
    const inner = throughDerived(names, scope);
    if (inner) return figureType(inner.item, inner.scope);
    const last = names.at(-1)!.toLowerCase();
    // `current_user` and the like, written without brackets, are functions.
    return CATALOG_COLUMN_TYPES.get(last) ?? (names.length === 1 ? CATALOG_FUNCTION_TYPES.get(last) : undefined);
  }
  if (n.class === 'FUNCTION' && !n.is_operator) return CATALOG_FUNCTION_TYPES.get(String(n.function_name).toLowerCase());
  if (n.class === 'CONSTANT' && (n.value as Node | undefined)?.is_null) return 'text'; // an untyped NULL is text
  if (n.class === 'SUBQUERY' && n.subquery_type === 'SCALAR') {
    const inner = (n.subquery as Node | undefined)?.node as Node | undefined;
    return inner?.type === 'SELECT_NODE' ? figureType((inner.select_list as Node[] | undefined)?.[0], inner) : undefined;
  }
  return undefined;
}

/**
 * The statement's output columns as select-list items, each with the select node it is read in: a
 * plain `*` over one derived table is that table's items. Undefined when they are not known from the
 * statement alone (`*` over a catalog relation, `* EXCLUDE`, `COLUMNS(…)`).
 */
function outputItems(node: Node): { item: Node; scope: Node }[] | undefined {
  const out: { item: Node; scope: Node }[] = [];
  for (const item of (node.select_list as Node[] | undefined) ?? []) {
    if (item.class === 'COLUMNS') return undefined;
    if (item.class !== 'STAR') {
      out.push({ item, scope: node });
      continue;
    }
    const from = node.from_table as Node | undefined;
    const inner = from?.type === 'SUBQUERY' ? ((from.subquery as Node | undefined)?.node as Node | undefined) : undefined;
    const plain = !item.relation_name && !item.columns && !(item.exclude_list as unknown[]).length && !(item.replace_list as unknown[]).length && !((item.rename_list as unknown[] | undefined) ?? []).length;
    if (!plain || inner?.type !== 'SELECT_NODE') return undefined;
    const expanded = outputItems(inner);
    if (!expanded) return undefined;
    out.push(...expanded);
  }
  return out.length ? out : undefined;
}

/**
 * The types of the statement's columns as the model knows them, by position, read from the statement
 * as written (before the rewrite renames functions). Undefined when the columns are not known from the
 * statement alone or no type is known.
 */
export function pgColumnTypes(ast: unknown): (string | undefined)[] | undefined {
  const node = answerNode(ast);
  const items = node && outputItems(node);
  const types = items?.map(({ item, scope }) => figureType(item, scope));
  return types?.some((t) => t) ? types : undefined;
}

/** The statement's columns (after the rewrite and naming) with their model types, in order. */
export function answerColumns(ast: unknown, types: (string | undefined)[] | undefined): { name: string; type?: string }[] | undefined {
  const node = answerNode(ast);
  const items = types && node ? outputItems(node) : undefined;
  if (!items || items.length !== types!.length) return undefined;
  const columns = items.map(({ item }, i) => {
    const names = item.class === 'COLUMN_REF' ? (item.column_names as string[]) : undefined;
    return { name: String(item.alias || (names ? names[names.length - 1] : '')), type: types![i] };
  });
  return columns.every((c) => c.name) ? columns : undefined;
}

/** A statement as it runs with its columns renamed to carry their types (TYPE_TAG), in order. */
export function withTypedColumns(sql: string, columns: { name: string; type?: string }[]): string {
  const quote = (s: string) => `"${s.replaceAll('"', '""')}"`;
  // Each name made unique by its position: DuckDB would rename a repeated one (`pg_get_expr_1`).
  const names = columns.map((c, i) => quote(`${c.name}${TYPE_TAG}${c.type ?? ''}${TYPE_TAG}${i}`));
  return `SELECT * FROM (${sql}\n) AS __pg_answer(${names.join(', ')})`;
}

/** A column name as it runs → its name and PostgreSQL type (TYPE_TAG). */
export function untagColumn(name: string): { name: string; type?: string } {
  const [plain, type] = name.split(TYPE_TAG);
  return type ? { name: plain, type } : { name: plain };
}
