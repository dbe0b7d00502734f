import { execFile, spawn } from 'node:child_process';
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

/** What the JVM readers are given: the catalog, the range, each table's time column; on S3 their own keys. */
export interface JvmArgs {
  uri: string;
  key: string;
  start: string;
  end: string;
  tables: Record<string, string>;
  s3?: { accessKey: string; secretKey: string };
}

/**
 * Each table's [all rows, rows in range] counted by Spark 4.0 local with iceberg-spark-runtime
 * (scripts/test-setup.d/71-spark.sh), one JVM for all of them; on S3 with iceberg-aws-bundle beside it.
 */
export async function sparkCounts(args: JvmArgs): Promise<Record<string, [number, number]>> {
  const script = path.resolve(import.meta.dirname, '../fixtures/iceberg/spark.py');
  const jars = [await cached('iceberg-spark-jar'), ...(args.s3 ? [await cached('iceberg-aws-bundle-jar')] : [])];
  const { stdout } = await run(await cached('spark-python'), [script, JSON.stringify({ ...args, jar: jars.join(',') })], { maxBuffer: 1 << 22, timeout: 300_000 });
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
  /** endpointToPyiceberg: pyiceberg is given the endpoint (otherwise it takes LoadTable's, as users' pyiceberg does). */
  s3?: { endpoint: string; accessKey: string; secretKey: string; region: string; endpointToPyiceberg?: boolean };
}

/** Each retained snapshot of a table and its rows, read by pyiceberg (fails if a file a snapshot lists is gone). */
export async function snapshotRows(args: Pick<ReaderArgs, 'uri' | 'key' | 'table' | 'user'>): Promise<[number, number][]> {
  const full = { ...args, timeColumn: '', start: '', end: '', snapshots: true };
  const { stdout } = await run(await icebergPython(), [SCRIPT, JSON.stringify(full)], { maxBuffer: 1 << 20, timeout: 120_000 });
  return JSON.parse(stdout.trim().split('\n').pop()!).snapshots;
}

/** Each reader's [all rows, rows in range] (see test/fixtures/iceberg/readers.py). */
export async function readerCounts(args: ReaderArgs & { pyicebergOnly?: boolean }): Promise<{ pyiceberg: [number, number]; duckdb: [number, number] }> {
  const { stdout } = await run(await icebergPython(), [SCRIPT, JSON.stringify(args)], { maxBuffer: 1 << 20, timeout: 120_000 });
  return JSON.parse(stdout.trim().split('\n').pop()!);
}

/**
 * Each table's [all rows, rows in range] counted by Java iceberg-core 1.12's RESTCatalog and
 * IcebergGenerics (test/fixtures/iceberg/java/Reader.java, classpath from 72-iceberg-java.sh), one JVM.
 */
export async function javaCounts(args: JvmArgs): Promise<Record<string, [number, number]>> {
  const source = path.resolve(import.meta.dirname, '../fixtures/iceberg/java/Reader.java');
  const file = path.join(process.env.LAKEHOUSE_TEST_CACHE ?? path.join(os.homedir(), '.cache', 'lakehouse-test'), 'iceberg-java-classpath');
  const classpath = await fs.readFile(file, 'utf8').catch(() => {
    throw new Error(`${file} is missing: run \`bash scripts/test-setup.sh\` (npm test runs it first)`);
  });
  const tables = Object.entries(args.tables).map(([name, time]) => `${name}=${time}`);
  const env = { ...process.env, ...(args.s3 ? { LAKE_S3_ACCESS_KEY: args.s3.accessKey, LAKE_S3_SECRET_KEY: args.s3.secretKey } : {}) };
  const { stdout } = await run('java', ['-cp', classpath.trim(), source, args.uri, args.key, args.start, args.end, ...tables], { env, maxBuffer: 1 << 22, timeout: 300_000 });
  return JSON.parse(stdout.trim().split('\n').pop()!);
}

export interface RestFixture {
  /** The catalog's base URI (P_ICEBERG_PUSH_URI). */
  uri: string;
  stop: () => void;
}

/**
 * The Iceberg project's REST catalog server (iceberg-open-api test fixtures, scripts/test-setup.d/
 * 73-iceberg-rest-fixture.sh) over SQLite (a file in its warehouse dir), in a child JVM. It binds a port of the kernel's
 * choice (`rest.port=0`) and the port is read from Jetty's "Started ServerConnector…{0.0.0.0:PORT}" log
 * line: no port is picked and released. It exits with the test (its stdin closes when the test ends).
 * With `s3`, its FileIO is S3FileIO (iceberg-aws-bundle) on that server, for tables whose locations
 * are s3:// (catalog properties from CATALOG_* variables, as the server reads them).
 */
export async function startRestFixture(s3?: { endpoint: string; accessKey: string; secretKey: string }): Promise<RestFixture> {
  const classpath = await fs.readFile(path.join(process.env.LAKEHOUSE_TEST_CACHE ?? path.join(os.homedir(), '.cache', 'lakehouse-test'), 'iceberg-rest-fixture-classpath'), 'utf8').catch(() => {
    throw new Error('iceberg-rest-fixture-classpath is missing: run `bash scripts/test-setup.sh` (npm test runs it first)');
  });
  const warehouse = await fs.mkdtemp(path.join(os.tmpdir(), 'iceberg-rest-fixture-'));
  // CATALOG_A_B__C is the catalog property a.b-c.
  const io = s3
    ? { CATALOG_IO__IMPL: 'org.apache.iceberg.aws.s3.S3FileIO', CATALOG_S3_ENDPOINT: s3.endpoint, CATALOG_S3_PATH__STYLE__ACCESS: 'true', CATALOG_S3_ACCESS__KEY__ID: s3.accessKey, CATALOG_S3_SECRET__ACCESS__KEY: s3.secretKey, CATALOG_CLIENT_REGION: 'us-east-1' }
    : {};
  // Its default `jdbc:sqlite::memory:` is one empty database per pooled connection: under concurrent loads a
  // second connection answered every request with 500 ("Failed to get table"). One file, one connection.
  const env = { ...process.env, CATALOG_REST_PORT: '0', CATALOG_WAREHOUSE: warehouse, CATALOG_URI: `jdbc:sqlite:${path.join(warehouse, 'catalog.db')}`, CATALOG_CLIENTS: '1', ...io };
  const child = spawn('java', ['-Xmx256m', '-cp', classpath.trim(), 'org.apache.iceberg.rest.RESTCatalogServer'], { env, stdio: ['pipe', 'ignore', 'pipe'] });
  let log = '';
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the REST fixture did not start within 60 s: ${log}`)), 60_000);
    child.stderr!.on('data', (d) => {
      log += d.toString();
      const started = /Started ServerConnector@\S+\{[^}]*\}\{[^}]*:(\d+)\}/.exec(log);
      if (started) {
        clearTimeout(timer);
        resolve(Number(started[1]));
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the REST fixture exited (${code}): ${log}`));
    });
  });
  return {
    uri: `http://127.0.0.1:${port}`,
    stop: () => {
      child.kill('SIGKILL');
      void fs.rm(warehouse, { recursive: true, force: true });
    },
  };
}
