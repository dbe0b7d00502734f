/**
 * Builds the web console (console/) into console-dist/ with esbuild: one JS and one CSS bundle with
 * content hashes in their names (served as immutable), pre-gzipped copies, and index.html naming them
 * (served with no-cache). Run by `prestart` and `pretest`, so a fresh clone needs no built files in git.
 */
import * as esbuild from 'esbuild';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { gzipSync } from 'node:zlib';

const root = path.resolve(import.meta.dirname, '..');
const src = path.join(root, 'console');
const out = path.join(root, 'console-dist');
const staging = `${out}.tmp-${process.pid}`;

async function build(): Promise<void> {
  const started = Date.now();
  await fs.rm(staging, { recursive: true, force: true });
  const result = await esbuild.build({
    entryPoints: { app: path.join(src, 'src/main.tsx') },
    bundle: true,
    minify: process.env.CONSOLE_MINIFY !== '0',
    sourcemap: 'linked',
    format: 'esm',
    target: ['es2022', 'chrome110', 'firefox115', 'safari16'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    outdir: path.join(staging, 'assets'),
    entryNames: '[name]-[hash]',
    assetNames: '[name]-[hash]',
    legalComments: 'linked',
    metafile: true,
    logLevel: 'warning',
  });
  const outputs = Object.keys(result.metafile.outputs).map((f) => path.resolve(root, f));
  const js = outputs.find((f) => f.endsWith('.js'));
  const css = outputs.find((f) => f.endsWith('.css'));
  if (!js || !css) throw new Error(`esbuild produced no JS or CSS bundle: ${outputs.join(', ')}`);

  // The favicon gets a content hash like the bundles, so it can be cached forever too.
  const icon = await fs.readFile(path.join(src, 'favicon.svg'));
  const iconName = `favicon-${createHash('sha256').update(icon).digest('hex').slice(0, 8)}.svg`;
  await fs.writeFile(path.join(staging, 'assets', iconName), icon);

  const template = await fs.readFile(path.join(src, 'index.html'), 'utf8');
  const html = template
    .replace('%ICON%', `/assets/${iconName}`)
    .replace('%CSS%', `/assets/${path.basename(css)}`)
    .replace('%JS%', `/assets/${path.basename(js)}`);
  await fs.writeFile(path.join(staging, 'index.html'), html);

  // Pre-compressed copies: the server sends them to clients that accept gzip.
  for (const name of await fs.readdir(path.join(staging, 'assets'))) {
    if (!/\.(js|css|svg|map|txt)$/.test(name)) continue;
    const file = path.join(staging, 'assets', name);
    await fs.writeFile(`${file}.gz`, gzipSync(await fs.readFile(file), { level: 9 }));
  }

  // Swap in one step so a running server never sees a half-written folder for long.
  await fs.rm(out, { recursive: true, force: true });
  await fs.rename(staging, out);
  const size = (await fs.stat(path.join(out, 'assets', path.basename(js)))).size;
  console.log(`console built in ${Date.now() - started} ms → console-dist/ (app ${Math.round(size / 1024)} KiB)`);
}

build().catch(async (err: unknown) => {
  await fs.rm(staging, { recursive: true, force: true });
  console.error(err);
  process.exit(1);
});
