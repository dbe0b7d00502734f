import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import { serve } from '@hono/node-server';
import { loadConfig, type Config } from './config.ts';
import { listenError, StartupError } from './errors.ts';
import { createApp } from './doors/http/app.ts';
import type { Services } from './doors/shared/context.ts';
import { ApiKeys } from './doors/shared/auth.ts';
import { Audit } from './doors/shared/audit.ts';
import { SignInLimits } from './doors/shared/signInLimits.ts';
import { AccessStore } from './access/store.ts';
import { ConnectionBudget, connectionCap } from './doors/shared/connections.ts';
import { startOtlpGrpc } from './doors/grpc/otlp.ts';
import { startPgServer } from './doors/pg/server.ts';
import { IngestPool } from './ingest/ingestPool.ts';
import { log, setLogLevel } from './log.ts';
import { IdleClosingDuckDB, openDuckDB, withConnection } from './duckdb.ts';
import { QueryExecutor } from './query/sql/executor.ts';
import { IngestService } from './ingest/service.ts';
import { QueryPool } from './query/worker/pool.ts';
import { WorkerCgroups } from './query/worker/cgroup.ts';
import { PromqlExecutor } from './query/promql/executor.ts';
import { OTLP_KNOWN_TYPES } from './ingest/otlp/index.ts';
import { PROMETHEUS_KNOWN_TYPES } from './ingest/prometheus/index.ts';
import { stateGauge } from './metrics.ts';
import { StorageEngine } from './storage/engine.ts';
import { LocalObjectStore, writeFileDurable, type ObjectStore } from './storage/objectStore.ts';
import { createSignIn } from './doors/shared/sessionAuth.ts';
import { storedRoles } from './access/roleMapping.ts';

/** A worker's name: P_NODE_ID, else one generated on first start and kept in the data dir. */
async function nodeId(config: Config): Promise<string> {
  if (config.nodeId) return config.nodeId;
  const file = path.join(config.dataDir, 'node-id');
  const existing = (await fs.readFile(file, 'utf8').catch(() => '')).trim();
  if (existing) return existing;
  const id = `node-${randomBytes(4).toString('hex')}`;
  await writeFileDurable(file, `${id}\n`);
  return id;
}

/**
 * A file removed from the catalog stays while a query (here or on a worker that has not refreshed) may
 * still read it, and while a retained Iceberg snapshot may still list it (checked against each other here).
 */
function graceAndLake(config: Config) {
  const queryGraceMs = 2 * config.queryLimits.timeoutMs + 2 * config.engine.catalogRefreshMs + 5000;
  const iceberg = config.iceberg && { ...config.iceberg, baseUri: storeBaseUri(config) };
  const deleteGraceMs = Math.max(queryGraceMs, iceberg ? iceberg.snapshotRetentionMs + 2 * iceberg.intervalMs : 0);
  if (deleteGraceMs > queryGraceMs) log.info('delete grace period raised to outlast retained Iceberg snapshots', { deleteGraceMs, snapshotRetentionMs: iceberg?.snapshotRetentionMs });
  return { deleteGraceMs, iceberg };
}

/** Where readers find the store's objects: `{base}/{key}` (Iceberg locations). */
function storeBaseUri(config: Config): string {
  if (config.storage === 'local') return `file://${path.join(config.dataDir, 'store')}`;
  return `s3://${config.s3.bucket}`;
}

async function openStore(config: Config): Promise<ObjectStore> {
  if (config.storage === 'local') return new LocalObjectStore(path.join(config.dataDir, 'store'));
  const { S3ObjectStore } = await import('./storage/s3Store.ts');
  return new S3ObjectStore({
    endpoint: config.s3.url,
    bucket: config.s3.bucket,
    region: config.s3.region,
    accessKeyId: config.s3.accessKey,
    secretAccessKey: config.s3.secretKey,
    cacheDir: path.join(config.dataDir, 'cache'),
    cacheBytes: config.cacheBytes,
  });
}

