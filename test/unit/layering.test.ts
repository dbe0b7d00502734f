import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The layers have one direction (README "Project layout"):
 *   http → ingest, query → storage → leaves (model types, DuckDB helpers, domain errors, log, metrics, config).
 * This test reads every import in src/ and fails on one that goes the wrong way.
 */

const SRC = path.resolve(import.meta.dirname, '../../src');
const LEAVES = new Set(['errors.ts', 'log.ts', 'metrics.ts', 'duckdb.ts', 'model.ts', 'json.ts', 'config.ts', 'failpoint.ts', 'entrypoints.ts', 'memoryBudget.ts', 'failures.ts']);

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

const layerOf = (rel: string) => (rel.includes('/') ? rel.split('/')[0] : LEAVES.has(rel) ? 'leaf' : 'root');

/** Format decoders: bytes in, rows out; they know neither HTTP nor storage. */
const isDecoder = (rel: string) => /^ingest\/(otlp|prometheus)\//.test(rel) || ['ingest/flatten.ts', 'ingest/jsonEvents.ts', 'ingest/compression.ts', 'ingest/sanitize.ts'].includes(rel);

/** What each layer may import (besides itself and the leaves). */
const ALLOWED: Record<string, (target: string) => boolean> = {
  leaf: (t) => layerOf(t) === 'leaf',
  storage: (t) => layerOf(t) === 'storage' || layerOf(t) === 'leaf',
  ingest: (t) => ['ingest', 'storage', 'leaf'].includes(layerOf(t)),
  // Queries reach storage only through the scan seam.
  query: (t) => ['query', 'leaf'].includes(layerOf(t)) || t === 'storage/scan.ts',
  http: (t) => t !== 'main.ts',
  root: () => true,
};

describe('layering', () => {
  const violations: string[] = [];
  for (const file of files(SRC)) {
    const rel = path.relative(SRC, file);
    const layer = layerOf(rel);
    for (const target of importsOf(file)) {
      if (!ALLOWED[layer](target)) violations.push(`${rel} (${layer}) imports ${target}`);
      if (isDecoder(rel) && (layerOf(target) === 'http' || layerOf(target) === 'storage')) violations.push(`${rel} (decoder) imports ${target}`);
    }
  }
  it('no module imports against the direction of the layers', () => {
    expect(violations).toEqual([]);
  });
});
