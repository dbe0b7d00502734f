/**
 * Builds the service (src/) into dist/ as plain JavaScript, one file per source file at the same
 * depth, so every path a module derives from its own location (`../../console-dist`, the `.proto`
 * files beside the remote-write decoder, the worker entry points) holds in both trees.
 *
 * Why a build at all: running the TypeScript through tsx costs every isolate a loader-hooks thread and
 * the transpiler (measured idle: service 267 → 178 MB RSS, each query worker 114 → 95 MB, and `tsx`'s
 * own supervising process, 52 MB, is gone). Run by `prestart` (via `npm run build`) and by the test
 * suite's global setup, so `dist/` is never stale and never in git.
 *
 * esbuild transpiles; each relative `./x.ts` import is rewritten to `./x.js` and left external, as are
 * packages, so nothing is bundled together and the output mirrors the source tree.
 */
import * as esbuild from 'esbuild';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const src = path.join(root, 'src');
const out = path.join(root, 'dist');

const keepRelativeImports: esbuild.Plugin = {
  name: 'keep-relative-imports',
  setup(build) {
    build.onResolve({ filter: /^\.\.?\// }, (args) => (args.kind === 'entry-point' ? undefined : { path: args.path.replace(/\.ts$/, '.js'), external: true }));
  },
};

export async function buildService(): Promise<void> {
  const started = Date.now();
  const staging = `${out}.tmp-${process.pid}`;
  await fs.rm(staging, { recursive: true, force: true });
  try {
    const files = (await fs.readdir(src, { recursive: true })).map((f) => path.join(src, f));
    await esbuild.build({
      entryPoints: files.filter((f) => f.endsWith('.ts')),
      outbase: src,
      outdir: staging,
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      sourcemap: 'linked',
      // Packages stay imports: node resolves them from node_modules at run time.
      packages: 'external',
      plugins: [keepRelativeImports],
      logLevel: 'warning',
    });
    // Files the code reads at run time from beside itself (the Prometheus remote-write schemas).
    for (const f of files.filter((f) => f.endsWith('.proto'))) {
      await fs.mkdir(path.dirname(path.join(staging, path.relative(src, f))), { recursive: true });
      await fs.copyFile(f, path.join(staging, path.relative(src, f)));
    }
    await fs.writeFile(path.join(staging, 'package.json'), '{ "type": "module" }\n');
    // Swap in one step: a server started from dist/ never sees a half-written tree for long.
    await fs.rm(out, { recursive: true, force: true });
    await fs.rename(staging, out).catch(async (err: NodeJS.ErrnoException) => {
      // Another build of the same sources (two test runs in one checkout) put its dist/ there between
      // our two steps: it is as fresh as ours, so ours goes.
      if (err.code !== 'ENOTEMPTY' && err.code !== 'EEXIST') throw err;
      await fs.rm(staging, { recursive: true, force: true });
    });
  } catch (err) {
    await fs.rm(staging, { recursive: true, force: true });
    throw err;
  }
  console.log(`service built in ${Date.now() - started} ms → dist/`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) {
  buildService().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
