import type { DuckDBConnection } from '@duckdb/node-api';
import { isLosslessNumber, LosslessNumber, parse, stringify } from 'lossless-json';

/**
 * DuckDB's parse trees (json_serialize_sql) as JSON, read and written without passing a number through
 * a JavaScript double. A constant such as 9007199254740993, `18446744073709551615` (a HUGEINT's
 * `lower` half) or `1e20` (written `100000000000000000000.0`) would otherwise come back as another
 * number, or as text json_deserialize_sql refuses: wrong results or errors from a rewrite.
 *
 * A number whose text a double gives back exactly stays a plain number (tree walkers compare and count
 * with them as before); any other keeps its text (a LosslessNumber) and is written back as it was.
 */

export type Tree = Record<string, unknown>;

function parseNumber(text: string): number | LosslessNumber {
  const n = Number(text);
  return String(n) === text ? n : new LosslessNumber(text);
}

/** A parse tree from json_serialize_sql's text. */
export function parseTree<T = Tree>(json: string): T {
  return parse(json, null, parseNumber) as T;
}

/**
 * A tree as JSON for json_deserialize_sql: numbers as their original text. Source positions are left
 * out: optional to the deserialiser, and meaningless once a rewrite moved or copied nodes.
 */
export function treeJson(tree: unknown): string {
  const text = stringify(tree, (key: string, value: unknown) => (key === 'query_location' ? undefined : value));
  if (text === undefined) throw new Error('a parse tree has no JSON form');
  return text;
}

/** A deep copy of a tree (structuredClone would turn a kept number into a plain object). */
export function cloneTree<T>(tree: T): T {
  if (Array.isArray(tree)) return tree.map(cloneTree) as T;
  if (tree === null || typeof tree !== 'object' || isLosslessNumber(tree)) return tree;
  const out: Tree = {};
  for (const [k, v] of Object.entries(tree)) out[k] = cloneTree(v);
  return out as T;
}

/** Why a statement was parsed (the label of lakehouse_sql_parses_total): each one a DuckDB round trip. */
export type ParseSite = 'sandbox' | 'catalog' | 'setup';

/**
 * Told of every parse. The service sets it to its metric (executor.ts); query workers, which import
 * this module too, keep the no-op rather than load the metrics registry.
 */
let parseCounter: (site: ParseSite) => void = () => undefined;
export function countParsesWith(count: (site: ParseSite) => void): void {
  parseCounter = count;
}

/**
 * DuckDB's parse of `sql` (json_serialize_sql) as the JSON text it returns, counted: the one way code
 * parses a statement, so the counter shows how often a statement is parsed (issue 35: once is the aim).
 */
export async function serializeSql(conn: DuckDBConnection, sql: string, site: ParseSite): Promise<string> {
  parseCounter(site);
  const reader = await conn.runAndReadAll('SELECT json_serialize_sql($1::VARCHAR) AS ast', [sql]);
  return String(reader.getRowObjects()[0].ast);
}
