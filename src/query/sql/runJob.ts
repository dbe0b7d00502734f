import { createHash } from 'node:crypto';
import * as path from 'node:path';
import { quotedIdentifier } from '@duckdb/node-api';
import { TIME_COLUMN } from '../../model.ts';
import { queriesPreAggregated } from '../../metrics.ts';
import { scanSql, timestampLiteral, type Snapshot } from '../../storage/scan.ts';
import { RANGE_VARIABLES, type FileTableSpec, type RunJob } from '../worker/protocol.ts';
import { fileTableFor } from './fileTable.ts';
import { preAggregationPays } from './preAggregate.ts';
import { asciiLower } from './macroCost.ts';
import type { QueryRequest } from './queries.ts';

/*
 * A statement's job for a query worker (executor.ts sends it): the links to its files by stable names,
 * its datasets' views over them, and the statement as run (pre-aggregated when that pays).
 */

/** Link names by file path: a hash per file per query was most of the cost of a job over many files. */
const linkNames = new Map<string, string>();

/** A file's link name in a worker's directory: the same for every query, so DuckDB's footer cache hits. */
export function linkName(file: string): string {
  let name = linkNames.get(file);
  if (name === undefined) {
    name = `${createHash('sha1').update(file).digest('hex').slice(0, 24)}${path.extname(file)}`;
    // Paths of files long gone would otherwise pile up; starting over costs one hash per file.
    if (linkNames.size >= 100_000) linkNames.clear();
    linkNames.set(file, name);
  }
  return name;
}

/** A view's range bounds: the worker's variables (see RunJob.range). */
const RANGE_BOUNDS = { start: `getvariable('${RANGE_VARIABLES.start}')`, end: `getvariable('${RANGE_VARIABLES.end}')` };

/**
 * The worker's job: the snapshots' files as links in its directory, a view per dataset over them, and the
 * statement. `materialize`: the PostgreSQL door streams too, but a result the parse tree bounds is run
 * whole there as well.
 */
export function runJob(
  req: QueryRequest,
  snapshots: Snapshot[],
  sql: string,
  filesDir: string,
  o: { maxRows: number; maxBytes: number; fileTableBytes?: number; materialize: boolean; wholeUpTo?: number; pgFormats?: number[] },
): Omit<RunJob, 'id'> {
  const links = new Map<string, string>();
  const pathFor = (file: string) => {
    const name = linkName(file);
    links.set(name, file);
    return `${filesDir}/${name}`;
  };
  // The range by variables, not literals: the worker keeps a dataset's view while its files straddle
  // the same bounds ("the last 15 minutes" asked again), instead of creating and binding it anew.
  // Small files' rows come from a table the worker keeps (fileTable.ts), when they fit its budget.
  const tables: FileTableSpec[] = [];
  let room = (o.fileTableBytes ?? 0) / 2;
  const views = snapshots.map((snap) => {
    const inTable = fileTableFor(snap, pathFor, room);
    if (inTable) {
      tables.push(inTable.spec);
      room -= inTable.spec.bytes + inTable.spec.files.reduce((sum, f) => sum + f.bytes, 0);
    }
    return { name: quotedIdentifier(snap.meta.name), sql: scanSql(snap, req.startMs, req.endMs, pathFor, RANGE_BOUNDS, inTable?.table) };
  });
  return {
    type: 'run',
    links: [...links].map(([name, src]) => ({ name, src })),
    views,
    range: { start: timestampLiteral(req.startMs), end: timestampLiteral(req.endMs) },
    sql,
    sendNull: req.sendNull,
    timeFormat: req.timeFormat,
    maxRows: o.maxRows,
    maxBytes: o.maxBytes,
    streaming: req.streaming,
    materialize: o.materialize,
    ...(o.wholeUpTo === undefined ? {} : { wholeUpTo: o.wholeUpTo }),
    ...(o.pgFormats ? { pgFormats: o.pgFormats } : {}),
    ...(req.params ? { params: req.params } : {}),
    ...(tables.length ? { fileTables: { budget: o.fileTableBytes ?? 0, tables } } : {}),
  };
}

/**
 * The statement pre-aggregated by receive time (preAggregate.ts) when these files prove it pays: the same
 * rows, with its grouping expressions evaluated once per receive time instead of per row.
 */
export function preAggregatedSql(pre: { sql: string; names: string[] } | undefined, snapshots: Snapshot[]): string | undefined {
  const only = snapshots.length === 1 ? snapshots[0] : undefined;
  if (!pre || !only || only.meta.timeColumn !== TIME_COLUMN.json) return undefined;
  const columns = pre.names.length ? new Set(Object.keys(only.schema).map(asciiLower)) : undefined;
  if (pre.names.some((n) => columns?.has(n)) || !preAggregationPays(only.files, only.segments)) return undefined;
  queriesPreAggregated.inc();
  return pre.sql;
}
