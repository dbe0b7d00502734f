/**
 * Builds the PromQL engine (promql/main.go: Prometheus' own engine and the storage adapter) to
 * WebAssembly in promql-dist/, with Go's wasm_exec.js beside it. Part of `npm run build` (so of
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

function goBinary(): string {
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
  const wasm = path.join(out, 'promql.wasm');
  const support = path.join(out, 'wasm_exec.js');
  // A tree with the engine built and no Go sources (the Docker image, whose Go stage built it): done.
  if (!fs.existsSync(src) && fs.existsSync(wasm) && fs.existsSync(support)) return;
  const sources = fs.readdirSync(src).filter((f) => f.endsWith('.go') || f === 'go.mod' || f === 'go.sum').map((f) => path.join(src, f));
  if (fs.existsSync(wasm) && fs.existsSync(support) && Math.max(...sources.map(mtime)) < mtime(wasm)) return;
  const started = Date.now();
  const go = goBinary();
  fs.mkdirSync(out, { recursive: true });
  const tmp = `${wasm}.tmp-${process.pid}`;
  const env = { ...process.env, GOOS: 'js', GOARCH: 'wasm' };
  try {
    execFileSync('nice', ['-n', '10', go, 'build', '-trimpath', '-ldflags=-s -w', '-o', tmp, '.'], { cwd: src, env, stdio: ['ignore', 'inherit', 'inherit'] });
    const goroot = execFileSync(go, ['env', 'GOROOT'], { env }).toString().trim();
    const exec = [path.join(goroot, 'lib/wasm/wasm_exec.js'), path.join(goroot, 'misc/wasm/wasm_exec.js')].find((f) => fs.existsSync(f));
    if (!exec) throw new Error(`wasm_exec.js not found under ${goroot}`);
    fs.copyFileSync(exec, `${support}.tmp-${process.pid}`);
    fs.renameSync(`${support}.tmp-${process.pid}`, support);
    // Renamed last: its time is what says the build is complete.
    fs.renameSync(tmp, wasm);
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
