import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { AccessStore } from './access/store.ts';
import { storedRoles } from './access/roleMapping.ts';
import { Components } from './component.ts';
import { loadConfig, type Config } from './config.ts';
import { HttpListener } from './doors/http/listener.ts';
import { PgListener } from './doors/pg/listener.ts';
import { ApiKeys } from './doors/shared/auth.ts';
import { Audit } from './doors/shared/audit.ts';
import { ConnectionBudget, connectionCap } from './doors/shared/connections.ts';
import { createSignIn } from './doors/shared/sessionAuth.ts';
import { SignInLimits } from './doors/shared/signInLimits.ts';
import { StartupError } from './errors.ts';
import { IngestComponent, IngestWorkers } from './ingest/component.ts';
import { OTLP_KNOWN_TYPES } from './ingest/otlp/index.ts';
import { PROMETHEUS_KNOWN_TYPES } from './ingest/prometheus/index.ts';
import { log, setLogLevel } from './log.ts';
import { QueryComponent } from './query/worker/component.ts';
import { StorageComponent } from './storage/component.ts';
import { writeFileDurable } from './storage/objects/objectStore.ts';

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

/** The data dir and a fresh tmp dir inside it (what a crash left there is of no use). */
async function prepareDirs(config: Config): Promise<string> {
  await fs.mkdir(config.dataDir, { recursive: true });
  const tmp = path.join(config.dataDir, 'tmp');
  await fs.rm(tmp, { recursive: true, force: true });
  await fs.mkdir(tmp, { recursive: true });
  return tmp;
}

/** The one line with every port bound, for whoever asked for port 0 (the test helpers read it): at every level. */
function announce(config: Config, keys: ApiKeys, id: string, ports: { http: number; grpc?: number; pg?: number }): void {
  // The start log says where to go next: the console's address and where the admin key is.
  const browseHost = config.host === '0.0.0.0' || config.host === '::' || config.host === '' ? 'localhost' : config.host;
  log.announce('listening', {
    addr: `${config.host}:${ports.http}`,
    port: ports.http,
    grpcPort: ports.grpc ?? null,
    pgPort: ports.pg ?? null,
    console: `http://${browseHost.includes(':') ? `[${browseHost}]` : browseHost}:${ports.http}/`,
    keys: keys.keyFile ? `admin key in ${keys.keyFile}` : 'from P_API_KEYS',
    nodeId: id,
    storage: config.storage,
    dataDir: config.dataDir,
  });
}

/** Builds and starts every component in order, each over those before it, and says where they listen. */
async function build(parts: Components, config: Config, tmp: string, id: string, keys: ApiKeys): Promise<void> {
  const workers = await parts.start(new IngestWorkers(config.ingest));
  const stored = await parts.start(new StorageComponent(config, tmp, id));
  const { duck, store, storage } = stored;
  const ingest = (await parts.start(new IngestComponent(workers, storage, config.ingest))).service;
  // Users and roles from the bucket, before any door opens: a user signs in from the first request.
  const access = new AccessStore(store, config.access.pollMs);
  await parts.start({ name: 'access', start: () => access.start(), stop: () => access.stop() });
  keys.useDirectory(access, new SignInLimits(config.access.signIn));
  const known = { prometheus: new Map(Object.entries(PROMETHEUS_KNOWN_TYPES)), otlpMetrics: new Set(Object.keys(OTLP_KNOWN_TYPES.metrics)) };
  const { queries, promql } = await parts.start(new QueryComponent(config, tmp, duck, storage, known));

  // One connection budget for every door's listener (docs/security.md "The door contract").
  const connections = new ConnectionBudget({
    maxConnections: connectionCap(config.server.maxConnections),
    ingestReserve: config.server.ingestConnections,
    headersTimeoutMs: config.server.headersTimeoutMs,
  });
  connections.registerGauges(['http', 'grpc', 'pg']);
  // Console sessions live in the bucket, so every worker on it accepts them (docs/users.md "Single sign-on").
  const signIn = createSignIn(config.sso, store, storedRoles(access));
  const services = { config, keys, access, audit: new Audit(ingest), connections, storage, duck, ingestPool: workers.pool, ingest, queries, promql, signIn, isReady: () => stored.readiness() };
  // Every door on its listener: PostgreSQL, OTLP/gRPC (before HTTP answers liveness), then HTTP.
  const pg = config.pg ? await parts.start(new PgListener(services, config.pg)) : undefined;
  const grpcAddr = config.otlpGrpc.addr;
  // The gRPC door's libraries (@grpc/grpc-js, ~10 MB of an idle process) load only when it listens.
  const grpcDoor = grpcAddr ? await import('./doors/grpc/listener.ts') : undefined;
  const grpc = grpcDoor && grpcAddr ? await parts.start(new grpcDoor.GrpcListener({ ...config.otlpGrpc, addr: grpcAddr }, { keys, ingest, connections, slowBody: config.ingest })) : undefined;
  const http = await parts.start(new HttpListener(services));
  announce(config, keys, id, { http: http.port, grpc: grpc?.port, pg: pg?.port });
}

/**
 * Wiring only: each component (component.ts) owns its settings group, gauges, start and stop; main
 * builds them in order, each over those before it, and stops them in reverse: the HTTP, gRPC and
 * PostgreSQL listeners, the query workers, the access store, storage (its last flush), the ingest threads.
 */
async function main(): Promise<void> {
  const config = loadConfig();
  setLogLevel(config.logLevel);
  const tmp = await prepareDirs(config);
  if (config.faultInjection.length > 0) log.warn('test-only fault injection is on: never on a service that holds data', Object.fromEntries(config.faultInjection));
  const id = await nodeId(config);
  const keys = await ApiKeys.load(config.apiKeys, config.dataDir);
  const parts = new Components();
  // A part that fails to be built, not only to start, also stops the parts started before it.
  await build(parts, config, tmp, id, keys).catch(async (err: unknown) => {
    await parts.stop();
    throw err;
  });

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info('shutting down', { signal });
    await parts.stop();
    log.info('stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}


main().catch((err) => {
  // A setting to change is said in one line; anything else keeps its stack.
  if (err instanceof StartupError) log.error(err.message);
  else log.error('fatal', { error: err as Error });
  process.exit(1);
});
