import { spawn } from 'node:child_process';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { ANY_PORT, startServer, tempDir, type TestServer } from './helpers/server.ts';

/**
 * Every ```sh block of README.md and docs/*.md runs, in file order, one bash per file with `set -e`,
 * against a freshly started service, as a reader would paste them: `localhost:8000` (and the gRPC and
 * PostgreSQL doors' default ports) point at the test's server, `$KEY` holds the admin key the service
 * generated (read from `data/api-key`, as the README tells the reader to), and the working directory holds
 * `docs/` and `node_modules` of this checkout (examples use docs/examples/). A block preceded by the line
 * `<!-- norun -->` is skipped (docker compose, a Collector or Grafana on the reader's machine).
 *
 * curl is wrapped so that an example answering an HTTP error (4xx/5xx) fails the file: an example
 * that shows an error on purpose says so with `|| …`. DOCS_VERBOSE=1 prints every answer.
 */

const root = path.resolve(import.meta.dirname, '..');

export interface ShellBlock {
  line: number;
  code: string;
}

/** The ```sh blocks of a Markdown text, with the line each starts on; `<!-- norun -->` before one skips it. */
export function shellBlocks(markdown: string): ShellBlock[] {
  const lines = markdown.split('\n');
  const blocks: ShellBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```(\S*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const indent = open[1]!;
    let end = i + 1;
    while (end < lines.length && !/^\s*```\s*$/.test(lines[end]!)) end++;
    let prev = i - 1;
    while (prev >= 0 && lines[prev]!.trim() === '') prev--;
    const skipped = prev >= 0 && lines[prev]!.trim() === '<!-- norun -->';
    if (open[2] === 'sh' && !skipped) {
      const code = lines
        .slice(i + 1, end)
        .map((l) => (l.startsWith(indent) ? l.slice(indent.length) : l))
        .join('\n');
      blocks.push({ line: i + 1, code });
    }
    i = end;
  }
  return blocks;
}

const docFiles = async (): Promise<string[]> => {
  const docs = (await fs.readdir(path.join(root, 'docs'))).filter((f) => f.endsWith('.md')).sort();
  return ['README.md', ...docs.map((f) => `docs/${f}`)];
};

function runBash(script: string, cwd: string, env: Record<string, string>): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['-c', script], { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => (output += d.toString()));
    child.stderr.on('data', (d) => (output += d.toString()));
    child.on('close', (code) => resolve({ code: code ?? 1, output }));
  });
}

const files = await docFiles();
const servers: TestServer[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.kill()));
});

describe('the shell examples of README.md and docs/ run as pasted', () => {
  test('blocks are found, and a norun marker skips one', () => {
    const md = ['text', '```sh', 'echo one', '```', '<!-- norun -->', '', '```sh', 'docker compose up', '```', '```yaml', 'a: 1', '```', '  ```sh', '  echo two', '  ```'].join('\n');
    expect(shellBlocks(md)).toEqual([
      { line: 2, code: 'echo one' },
      { line: 13, code: 'echo two' },
    ]);
  });

  for (const file of files) {
    test(file, async () => {
      const blocks = shellBlocks(await fs.readFile(path.join(root, file), 'utf8'));
      if (blocks.length === 0) return;
      // No P_API_KEYS: the service generates the admin key and keeps it in data/api-key, as for a reader.
      // The gRPC and PostgreSQL doors on any free port, which the service reports.
      const server = await startServer({ env: { P_API_KEYS: '', P_OTLP_GRPC_ADDR: ANY_PORT, P_PG_ADDR: ANY_PORT } });
      const { grpcPort, pgPort } = server;
      servers.push(server);
      const cwd = await tempDir('lakehouse-docs-');
      await fs.symlink(path.join(root, 'docs'), path.join(cwd, 'docs'));
      await fs.symlink(path.join(root, 'node_modules'), path.join(cwd, 'node_modules'));
      await fs.symlink(server.dataDir, path.join(cwd, 'data'));
      const host = new URL(server.url).host;
      const rewrite = (code: string) =>
        code.replaceAll('localhost:8000', host).replaceAll('localhost:4317', `127.0.0.1:${grpcPort}`).replaceAll('localhost:5432', `127.0.0.1:${pgPort}`);
      const script = [
        'set -eo pipefail',
        // An HTTP error fails the example. Not with --fail-with-body: curl refuses it beside an example's own -f.
        'curl() { local out; out=$(command curl -sS -w "\\n@@status %{http_code}" "$@") || return $?; case $out in *"@@status "*) ;; *) printf "%s\\n" "$out"; return 0;; esac; local code=${out##*@@status }; printf "%s\\n" "${out%@@status *}"; [ "$code" -lt 400 ] || { echo "HTTP $code" >&2; return 22; }; }',
        'export KEY=$(cat data/api-key)',
        'trap \'s=$?; [ $s -eq 0 ] || echo "!!! docs example failed: $BLOCK (exit $s)" >&2\' EXIT',
        ...blocks.map((b) => `BLOCK='${file}:${b.line}'\necho "### $BLOCK"\n${rewrite(b.code)}`),
      ].join('\n');
      const { code, output } = await runBash(script, cwd, {});
      // DOCS_VERBOSE=1 shows what each example answered, to check the answers the text claims.
      if (process.env.DOCS_VERBOSE) console.log(output);
      const failed = /!!! docs example failed: (\S+)/.exec(output)?.[1];
      expect(code, `${failed ? `the block at ${failed} failed` : 'a block failed'}; output:\n${output}\nserver log tail:\n${server.logs().split('\n').slice(-15).join('\n')}`).toBe(0);
      await server.kill();
      await fs.rm(cwd, { recursive: true, force: true });
    }, 180_000);
  }
});
