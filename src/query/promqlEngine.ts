import * as fs from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import v8 from 'node:v8';

/**
 * Prometheus' PromQL engine (promql/main.go compiled to WebAssembly by scripts/build-promql.ts), loaded
 * once per query worker process, on its first PromQL job: compiling the module costs a few hundred
 * milliseconds and tens of MB, which SQL-only workers never pay.
 *
 * Go's wasm runtime talks to the host through globals (wasm_exec.js); in Node the file system it sees
 * is wasm_exec.js' stub that refuses everything, so the engine can reach no file, only what `fetch`
 * hands it.
 */

/** Where the build puts the module and Go's JavaScript support file (beside src/ and dist/). */
export const PROMQL_DIST = fileURLToPath(new URL('../../promql-dist/', import.meta.url));

type Evaluate = (request: string, fetch: (req: string) => Promise<Uint8Array>) => Promise<string>;

let loaded: Promise<Evaluate> | undefined;

async function load(): Promise<Evaluate> {
  const bytes = await fs.readFile(`${PROMQL_DIST}promql.wasm`).catch((err: NodeJS.ErrnoException) => {
    throw new Error(`the PromQL engine is not built (${err.code}): run npm run build`);
  });
  await import(new URL('wasm_exec.js', `file://${PROMQL_DIST}`).href);
  // V8 compiles the 15 MB module twice by default: Liftoff's baseline code at once, then TurboFan's in
  // the background. Liftoff alone (measured in a worker, one run each: 107 MB PSS after a query_range, not 158; its
  // first query 2.1 s, not 5.8 s, on a busy 2-core machine, and the next ones no slower) leaves the
  // second copy out. Wasm flags are read when a module is compiled, so setting it here is in time.
  v8.setFlagsFromString('--liftoff-only');
  const g = globalThis as unknown as { Go: new () => { importObject: WebAssembly.Imports; run(i: WebAssembly.Instance): Promise<void> }; __lakehousePromql?: Evaluate };
  const go = new g.Go();
  const { instance } = await WebAssembly.instantiate(bytes, go.importObject);
  // main() registers the entry point and then waits forever; run() settles only if the Go program
  // ends, which only a crash does. Its pending answers would never come: the worker process ends, and
  // the pool fails the query under way and starts a fresh worker.
  void go.run(instance).finally(() => {
    process.stderr.write('the PromQL engine stopped; the query worker exits\n');
    process.exit(1);
  });
  if (!g.__lakehousePromql) throw new Error('the PromQL engine did not start');
  return g.__lakehousePromql;
}

/** The engine's entry point: a request (JSON) and the storage callback → the API's JSON answer. */
export function promqlEngine(): Promise<Evaluate> {
  loaded ??= load();
  loaded.catch(() => (loaded = undefined));
  return loaded;
}
