/**
 * A map bounded in bytes (by the cost its owner gives each entry), least recently used out first; an
 * entry over an eighth of the bound is not kept (one statement must not empty the cache). The plan
 * cache (sandbox.ts) and the parse trees below are both this.
 */
export class BytesLru<V> {
  private entries = new Map<string, V>();
  private bytes = 0;

  constructor(
    private readonly maxBytes: number,
    private readonly cost: (key: string, value: V) => number,
  ) {}

  get(key: string): V | undefined {
    const value = this.entries.get(key);
    if (value !== undefined) {
      this.entries.delete(key);
      this.entries.set(key, value);
    }
    return value;
  }

  set(key: string, value: V): void {
    const cost = this.cost(key, value);
    if (cost > this.maxBytes / 8 || this.entries.has(key)) return;
    this.entries.set(key, value);
    this.bytes += cost;
    for (const [k, old] of this.entries) {
      if (this.bytes <= this.maxBytes) break;
      this.entries.delete(k);
      this.bytes -= this.cost(k, old);
    }
  }

  get size(): { entries: number; bytes: number } {
    return { entries: this.entries.size, bytes: this.bytes };
  }
}

/**
 * Parse trees the service made of PostgreSQL statements (executor.ts `parsePg`), kept by statement
 * text so that the one parse serves every step: the worker's classification, a Describe, the catalog
 * checks before a catalog statement runs, and the sandbox's plan of a data statement. Only trees the
 * service's own parser produced from exactly that text are kept here, so the sandbox may plan from one.
 * Bounded in bytes (a client inlining literals sends ever new texts).
 */
export class ParsedTrees extends BytesLru<string> {
  constructor(maxBytes: number) {
    super(maxBytes, (sql, tree) => 2 * (sql.length + tree.length) + 64);
  }
}
