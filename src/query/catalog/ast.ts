/** A node of DuckDB's parsed statement (`json_serialize_sql`): a JSON object. */
export type Node = Record<string, unknown>;

/**
 * Calls `fn` on every object node of a parsed statement, parents before children. `fn` may replace a
 * child of the node it is given: the walk descends into what is there after `fn` returns.
 */
export function forEachNode(value: unknown, fn: (n: Node) => void): void {
  if (Array.isArray(value)) {
    for (const v of value) forEachNode(v, fn);
    return;
  }
  if (value === null || typeof value !== 'object') return;
  const n = value as Node;
  fn(n);
  for (const v of Object.values(n)) forEachNode(v, fn);
}