/** The data dir and a fresh tmp dir inside it (what a crash left there is of no use). */
async function prepareDirs(config: Config): Promise<string> {
  await fs.mkdir(config.dataDir, { recursive: true });
  const tmp = path.join(config.dataDir, 'tmp');
  await fs.rm(tmp, { recursive: true, force: true });
  await fs.mkdir(tmp, { recursive: true });
  return tmp;
}

/** The storage DuckDB, the object store and the storage engine, started. */
async function startStorage(config: Config, tmp: string, id: string) {
  const { idleMs: duckIdleMs, ...duckSettings } = config.storageDuckDB;
  const duck = new IdleClosingDuckDB(() => openDuckDB({ dataDir: config.dataDir, ...duckSettings, tempDir: path.join(tmp, 'duckdb') }), duckIdleMs);
  const reserved = await withConnection(duck, async (conn) =>
    (await conn.runAndReadAll("SELECT keyword_name FROM duckdb_keywords() WHERE keyword_category = 'reserved'")).getRowObjects().map((r) => String(r.keyword_name)),
  );
  const store = await openStore(config);
  const storage = new StorageEngine(store, duck, { ...config.engine, dataDir: config.dataDir, nodeId: id, ...graceAndLake(config) });
  stateGauge('lakehouse_iceberg_lag_seconds', 'Seconds the oldest file of a dataset not yet in its Iceberg table has waited since this worker saw it (0: the table shows every file).', ['dataset'], () =>
    storage.list().map((m) => ({ labels: { dataset: m.name }, value: storage.icebergLagSeconds(m.name) })),
  );
  stateGauge('lakehouse_iceberg_push_lag_seconds', 'Seconds the external catalog\'s copy of a dataset\'s table (P_ICEBERG_PUSH_URI) has been behind this worker\'s (0: in step, or no push).', ['dataset'], () =>
    storage.list().map((m) => ({ labels: { dataset: m.name }, value: storage.icebergPushLagSeconds(m.name) })),
  );
  stateGauge('lakehouse_wal_bytes', 'Bytes in the write-ahead log (acknowledged, not yet Parquet), per dataset.', ['dataset'], () =>
    storage.list().map((m) => ({ labels: { dataset: m.name }, value: storage.stats(m.name).wal.bytes })),
  );
  stateGauge('lakehouse_storage_duckdb_open', 'Whether the storage DuckDB (flushes, compaction, query parsing) is open: it is closed after P_STORAGE_DUCKDB_IDLE unused.', [], () => [{ labels: {}, value: duck.isOpen ? 1 : 0 }]);
  stateGauge('lakehouse_storage_duckdb_opens', 'Times the storage DuckDB was opened since start (again on first use after each close).', [], () => [{ labels: {}, value: duck.opens }]);
  log.info('memory budget', {
    bytes: config.memoryBudget.bytes,
    source: config.memoryBudget.source,
    storageMemoryLimit: config.storageDuckDB.memoryLimit,
    queryConcurrency: config.queryPool.concurrency,
    queryWorkerMaxBytes: config.queryPool.maxRssBytes,
    queryMemoryLimit: config.queryPool.memoryLimit,
    maxInflightBytes: config.ingest.maxInflightBytes,
    flushBytes: config.engine.flushBytes,
    ingestWorkerYoungGenerationMb: config.ingest.workerYoungGenerationMb,
    maxColumns: config.engine.maxColumns,
  });
  await storage.init(reserved);
  storage.start();
  return { duck, store, storage };
}

