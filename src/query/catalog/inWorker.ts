/**
 * The worker's side of catalog jobs: one catalog database per worker process (opened on the first
 * catalog job), its tables made those of the job's datasets before each statement. The process's
 * memory cap, the service's time limit (which kills the process) and the query slot the job holds
 * bound it as they bound a data statement.
 */
import { DomainError } from '../../errors.ts';
import type { FromWorker, CatalogJob, ParseTally } from '../worker/protocol.ts';
import { countParsesWith } from '../sql/parseTree.ts';
import { CatalogDb, type DatasetSchema } from './catalogDb.ts';
import type { ColumnType } from '../../model.ts';

let current: { datasets: DatasetSchema[]; maxRows: number; maxDepth: number } = { datasets: [], maxRows: 0, maxDepth: 0 };
let db: Promise<CatalogDb> | undefined;

function catalogDb(): Promise<CatalogDb> {
  db ??= CatalogDb.open(() => current.datasets, {
    // A soft stop before the service's (which ends the process): DuckDB's interrupt.
    timeoutMs: 10 * 60_000,
    get maxRows() {
      return current.maxRows;
    },
    get maxDepth() {
      return current.maxDepth;
    },
  });
  db.catch(() => (db = undefined));
  return db;
}

/** This job's parses, sent back with its answer: the service's lakehouse_sql_parses_total counts them. */
let tally: ParseTally = {};
const addToTally = (site: keyof ParseTally, n = 1) => void (tally[site] = (tally[site] ?? 0) + n);

/** Runs one catalog job and sends its one answer (or error), with the parses it made. */
export async function runCatalog(job: CatalogJob, reply: (m: FromWorker) => void): Promise<void> {
  tally = {};
  // Set per job, not at load: another module of the worker (sql/executor.ts) may set the service's
  // counter; put back after (a test runs catalog jobs in the service's process).
  const previous = countParsesWith(addToTally);
  const send = (m: Extract<FromWorker, { type: 'catalog' | 'answer' | 'error' }>) => reply({ ...m, parses: { ...tally } });
  current = { datasets: job.datasets.map((d) => ({ name: d.name, schema: d.schema as Record<string, ColumnType> })), maxRows: job.maxRows, maxDepth: job.maxDepth };
  try {
    const catalog = await catalogDb();
    if (job.op === 'classify') send({ type: 'catalog', id: job.id, statement: await catalog.classify(job.sql, job.tree) });
    else if (job.op === 'describe') send({ type: 'catalog', id: job.id, described: await catalog.describe(job.sql, job.tree) });
    else {
      const formats = job.pgFormats ?? [];
      const answer = await catalog.run(job.sql, formats, job.tree, job.checked, job.params);
      const parts: Buffer[] = [];
      let rows = 0;
      for (let b = await answer.next(); b; b = await answer.next()) {
        parts.push(b.data);
        rows += b.rows;
      }
      const fields = answer.fields;
      send({ type: 'answer', id: job.id, fields: fields.map((f) => f.name), types: [], text: '', rows, pgTypes: fields.map((f) => f.type), data: Buffer.concat(parts) });
    }
  } catch (err) {
    const e = err instanceof DomainError ? err : new DomainError('invalid', (err as Error).message);
    send({ type: 'error', id: job.id, kind: e.kind, message: e.message });
  } finally {
    countParsesWith(previous);
  }
}
