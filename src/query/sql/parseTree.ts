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

/**
 * Why a statement was parsed (the label of lakehouse_sql_parses_total). Service: `sandbox` (an HTTP
 * statement checked and planned), `pg` (a PostgreSQL statement, whose one tree the worker classifies and
 * the sandbox plans), `setup` (the dialect's macros, once). Query workers, reported back with their
 * answers: `catalog` (a PostgreSQL statement parsed in the catalog database: a session command DuckDB
 * serialises no tree of, a Describe, a catalog statement's checks before it runs), `prepare` (DuckDB's
 * prepare of a catalog statement it describes or runs). `execute`: DuckDB parsing the text a query
 * worker runs (one per data statement, counted as the service hands it over).
 */
export type ParseSite = 'sandbox' | 'pg' | 'catalog' | 'prepare' | 'execute' | 'setup';

/**
 * Told of every parse. The service sets it to its metric (executor.ts); a query worker to a tally it
 * sends back with a catalog job's answer (catalog/inWorker.ts), so the service's metric counts both.
 */
type ParseCounter = (site: ParseSite, n?: number) => void;
let parseCounter: ParseCounter = () => undefined;
/** Sets the counter; returns the one it replaces (a catalog job run in process puts it back). */
export function countParsesWith(count: ParseCounter): ParseCounter {
  const previous = parseCounter;
  parseCounter = count;
  return previous;
}

/** Counts parses done elsewhere: by DuckDB's own prepare, or reported by a query worker. */
export function countParses(site: ParseSite, n = 1): void {
  if (n > 0) parseCounter(site, n);
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
