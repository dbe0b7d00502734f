import type { Config } from '../../config.ts';
import type { DuckDBSource } from '../../duckdb.ts';
import type { IngestPool } from '../../ingest/worker/ingestPool.ts';
import type { IngestService } from '../../ingest/service.ts';
import type { QueryExecutor } from '../../query/sql/executor.ts';
import type { PromqlExecutor } from '../../query/promql/executor.ts';
import type { StorageEngine } from '../../storage/engine.ts';
import type { ApiKeys, Principal } from './auth.ts';
import type { ConnectionBudget } from './connections.ts';
import type { SignIn } from './sessionAuth.ts';
import type { AccessStore } from '../../access/store.ts';
import type { Audit } from './audit.ts';

/** Everything the routes need, built once in main.ts. */
export interface Services {
  config: Config;
  keys: ApiKeys;
  /** Users, roles and user keys in the object store (docs/users.md). */
  access: AccessStore;
  /** Who changed users, roles, keys and datasets: the log and the `paudit` dataset. */
  audit: Audit;
  /** The connection budget every door's listener takes its connections from. */
  connections: ConnectionBudget;
  storage: StorageEngine;
  duck: DuckDBSource;
  ingestPool: IngestPool;
  /** The one ingest path of every protocol. */
  ingest: IngestService;
  queries: QueryExecutor;
  /** PromQL over metrics datasets (the Prometheus query API). */
  promql: PromqlExecutor;
  /** Console sign-in (OpenID Connect) and its sessions; undefined when single sign-on is not configured. */
  signIn?: SignIn;
  /** Readiness; `details` are shown only to a caller with a valid key. */
  isReady: () => Promise<{ ready: boolean; reason?: string; details?: Record<string, unknown> }>;
}

export type AppEnv = { Variables: { principal: Principal } };
