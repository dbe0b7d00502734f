/**
 * Builds the PromQL engine (promql/: Prometheus' own engine, the storage adapter and the process's
 * framed protocol) as a native program, promql-dist/promql, that each query worker starts as its child
 * (src/query/promql/engine.ts). Statically linked (no cgo), so the Docker image's Go stage builds it the
 * same way. Part of `npm run build` (so of
 * `npm start`) and of the test suite's global setup; never committed. Skipped when the output is newer
 * than every source; a rebuild after an edit takes seconds thanks to Go's module and build caches (the
 * first one downloads the Prometheus module from the Go module proxy and compiles it: about a minute).
 *
 * Go is found as `go` on PATH, else /usr/local/go/bin/go (or $GO). The build runs at a lower CPU
 * priority (nice 10) so that it does not starve a service running beside it.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const src = path.join(root, 'promql');
const out = path.join(root, 'promql-dist');

export function goBinary(): string {
  if (process.env.GO) return process.env.GO;
  try {
    execFileSync('go', ['version'], { stdio: 'ignore' });
    return 'go';
  } catch {
    if (fs.existsSync('/usr/local/go/bin/go')) return '/usr/local/go/bin/go';
  }
  throw new Error('Go is needed to build the PromQL engine (promql/): install Go 1.26 or set $GO');
}

const mtime = (f: string) => fs.statSync(f).mtimeMs;

export function buildPromql(): void {
  const binary = path.join(out, 'promql');
  // A tree with the engine built and no Go sources (the Docker image, whose Go stage built it): done.
  if (!fs.existsSync(src) && fs.existsSync(binary)) return;
  const sources = fs.readdirSync(src).filter((f) => f.endsWith('.go') || f === 'go.mod' || f === 'go.sum').map((f) => path.join(src, f));
  if (fs.existsSync(binary) && Math.max(...sources.map(mtime)) < mtime(binary)) return;
  const started = Date.now();
  const go = goBinary();
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
    buildPromql();
  } catch (err) {
    console.error((err as Error).message);
    process.exit(1);
  }
}
