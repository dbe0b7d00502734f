/**
 * Filebeat 7.17 (built by scripts/test-setup.d/47-filebeat.sh) reading a log file and shipping it
 * through its Elasticsearch output to the service's `/es` door: every line, with its time and file.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ADMIN_KEY, query, startServer, tempDir, type TestServer } from './helpers/server.ts';
import { waitFor } from './helpers/wait.ts';

const cache = process.env.LAKEHOUSE_TEST_CACHE ?? path.join(os.homedir(), '.cache/lakehouse-test');
const FILEBEAT = path.join(cache, 'filebeat-7.17.28', 'filebeat');
const LINES = 100;

let server: TestServer;
let filebeat: ChildProcess | undefined;
let output = '';

beforeAll(async () => {
  if (!fs.existsSync(FILEBEAT)) throw new Error(`no Filebeat at ${FILEBEAT}: run scripts/test-setup.d/47-filebeat.sh`);
  server = await startServer();
});
afterAll(async () => {
  filebeat?.kill('SIGKILL');
  await server?.stop();
});

it('Filebeat ships every line of a file, with its time and path, into one dataset', async () => {
  const dir = await tempDir('lakehouse-filebeat-');
  const logFile = path.join(dir, 'app.log');
  const lines = Array.from({ length: LINES }, (_, i) => `filebeat line ${i}`);
  fs.writeFileSync(logFile, `${lines.join('\n')}\n`);
  const config = [
    'filebeat.inputs:',
    '  - type: log',
    `    paths: ["${logFile}"]`,
    'output.elasticsearch:',
    `  hosts: ["${server.url}/es"]`,
    '  username: "filebeat"',
    `  password: "${ADMIN_KEY}"`,
    '  index: "fbtest-%{+yyyy.MM.dd}"',
    'setup.ilm.enabled: false',
    'setup.template.enabled: false',
    'setup.template.name: "fbtest"',
    'setup.template.pattern: "fbtest-*"',
    'logging.level: warning',
  ].join('\n');
  fs.writeFileSync(path.join(dir, 'filebeat.yml'), config, { mode: 0o600 });
  const started = Date.now();
  filebeat = spawn(FILEBEAT, ['-e', '--strict.perms=false', '-c', path.join(dir, 'filebeat.yml'), '--path.data', path.join(dir, 'data'), '--path.logs', dir], { stdio: ['ignore', 'pipe', 'pipe'] });
  filebeat.stdout!.on('data', (d) => (output += d));
  filebeat.stderr!.on('data', (d) => (output += d));
  const count = async () => Number((await query(server, 'SELECT count(*) AS n FROM fbtest'))[0].n);
  await waitFor(`${LINES} lines from Filebeat (its output: ${output.slice(-2000)})`, async () => (await count().catch(() => 0)) >= LINES, 60_000);
  const rows = await query(server, 'SELECT message, log_file_path AS file, "@timestamp" AS t FROM fbtest');
  expect(rows.map((r) => r.message).sort()).toEqual([...lines].sort());
  expect(new Set(rows.map((r) => r.file))).toEqual(new Set([logFile]));
  const ms = (t: unknown) => Date.parse(/[Z+]/.test(String(t)) ? String(t) : `${String(t)}Z`);
  for (const r of rows) expect({ t: r.t, ms: ms(r.t) >= started - 1000 && ms(r.t) <= Date.now() }).toEqual({ t: r.t, ms: true });
});
