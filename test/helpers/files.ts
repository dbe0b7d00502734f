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
