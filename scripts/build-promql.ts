/**
 * Builds the PromQL engine (promql/: Prometheus' own engine, the storage adapter and the process's
 * framed protocol) as a native program, promql-dist/promql, that each query worker starts as its child
 * (src/query/promql/engine.ts). Statically linked (no cgo), so the Docker image's Go stage builds it the
 * same way. Part of `npm run build` (so of
 * `npm start`) and of the test suite's global setup; never committed. Skipped when the output is newer
 * than every source; a rebuild after an edit takes seconds thanks to Go's module and build caches (the
 * first one downloads the Prometheus module from the Go module proxy and compiles it: about a minute).
 *
 * Go is found as $GO, else `go` on PATH, else /usr/local/go/bin/go. The build runs at a lower CPU
 * priority (nice 10) so that it does not starve a service running beside it.
 *
 * Go is optional for the service: without it (`--optional`, as `npm run build` and so `npm start` run
 * this) the build says so in one line and the service starts without PromQL, whose endpoints then
 * answer 503 saying how to add it. The test suite's global setup requires it.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const src = path.join(root, 'promql');
const out = path.join(root, 'promql-dist');

/** The Go to build with, or undefined when there is none ($GO, when set, is the only one tried). */
export function goBinary(): string | undefined {
  const candidates = process.env.GO ? [process.env.GO] : ['go', '/usr/local/go/bin/go'];
  for (const go of candidates) {
    try {
      execFileSync(go, ['version'], { stdio: 'ignore' });
      return go;
    } catch {
      /* not this one */
    }
  }
  return undefined;
}

export const NO_GO =
  'Go not found ($GO, go on PATH, /usr/local/go/bin/go): the service runs without PromQL (its endpoints answer 503); install Go 1.26+ and run `npm run build:promql` to add it';

const mtime = (f: string) => fs.statSync(f).mtimeMs;

/** Builds the engine when it is missing or stale; without Go, throws unless `optional` (then says so and returns). */
export function buildPromql({ optional = false } = {}): void {
  const binary = path.join(out, 'promql');
  // A tree with the engine built and no Go sources (the Docker image, whose Go stage built it): done.
  if (!fs.existsSync(src) && fs.existsSync(binary)) return;
  const sources = fs.readdirSync(src).filter((f) => f.endsWith('.go') || f === 'go.mod' || f === 'go.sum').map((f) => path.join(src, f));
  if (fs.existsSync(binary) && Math.max(...sources.map(mtime)) < mtime(binary)) return;
  const started = Date.now();
  const go = goBinary();
  if (!go) {
    if (!optional) throw new Error(NO_GO);
    console.log(NO_GO);
    return;
  }
  // The first build downloads Prometheus' module and compiles it: a minute or more with nothing to show.
  if (!fs.existsSync(binary)) console.log(`building the PromQL engine with ${go} (first build: downloads and compiles Prometheus' engine, a minute or two)…`);
  fs.mkdirSync(out, { recursive: true });
  const tmp = `${binary}.tmp-${process.pid}`;
  const env = { ...process.env, CGO_ENABLED: '0' };
  try {
    execFileSync('nice', ['-n', '10', go, 'build', '-trimpath', '-ldflags=-s -w', '-o', tmp, '.'], { cwd: src, env, stdio: ['ignore', 'inherit', 'inherit'] });
    // Renamed when complete: its time is what says the build is current.
    fs.renameSync(tmp, binary);
    // The WebAssembly build the engine had before (promql.wasm, wasm_exec.js) is no longer used.
    for (const old of ['promql.wasm', 'wasm_exec.js']) fs.rmSync(path.join(out, old), { force: true });
  } finally {
    fs.rmSync(tmp, { force: true });
  }
  console.log(`PromQL engine built in ${Date.now() - started} ms → promql-dist/`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) {
  try {
    buildPromql({ optional: process.argv.includes('--optional') });
  } catch (err) {
    console.error((err as Error).message);
    process.exit(1);
  }
}