/** The query worker pool (started) and the SQL and PromQL executors over it. */
async function startQueries(config: Config, tmp: string, duck: IdleClosingDuckDB, storage: StorageEngine) {
  const { cgroup: cgroupMode, ...poolSettings } = config.queryPool;
  const workerCgroups = WorkerCgroups.open(cgroupMode, poolSettings.maxRssBytes);
  log.info('query worker memory cap', { capBytes: poolSettings.maxRssBytes, by: workerCgroups.cgroups ? 'cgroup' : 'RSS watchdog', detail: workerCgroups.reason });
  const queryPool = new QueryPool({ ...poolSettings, workDir: path.join(tmp, 'query'), cgroups: workerCgroups.cgroups });
  await queryPool.start();
  const queries = new QueryExecutor(duck, storage, queryPool, config.queryLimits, config.queryPlanCacheBytes);
  const promql = new PromqlExecutor(storage, queryPool, {
    timeoutMs: config.queryLimits.timeoutMs,
    maxSamples: config.promqlMaxSamples,
    cacheBytes: config.promqlCacheBytes,
    fixedColumns: new Map(Object.entries(PROMETHEUS_KNOWN_TYPES)),
    otlpColumns: new Set(Object.keys(OTLP_KNOWN_TYPES.metrics)),
  });
  stateGauge('lakehouse_queries_waiting', 'Queries waiting for a query slot.', [], () => [{ labels: {}, value: queryPool.stats.waiting }]);
  stateGauge('lakehouse_query_workers', 'Query worker processes by state (starting, idle, busy).', ['state'], () => {
    const s = queryPool.stats;
    return (['starting', 'idle', 'busy'] as const).map((state) => ({ labels: { state }, value: s[state] }));
  });
  return { queryPool, queries, promql };
}

/** The ingest worker threads and the one ingest service of every door. */
function startIngest(config: Config, storage: StorageEngine) {
  const ingestPool = new IngestPool(config.ingest.workers, config.ingest.workerIdleMs, config.ingest.workerYoungGenerationMb);
  const ingest = new IngestService(ingestPool, storage, config.ingest);
  stateGauge('lakehouse_ingest_inflight_bytes', 'Bytes of ingest request bodies being received, decoded and stored (P_MAX_INFLIGHT_BYTES).', [], () => [{ labels: {}, value: ingest.inflight.inUse }]);
  stateGauge('lakehouse_ingest_inflight_peak_bytes', 'The most ingest request bytes in flight at once since start.', [], () => [{ labels: {}, value: ingest.inflight.peak }]);
  stateGauge('lakehouse_ingest_waiting', 'Ingest requests waiting for room in the in-flight byte budget.', [], () => [{ labels: {}, value: ingest.inflight.queued }]);
  stateGauge('lakehouse_ingest_workers', 'Ingest worker threads running (started on demand, stopped after P_INGEST_WORKER_IDLE).', [], () => [{ labels: {}, value: ingestPool.threads }]);
  return { ingestPool, ingest };
}

/** Readiness: storage reachable. Damaged objects do not make a worker unready (every worker reads the same bucket). */
function readiness(storage: StorageEngine, store: ObjectStore) {
  return async () => {
    const { quarantined } = storage.health();
    try {
      await store.ping();
      return { ready: true, details: { storage: 'reachable', quarantined } };
    } catch (err) {
      const reason = `storage unreachable: ${(err as Error).message}`;
      return { ready: false, reason, details: { storage: reason, quarantined } };
    }
  };
}

