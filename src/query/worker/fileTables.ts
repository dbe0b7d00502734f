/**
 * Small files' rows kept in DuckDB tables between queries (issue 37, small SQL): a query over the last
 * minutes of per-minute files spends half of DuckDB's time per Parquet file (opening it, its reader,
 * decoding its pages), and a table holding the same rows answers the console's histogram in about half
 * the time (docs/performance.md). The service says which files a view reads from which table
 * (RunJob.fileTables, built by query/sql/fileTable.ts); this makes each table hold at least those
 * files' rows. A file's rows are loaded once, tagged with its id, and stay (files are immutable: a new
 * file has a new id); a view reads only its own files' ids, so rows of files since compacted or
 * deleted are never seen. Past the budget every table is dropped and only the current job's are
 * loaded again: a bound, not an LRU, since the recent files a dashboard asks for again are few.
 */
import type { DuckDBConnection } from '@duckdb/node-api';
import type { FileTableSpec, RunJob } from './protocol.ts';

export class FileTables {
  /** Each table's loaded file ids. */
  private readonly loaded = new Map<string, Set<number>>();
  /** Estimated bytes of every table and loaded file. */
  private bytes = 0;

  /** Estimated bytes held now (for the tests and the metrics). */
  get heldBytes(): number {
    return this.bytes;
  }

  /** Makes the job's tables hold its files' rows; no native call when they all do already. */
  async sync(conn: DuckDBConnection, spec: RunJob['fileTables']): Promise<void> {
    if (!spec) return;
    const missing = spec.tables.map((t) => ({ t, files: t.files.filter((f) => !this.loaded.get(t.name)?.has(f.id)) })).filter((m) => m.files.length);
    if (!missing.length) return;
    const tableBytes = (t: FileTableSpec) => (this.loaded.has(t.name) ? 0 : t.bytes);
    const adding = missing.reduce((sum, m) => sum + tableBytes(m.t) + m.files.reduce((s, f) => s + f.bytes, 0), 0);
    if (this.bytes + adding > spec.budget && this.loaded.size) {
      await this.dropAll(conn);
      return this.sync(conn, spec);
    }
    for (const m of missing) await this.load(conn, m.t, m.files);
  }

  /** One INSERT of the files' rows (all or none: a file that cannot be read leaves the table as it was). */
  private async load(conn: DuckDBConnection, table: FileTableSpec, files: FileTableSpec['files']): Promise<void> {
    let ids = this.loaded.get(table.name);
    if (!ids) {
      await conn.run(`CREATE OR REPLACE TEMP TABLE ${table.name} (${table.columns})`);
      ids = new Set();
      this.loaded.set(table.name, ids);
      this.bytes += table.bytes;
    }
    await conn.run(`INSERT INTO ${table.name} ${files.map((f) => f.sql).join(' UNION ALL ')}`);
    for (const f of files) {
      ids.add(f.id);
      this.bytes += f.bytes;
    }
  }

  private async dropAll(conn: DuckDBConnection): Promise<void> {
    for (const name of [...this.loaded.keys()]) {
      this.loaded.delete(name);
      await conn.run(`DROP TABLE IF EXISTS ${name}`);
    }
    this.bytes = 0;
  }
}
