/**
 * Worker entry points in whichever tree is running: the build in dist/ (plain JavaScript, `npm start`)
 * or the TypeScript sources under tsx or vitest (scripts, unit tests). Workers started from source must
 * load tsx themselves; workers started from the build must not pay for it.
 */
export const fromSource = import.meta.url.endsWith('.ts');

/** The module `name` (without extension) beside the module whose `import.meta.url` is `base`. */
export function entryBeside(base: string, name: string): URL {
  return new URL(`./${name}.${fromSource ? 'ts' : 'js'}`, base);
}
