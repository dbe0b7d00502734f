import { execFile } from 'node:child_process';
import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const SCRIPT = path.resolve(import.meta.dirname, '../fixtures/iceberg/readers.py');

/**
 * The Python with pyiceberg and DuckDB's Iceberg extension, as scripts/test-setup.d/70-iceberg-readers.sh
 * installed it (`npm test` runs it first). Tests install nothing themselves: without it, this fails
 * saying what to run.
 */
export async function icebergPython(): Promise<string> {
  const cache = process.env.LAKEHOUSE_TEST_CACHE ?? path.join(os.homedir(), '.cache', 'lakehouse-test');
  const file = path.join(cache, 'iceberg-python');
  const python = (await fs.readFile(file, 'utf8').catch(() => '')).trim();
  if (!python || !(await fs.access(python, fs.constants.X_OK).then(() => true, () => false))) {
    throw new Error(`no Python with the Iceberg readers (${file} is missing or stale): run \`bash scripts/test-setup.sh\``);
  }
  return python;
}

export interface ReaderArgs {
  uri: string;
  key: string;
  table: string;
  timeColumn: string;
  /** ISO timestamps without zone (UTC), start inclusive, end exclusive. */
  start: string;
  end: string;
  s3?: { endpoint: string; accessKey: string; secretKey: string; region: string };
}

/** Each reader's [all rows, rows in range] (see test/fixtures/iceberg/readers.py). */
export async function readerCounts(args: ReaderArgs): Promise<{ pyiceberg: [number, number]; duckdb: [number, number] }> {
  const { stdout } = await run(await icebergPython(), [SCRIPT, JSON.stringify(args)], { maxBuffer: 1 << 20, timeout: 120_000 });
  return JSON.parse(stdout.trim().split('\n').pop()!);
}
