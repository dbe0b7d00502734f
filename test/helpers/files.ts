import * as fs from 'node:fs/promises';
import * as path from 'node:path';

/** Every file under `dir` (recursively) whose name ends with `suffix`, sorted; [] when dir is missing. */
export async function listFiles(dir: string, suffix: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string): Promise<void> => {
    for (const e of await fs.readdir(d, { withFileTypes: true }).catch(() => [])) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) await walk(p);
      else if (e.name.endsWith(suffix)) out.push(p);
    }
  };
  await walk(dir);
  return out.sort();
}

/** Polls `fn` until it returns something truthy; fails with `what` after the timeout. */
export async function until<T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
