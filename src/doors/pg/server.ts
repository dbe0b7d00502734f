import * as fs from 'node:fs';
import * as net from 'node:net';
import * as tls from 'node:tls';
import { listenError } from '../../errors.ts';
import { log } from '../../log.ts';
import type { Services } from '../shared/context.ts';
import { AUDIT_DATASET, canAccess } from '../shared/auth.ts';
import type { DatasetSchema } from '../../query/catalog/catalogDb.ts';
import { newBackendKey, Session } from './session.ts';
import { KeyState } from './budget.ts';

export interface PgSettings {
  host: string;
  port: number;
  tlsCert?: string;
  tlsKey?: string;
  requireTls: boolean;
  maxConnections: number;
  idleTimeoutMs: number;
  maxPrepared: number;
  maxSessionStateBytes: number;
  maxKeyStateBytes: number;
}

const PG_DOOR = { name: 'pg', ingest: false };

/**
 * The PostgreSQL front door: a TCP server whose connections each run a Session. Resolves once
 * listening; a port that cannot be bound is a start-up error naming the setting.
 */
export async function startPgServer(services: Services, settings: PgSettings): Promise<net.Server> {
  const { config, keys, queries, storage } = services;
  const secureContext =
    settings.tlsCert && settings.tlsKey ? tls.createSecureContext({ cert: fs.readFileSync(settings.tlsCert), key: fs.readFileSync(settings.tlsKey) }) : undefined;
  if (settings.requireTls && !secureContext) throw new Error('invalid configuration: P_PG_REQUIRE_TLS needs P_PG_TLS_CERT and P_PG_TLS_KEY');

  const datasets = (canRead: (name: string) => boolean): DatasetSchema[] =>
    storage
      .list()
      .filter((m) => m.name !== AUDIT_DATASET && canRead(m.name))
      .map((m) => ({ name: m.name, schema: storage.schemaOf(m.name).schema }))
      .sort((a, b) => a.name.localeCompare(b.name));
  const sessions = new Map<number, { session: Session; secret: number }>();
  const keyState = new KeyState(settings.maxKeyStateBytes);
  let nextPid = 1;
  let open = 0;

  const server = net.createServer((socket) => {
    // The shared connection budget first (docs/security.md "The door contract"): PostgreSQL takes no
    // ingestion, so it leaves the budget's ingest reserve alone; its head is done at login.
    const conn = services.connections.admit(socket, PG_DOOR);
    if (!conn) return;
    // Past the limit a connection is still answered as PostgreSQL does: after its SSLRequest, at its
    // startup packet, so clients show the error instead of a failed TLS negotiation.
    const refused = open >= settings.maxConnections;
    if (!refused) {
      open++;
      socket.once('close', () => open--);
    }
    socket.setNoDelay(true);
    const session = new Session(socket, {
      keys,
      queries,
      datasets: (principal) => datasets((name) => canAccess(principal, name)),
      tls: secureContext,
      requireTls: settings.requireTls,
      // A Bind carries the statement's parameters; a Parse the statement: room for both.
      maxMessageBytes: Math.max(1024 * 1024, 4 * config.queryLimits.maxSqlBytes),
      idleTimeoutMs: settings.idleTimeoutMs,
      slowMessage: { bodyTimeoutMs: config.ingest.bodyTimeoutMs, minBodyRate: config.ingest.minBodyRate },
      maxSqlBytes: config.queryLimits.maxSqlBytes,
      stateLimits: { maxEntries: settings.maxPrepared, maxBytes: settings.maxSessionStateBytes },
      keyState,
      register: (session) => {
        conn.ready();
        nextPid = nextPid >= 2 ** 31 - 1 ? 1 : nextPid + 1;
        const key = newBackendKey(nextPid);
        sessions.set(key.pid, { session, secret: key.secret });
        return key;
      },
      unregister: (pid) => sessions.delete(pid),
      cancel: (pid, secret) => {
        const entry = sessions.get(pid);
        if (entry && entry.secret === secret) entry.session.cancel();
      },
    });
    if (refused) session.refuse = `sorry, too many clients already (P_PG_MAX_CONNECTIONS=${settings.maxConnections})`;
  });
  await new Promise<void>((resolve, reject) => {
    const fail = (err: Error) => reject(listenError('PostgreSQL clients', `${settings.host}:${settings.port}`, 'P_PG_ADDR', err, true));
    server.once('error', fail);
    server.listen(settings.port, settings.host, () => {
      server.off('error', fail);
      resolve();
    });
  });
  // After listening: a failure to listen is the one line above, not also this.
  server.on('error', (err) => log.error('pg: server error', { error: err }));
  // The port bound (P_PG_ADDR may ask for port 0: any free one).
  const port = (server.address() as net.AddressInfo).port;
  log.info('listening for PostgreSQL clients', { addr: `${settings.host}:${port}`, port, tls: Boolean(secureContext) });
  return server;
}
