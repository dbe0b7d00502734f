import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The layers have one direction (docs/architecture.md):
 *   doors (one folder per protocol, over doors/shared) → ingest, query → storage → leaves (model types,
 *   DuckDB helpers, domain errors, log, metrics, config).
 * This test reads every import in src/ and fails on one that goes the wrong way, and names every folder of
 * src/ so that a new one must be placed in a layer here (and in docs/architecture.md, see docs.test.ts).
 */

const SRC = path.resolve(import.meta.dirname, '../../src');
const LEAVES = new Set(['errors.ts', 'log.ts', 'metrics.ts', 'duckdb.ts', 'model.ts', 'json.ts', 'config.ts', 'settings.ts', 'failpoint.ts', 'entrypoints.ts', 'memoryBudget.ts', 'failures.ts', 'component.ts']);

function files(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : []));
}

/** Project-relative imports of a file, as paths relative to src/. */
function importsOf(file: string): string[] {
  const text = fs.readFileSync(file, 'utf8');
  const out: string[] = [];
  for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)[^'"]*?from\s+'(\.[^']+)'/g)) {
    out.push(path.relative(SRC, path.resolve(path.dirname(file), m[1])));
  }
  for (const m of text.matchAll(/import\(\s*'(\.[^']+)'\s*\)/g)) out.push(path.relative(SRC, path.resolve(path.dirname(file), m[1])));
  return out;
}

/** A module's folder: `doors/pg`, `query/sql`, `storage`, … (the first two levels under doors/ and query/). */
const folderOf = (rel: string) => {
  const parts = rel.split('/');
  if (parts.length === 1) return LEAVES.has(rel) ? 'leaf' : 'root';
  if ((parts[0] === 'doors' || parts[0] === 'query') && parts.length > 2) return `${parts[0]}/${parts[1]}`;
  return parts[0];
};
const layerOf = (rel: string) => folderOf(rel).split('/')[0];

/** Format decoders: bytes in, rows out; they know neither HTTP nor storage. */
const isDecoder = (rel: string) => /^ingest\/(otlp|prometheus|esbulk|loki|hec)\//.test(rel) || ['ingest/json/flatten.ts', 'ingest/json/jsonEvents.ts', 'ingest/compression.ts', 'ingest/sanitize.ts'].includes(rel);

const below = (...layers: string[]) => (t: string) => layers.includes(layerOf(t)) || layerOf(t) === 'leaf';

/**
 * What each folder may import (besides itself and the leaves). Every folder of src/ is named here: a new
 * folder fails the test until it is placed. Doors never import each other, only their shared contract.
 */
const ALLOWED: Record<string, (target: string) => boolean> = {
  leaf: (t) => layerOf(t) === 'leaf',
  storage: below('storage'),
  ingest: below('ingest', 'storage'),
  // Queries reach storage only through the scan seam; SQL planning and PromQL run on the worker pool.
  'query/sql': (t) => ['query/sql', 'query/worker', 'query/results', 'query/catalog'].includes(folderOf(t)) || below()(t) || t === 'storage/scan.ts',
  'query/promql': (t) => ['query/promql', 'query/sql', 'query/worker', 'query/results'].includes(folderOf(t)) || below()(t) || t === 'storage/scan.ts',
  'query/worker': (t) => ['query/worker', 'query/sql', 'query/promql', 'query/results', 'query/catalog'].includes(folderOf(t)) || below()(t) || t === 'storage/scan.ts',
  // PostgreSQL's catalog (the model and the database that answers it), run on the query workers.
  'query/catalog': (t) => ['query/catalog', 'query/sql', 'query/worker', 'query/results'].includes(folderOf(t)) || below()(t),
  // TraceQL → SQL (run by query/sql's executor); the traces' fixed columns come from their OTLP decoder.
  'query/traceql': (t) => ['query/traceql', 'query/sql'].includes(folderOf(t)) || below()(t) || t === 'ingest/otlp/traces.ts',
  // The trace query service (Jaeger, Tempo): SQL through the executor only.
  'query/traces': (t) => ['query/traces', 'query/sql'].includes(folderOf(t)) || below()(t) || t === 'storage/scan.ts',
  'query/results': (t) => folderOf(t) === 'query/results' || below()(t) || t === 'query/worker/protocol.ts',
  // Users, roles and sign-in (issue 34): a service over storage (its store uses the conditional write).
  access: below('access', 'storage'),
  'doors/shared': below('doors', 'access', 'ingest', 'query', 'storage'),
  root: () => true,
};
const DOORS = ['http', 'grpc', 'pg', 'es', 'loki', 'hec', 'iceberg', 'jaeger', 'tempo'];
/** Doors mounted under another door's listener (as sub-apps, inheriting its guards): the one door that may import them. */
const MOUNTED_UNDER: Record<string, string> = { 'doors/es': 'doors/http', 'doors/loki': 'doors/http', 'doors/hec': 'doors/http', 'doors/iceberg': 'doors/http', 'doors/jaeger': 'doors/http', 'doors/tempo': 'doors/http' };
for (const door of DOORS) {
  const own = [`doors/${door}`, 'doors/shared', ...Object.keys(MOUNTED_UNDER).filter((m) => MOUNTED_UNDER[m] === `doors/${door}`)];
  ALLOWED[`doors/${door}`] = (t) => (layerOf(t) === 'doors' ? own.includes(folderOf(t)) : t !== 'main.ts');
}

describe('layering', () => {
  const violations: string[] = [];
  for (const file of files(SRC)) {
    const rel = path.relative(SRC, file);
    const layer = folderOf(rel);
    const allowed = ALLOWED[layer];
    if (!allowed) {
      violations.push(`${rel}: folder ${layer} has no place in the layers (add it to ALLOWED)`);
      continue;
    }
    for (const target of importsOf(file)) {
      if (!allowed(target)) violations.push(`${rel} (${layer}) imports ${target}`);
      if (isDecoder(rel) && (layerOf(target) === 'doors' || layerOf(target) === 'storage')) violations.push(`${rel} (decoder) imports ${target}`);
    }
  }
  it('no module imports against the direction of the layers', () => {
    expect(violations).toEqual([]);
  });
});

/** Issue 35: no folder of 20+ modules. */
const MAX_MODULES_PER_FOLDER = 19;

describe('folders', () => {
  const counts = new Map<string, number>();
  for (const file of files(SRC)) {
    const dir = path.relative(SRC, path.dirname(file)) || '.';
    counts.set(dir, (counts.get(dir) ?? 0) + 1);
  }
  it(`no folder of src/ holds more than ${MAX_MODULES_PER_FOLDER} modules`, () => {
    expect([...counts].filter(([, n]) => n > MAX_MODULES_PER_FOLDER).map(([dir, n]) => `${dir}: ${n}`)).toEqual([]);
  });
});