/** Every door on its listener: PostgreSQL, OTLP/gRPC (before HTTP answers liveness), then HTTP. */
async function startDoors(services: Services, id: string) {
  const { config, keys, ingest, connections } = services;
  const pgServer = config.pg ? await startPgServer(services, config.pg) : undefined;
  const grpcAddr = config.otlpGrpc.addr;
  const grpcServer = grpcAddr ? await startOtlpGrpc({ ...config.otlpGrpc, addr: grpcAddr }, { keys, ingest, connections, slowBody: config.ingest }) : undefined;
  // Node checks request-head and request timeouts every connectionsCheckingInterval (30 s by default).
  const server = serve({ fetch: createApp(services).fetch, hostname: config.host, port: config.port, serverOptions: { connectionsCheckingInterval: 1000 } });
  // Longer than the idle timeout of common load balancers (60 s), so they never reuse a connection
  // the service is closing (Node's default of 5 s causes sporadic resets behind nginx/ALB).
  const http = server as import('node:http').Server;
  http.keepAliveTimeout = 65_000;
  connections.attachHttp(http, { name: 'http', ingest: true });
  const port = await listening(http, `${config.host}:${config.port}`);
  // The start log says where to go next: the console's address and where the admin key is.
  const browseHost = config.host === '0.0.0.0' || config.host === '::' || config.host === '' ? 'localhost' : config.host;
  // One line with every port bound, for whoever asked for port 0 (the test helpers read it): at every level.
  log.announce('listening', {
    addr: `${config.host}:${port}`,
    port,
    grpcPort: grpcServer?.port ?? null,
    pgPort: pgServer ? (pgServer.address() as AddressInfo).port : null,
    console: `http://${browseHost.includes(':') ? `[${browseHost}]` : browseHost}:${port}/`,
    keys: keys.keyFile ? `admin key in ${keys.keyFile}` : 'from P_API_KEYS',
    nodeId: id,
    storage: config.storage,
    dataDir: config.dataDir,
  });
  return { server, grpcServer, pgServer };
}

async function main(): Promise<void> {
  const config = loadConfig();
  setLogLevel(config.logLevel);
  const tmp = await prepareDirs(config);
  if (config.faultInjection.length > 0) log.warn('test-only fault injection is on: never on a service that holds data', Object.fromEntries(config.faultInjection));
  const id = await nodeId(config);
  const keys = await ApiKeys.load(config.apiKeys, config.dataDir);
  const { duck, store, storage } = await startStorage(config, tmp, id);
  const { ingestPool, ingest } = startIngest(config, storage);
  // Users and roles from the bucket, before any door opens: a user signs in from the first request.
  const access = new AccessStore(store, config.access.pollMs);
  await access.start();
  keys.useDirectory(access, new SignInLimits(config.access.signIn));
  const { queryPool, queries, promql } = await startQueries(config, tmp, duck, storage);

  // One connection budget for every door's listener (docs/security.md "The door contract").
  const connections = new ConnectionBudget({
    maxConnections: connectionCap(config.server.maxConnections),
    ingestReserve: config.server.ingestConnections,
    headersTimeoutMs: config.server.headersTimeoutMs,
  });
  connections.registerGauges(['http', 'grpc', 'pg']);
  // Console sessions live in the bucket, so every worker on it accepts them (docs/users.md "Single sign-on").
  const signIn = createSignIn(config.sso, store, storedRoles(access));
  const services = { config, keys, access, audit: new Audit(ingest), connections, storage, duck, ingestPool, ingest, queries, promql, signIn, isReady: readiness(storage, store) };
  const { server, grpcServer, pgServer } = await startDoors(services, id);

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info('shutting down', { signal });
    server.close();
    await grpcServer?.close();
    pgServer?.close();
    await queryPool.close();
    await storage.shutdown();
    await ingestPool.close();
    log.info('stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}

/** Resolves with the HTTP port bound once the server listens; a port taken is one line naming P_ADDR. */
function listening(server: import('node:http').Server, addr: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const port = () => (server.address() as AddressInfo).port;
    if (server.listening) return resolve(port());
    const fail = (err: Error) => reject(listenError('HTTP', addr, 'P_ADDR', err, false));
    server.once('error', fail);
    server.once('listening', () => {
      server.off('error', fail);
      resolve(port());
    });
  });
}

main().catch((err) => {
  // A setting to change is said in one line; anything else keeps its stack.
  if (err instanceof StartupError) log.error(err.message);
  else log.error('fatal', { error: err as Error });
  process.exit(1);
});
