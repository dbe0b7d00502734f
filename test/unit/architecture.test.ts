import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * docs/architecture.md is the page that says "start here": its module map must name every folder of code
 * in src/ (any folder holding a .ts module) and the top-level folders of other code (the Go engine, the
 * console, scripts, bench). A folder added without a line there fails this test.
 */
const ROOT = path.resolve(import.meta.dirname, '../..');
const page = fs.readFileSync(path.join(ROOT, 'docs/architecture.md'), 'utf8');

function codeFolders(dir: string): string[] {
  const entries = fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true });
  const here = entries.some((e) => e.isFile() && e.name.endsWith('.ts')) ? [dir] : [];
  return [...here, ...entries.filter((e) => e.isDirectory()).flatMap((e) => codeFolders(`${dir}/${e.name}`))];
}

describe('docs/architecture.md', () => {
  const folders = [...codeFolders('src').filter((f) => f !== 'src'), 'promql', 'console', 'scripts', 'bench', 'test/unit', 'test/helpers'];
  it.each(folders)('names %s/', (folder) => {
    // A line of the module map starts with the folder's path.
    expect(page.split('\n').some((line) => line.startsWith(`${folder}/ `))).toBe(true);
  });
});
