/**
 * Catalog statements of the PostgreSQL door, sent to the query workers (inWorker.ts): classifying a
 * statement, describing one, and running a catalog statement all take a query slot of the asking key
 * (the pool's admission: per-key limit, fairness reserve, queue), are checked for size and bracket
 * depth before they leave the service (checkSqlText), and are cut off at the query time limit (the
 * worker is then killed, as for a data statement). Nothing of a catalog statement runs in the
 * service's own process.
 */
import { holdToLimits } from '../worker/deadline.ts';
import { DomainError } from '../../errors.ts';
import type { PgType } from '../results/pgTypes.ts';
import { checkSqlText, type SandboxLimits } from '../sql/sandbox.ts';
import type { QueryPool } from '../worker/pool.ts';
import type { CatalogJob, FromWorker } from '../worker/protocol.ts';
import { nsColumns, type DatasetSchema, type Statement } from './catalogDb.ts';
import { countParses, type ParseSite } from '../sql/parseTree.ts';
import { pgSyntax } from './sqlText.ts';
import type { BoundParam } from '../sql/boundParams.ts';

export interface CatalogRequest {
  /** Who asks (admission control counts per key). */
  principalId: string;
  /** The datasets this key may read, with their columns: the only tables the catalog shows. */
  datasets: DatasetSchema[];
  /** A CancelRequest or the client leaving. */
  signal?: AbortSignal;
}

export interface Described {
  params: string[];
  paramTypes: PgType[];
  columns: { name: string; type: PgType }[];
}

export interface CatalogAnswer {
  fields: { name: string; type: PgType; format: number }[];
  data: Buffer;
  rows: number;
}

type WorkerAnswer = Extract<FromWorker, { type: 'catalog' | 'answer' }>;

/** Classifications remembered (clients repeat statements), per set of dataset names. */
const CLASSIFIED_MAX = 2000;
const CLASSIFIED_MAX_SQL = 16_384;

export class CatalogQueries {
  private classified = new Map<string, Statement>();
  private described = new Map<string, Described>();
  /** Catalog statements as classifications returned them, checked as they will run (no parse to run). */
  private checked = new Set<string>();

  /**
   * `parse`: the service's parse of a statement text (executor.ts `parsePg`), sent with each job so the
   * worker parses nothing (issue 35); without it (tests) the worker parses as before.
   */
  constructor(
    private readonly pool: QueryPool,
    private readonly limits: SandboxLimits & { timeoutMs: number; maxRows: number },
    private readonly parse?: (sql: string) => Promise<string>,
  ) {}

  /** Catalog, data (or session: not asked here), and the statement rewritten as it will run. */
  async classify(req: CatalogRequest, sql: string): Promise<Statement> {
    // A classification depends on the dataset names and their nanosecond columns (catalogDb.ts).
    const key = `${req.datasets.map((d) => d.name).join('\n')}\u0000${[...nsColumns(req.datasets)].join(',')}\u0000${sql}`;
    const known = this.classified.get(key);
    if (known) return known;
    const m = await this.job(req, { op: 'classify', sql, tree: await this.parse?.(pgSyntax(sql)) });
    if (m.type !== 'catalog' || !m.statement) throw new DomainError('storage', 'the query worker gave no classification');
    // Bounded: a client sending ever new statements (literals inlined) must not grow it.
    if (this.classified.size >= CLASSIFIED_MAX) this.classified.delete(this.classified.keys().next().value!);
    if (sql.length <= CLASSIFIED_MAX_SQL) this.classified.set(key, m.statement);
    if (m.statement.checked) {
      if (this.checked.size >= CLASSIFIED_MAX) this.checked.delete(this.checked.values().next().value!);
      this.checked.add(m.statement.sql);
    }
    return m.statement;
  }

  /**
   * A statement's parameter and column types, from preparing it in the worker (nothing runs).
   * Remembered like classifications: a client re-sending an unnamed statement (node-postgres sends
   * Parse before every Bind) would otherwise cost DuckDB's prepare, in a worker, each time.
   */
  async describe(req: CatalogRequest, sql: string): Promise<Described> {
    // A description depends on the datasets' columns and their types.
    const key = `${JSON.stringify(req.datasets)}\u0000${sql}`;
    const known = this.described.get(key);
    if (known) return known;
    const m = await this.job(req, { op: 'describe', sql, tree: await this.parse?.(pgSyntax(sql)) });
    if (m.type !== 'catalog' || !m.described) throw new DomainError('storage', 'the query worker gave no description');
    if (this.described.size >= CLASSIFIED_MAX) this.described.delete(this.described.keys().next().value!);
    if (sql.length <= CLASSIFIED_MAX_SQL) this.described.set(key, m.described);
    return m.described;
  }

  /**
   * Runs a catalog statement; its (small, at most P_QUERY_MAX_ROWS rows) answer comes whole. `params`:
   * a Bind's values, bound by DuckDB to the statement's placeholders (the template, never a text per value).
   */
  async run(req: CatalogRequest, sql: string, formats: number[], params?: BoundParam[]): Promise<CatalogAnswer> {
    // A statement a classification checked as it runs needs no tree; any other is checked from one.
    const checked = this.checked.has(sql);
    const m = await this.job(req, { op: 'run', sql, pgFormats: formats, ...(params ? { params } : {}), ...(checked ? { checked } : { tree: await this.parse?.(sql) }) });
    if (m.type !== 'answer' || !m.pgTypes || !m.data) throw new DomainError('storage', `unexpected message from the query worker: ${m.type}`);
    const format = (i: number) => (formats.length === 0 ? 0 : formats.length === 1 ? formats[0] : (formats[i] ?? 0));
    const types = m.pgTypes;
    return {
      fields: m.fields.map((name, i) => ({ name, type: types[i], format: format(i) })),
      data: Buffer.from(m.data.buffer, m.data.byteOffset, m.data.byteLength),
      rows: m.rows,
    };
  }

  /** One job on a worker under the key's admission and the time limit: its one answer message. */
  private async job(req: CatalogRequest, op: Pick<CatalogJob, 'op' | 'sql' | 'pgFormats' | 'tree' | 'checked' | 'params'>): Promise<WorkerAnswer> {
    checkSqlText(op.sql, this.limits);
    const datasets = req.datasets.map((d) => ({ name: d.name, schema: d.schema as Record<string, string> }));
    const exec = await this.pool.run(req.principalId, () => ({ type: 'catalog', ...op, datasets, maxRows: this.limits.maxRows, maxDepth: this.limits.maxDepth }));
    // As for data statements, waiting for a slot (and a worker's start) is bounded on its own, not counted.
    const release = holdToLimits(exec, {
      timeoutMs: this.limits.timeoutMs,
      timeoutMessage: `the catalog statement exceeded the time limit of ${this.limits.timeoutMs} ms (P_QUERY_TIMEOUT)`,
      signal: req.signal,
      cancelled: new DomainError('cancelled', 'canceling statement due to user request'),
    });
    try {
      for await (const m of exec.events) {
        // The worker's own parses (parseTree.ts ParseSite) join the service's count.
        if (m.type === 'error' || m.type === 'catalog' || m.type === 'answer') {
          for (const [site, n] of Object.entries(m.parses ?? {})) countParses(site as ParseSite, n);
        }
        if (m.type === 'error') throw new DomainError(m.kind, m.message);
        if (m.type === 'catalog' || m.type === 'answer') return m;
      }
      throw new DomainError('unavailable', 'the query worker ended without an answer', 1);
    } finally {
      release();
    }
  }
}
