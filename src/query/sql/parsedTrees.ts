/**
 * Parse trees the service made of PostgreSQL statements (executor.ts `parsePg`), kept by statement
 * text so that the one parse serves every step: the worker's classification, a Describe, the catalog
 * checks before a catalog statement runs, and the sandbox's plan of a data statement. Only trees the
 * service's own parser produced from exactly that text are kept here, so the sandbox may plan from one.
 * Bounded in bytes, least recently used out first (a client inlining literals sends ever new texts).
 */
export class ParsedTrees {
  private entries = new Map<string, string>();
  private bytes = 0;

  constructor(private readonly maxBytes: number) {}

  get(sql: string): string | undefined {
    const tree = this.entries.get(sql);
    if (tree !== undefined) {
      this.entries.delete(sql);
      this.entries.set(sql, tree);
    }
    return tree;
  }

  set(sql: string, tree: string): void {
    const cost = 2 * (sql.length + tree.length) + 64;
    if (cost > this.maxBytes / 8 || this.entries.has(sql)) return;
    this.entries.set(sql, tree);
    this.bytes += cost;
    for (const [key, old] of this.entries) {
      if (this.bytes <= this.maxBytes) break;
      this.entries.delete(key);
      this.bytes -= 2 * (key.length + old.length) + 64;
    }
  }
}
