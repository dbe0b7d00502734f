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
  return cached('iceberg-python');
}

/** A path a setup script kept in the cache (`name` is the file holding it), checked to exist. */
async function cached(name: string): Promise<string> {
  const cache = process.env.LAKEHOUSE_TEST_CACHE ?? path.join(os.homedir(), '.cache', 'lakehouse-test');
  const file = path.join(cache, name);
  const found = (await fs.readFile(file, 'utf8').catch(() => '')).trim();
  if (!found || !(await fs.access(found).then(() => true, () => false))) {
    throw new Error(`${file} is missing or stale: run \`bash scripts/test-setup.sh\` (npm test runs it first)`);
  }
  return found;
}

/**
 * Each table's [all rows, rows in range] counted by Spark 4.0 local with iceberg-spark-runtime
 * (scripts/test-setup.d/71-spark.sh), one JVM for all of them.
 */
export async function sparkCounts(args: { uri: string; key: string; start: string; end: string; tables: Record<string, string> }): Promise<Record<string, [number, number]>> {
  const script = path.resolve(import.meta.dirname, '../fixtures/iceberg/spark.py');
  const { stdout } = await run(await cached('spark-python'), [script, JSON.stringify({ ...args, jar: await cached('iceberg-spark-jar') })], { maxBuffer: 1 << 22, timeout: 300_000 });
  return JSON.parse(stdout.trim().split('\n').pop()!);
}

export interface ReaderArgs {
  uri: string;
  key: string;
  /** The OAuth2 client id: a user's name (with their password as `key`); default `lakehouse` (any, for a key). */
  user?: string;
  table: string;
  timeColumn: string;
  /** ISO timestamps without zone (UTC), start inclusive, end exclusive. */
  start: string;
  end: string;
  s3?: { endpoint: string; accessKey: string; secretKey: string; region: string };
}

/** Each retained snapshot of a table and its rows, read by pyiceberg (fails if a file a snapshot lists is gone). */
export async function snapshotRows(args: Pick<ReaderArgs, 'uri' | 'key' | 'table' | 'user'>): Promise<[number, number][]> {
  const full = { ...args, timeColumn: '', start: '', end: '', snapshots: true };
  const { stdout } = await run(await icebergPython(), [SCRIPT, JSON.stringify(full)], { maxBuffer: 1 << 20, timeout: 120_000 });
  return JSON.parse(stdout.trim().split('\n').pop()!).snapshots;
}

/** Each reader's [all rows, rows in range] (see test/fixtures/iceberg/readers.py). */
export async function readerCounts(args: ReaderArgs): Promise<{ pyiceberg: [number, number]; duckdb: [number, number] }> {
  const { stdout } = await run(await icebergPython(), [SCRIPT, JSON.stringify(args)], { maxBuffer: 1 << 20, timeout: 120_000 });
  return JSON.parse(stdout.trim().split('\n').pop()!);
}

/**
 * Each table's [all rows, rows in range] counted by Java iceberg-core 1.12's RESTCatalog and
 * IcebergGenerics (test/fixtures/iceberg/java/Reader.java, classpath from 72-iceberg-java.sh), one JVM.
 */
export async function javaCounts(args: { uri: string; key: string; start: string; end: string; tables: Record<string, string> }): Promise<Record<string, [number, number]>> {
  const source = path.resolve(import.meta.dirname, '../fixtures/iceberg/java/Reader.java');
  const file = path.join(process.env.LAKEHOUSE_TEST_CACHE ?? path.join(os.homedir(), '.cache', 'lakehouse-test'), 'iceberg-java-classpath');
  const classpath = await fs.readFile(file, 'utf8').catch(() => {
    throw new Error(`${file} is missing: run \`bash scripts/test-setup.sh\` (npm test runs it first)`);
  });
  const tables = Object.entries(args.tables).map(([name, time]) => `${name}=${time}`);
  const { stdout } = await run('java', ['-cp', classpath.trim(), source, args.uri, args.key, args.start, args.end, ...tables], { maxBuffer: 1 << 22, timeout: 300_000 });
  return JSON.parse(stdout.trim().split('\n').pop()!);
}
