import { accessSync, constants } from 'node:fs';
import * as path from 'node:path';

/**
 * The path of a tool a system test needs (`override` first, then the PATH, then /usr/bin), or an error
 * that says how to get it: `bash scripts/test-setup.sh`, which `npm test` runs first. Tests never install
 * anything themselves, and never skip for a missing tool.
 */
export function findBinary(name: string, override?: string): string {
  const dirs = (process.env.PATH ?? '').split(path.delimiter).filter(Boolean);
  for (const candidate of [override, ...dirs.map((d) => path.join(d, name)), `/usr/bin/${name}`]) {
    if (!candidate) continue;
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      /* not there */
    }
  }
  throw new Error(`${name} is not installed: run \`bash scripts/test-setup.sh\` (npm test runs it first; it installs ${name} with apt-get)`);
}
