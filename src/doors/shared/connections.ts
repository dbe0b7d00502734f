import * as fs from 'node:fs';
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { log } from '../../log.ts';
import { stateGauge } from '../../metrics.ts';

/**
 * The connection budget every door's listener takes its connections from (docs/security.md "The door
 * contract"), which anyone who can reach a port can spend without a key:
 *
 * - at most `maxConnections` at once over ALL listeners (HTTP, OTLP/gRPC, PostgreSQL, any door to come),
 *   a number that leaves the process's other file descriptors to the WAL, flushes, query workers and S3;
 *   a connection beyond it is closed as it is accepted;
 * - `ingestReserve` of them only doors that take ingestion (HTTP, gRPC) may use: a flood on a door that
 *   cannot ingest (PostgreSQL) leaves room for ingest clients;
 * - a connection must finish its head within `headersTimeoutMs` — HTTP: send a byte (Node's own
 *   `headersTimeout`, set too, covers the rest of the head); gRPC: start an authenticated call;
 *   PostgreSQL: log in — or it is closed;
 * - when nine tenths of the budget are in use, idle HTTP keep-alive connections are closed, and so are
 *   connections of any door whose head is not done after a second, so connections that never speak or
 *   never authenticate cannot hold the room either.
 */
export interface ConnectionLimits {
  maxConnections: number;
  headersTimeoutMs: number;
  /** Connections kept for doors that take ingestion (default: an eighth of the budget). */
  ingestReserve?: number;
}

/** The soft limit on open files of this process (Linux), or undefined where it cannot be read. */
function openFilesLimit(): number | undefined {
  try {
    const m = /^Max open files\s+(\d+|unlimited)/m.exec(fs.readFileSync('/proc/self/limits', 'utf8'));
    return m && m[1] !== 'unlimited' ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The connection cap: the configured one, or half the open-files limit (at most 8,192) when none is
 * configured; never more than the limit less 256 descriptors kept for the rest of the service.
 */
export function connectionCap(configured: number | undefined, fileLimit = openFilesLimit() ?? 1024): number {
  const ceiling = Math.max(16, fileLimit - 256);
  const wanted = configured ?? Math.min(8192, Math.floor(fileLimit / 2));
  if (wanted > ceiling) log.warn('P_MAX_CONNECTIONS lowered to leave file descriptors for storage', { configured: wanted, openFilesLimit: fileLimit, cap: ceiling });
  return Math.max(1, Math.min(wanted, ceiling));
}

/** A connection accepted and not done with its head this long is fair game when the budget is crowded. */
const HEAD_GRACE_MS = 1000;

/** A door as the budget sees it: its name (logs, metrics) and whether ingest clients use it. */
export interface DoorListener {
  name: string;
  ingest: boolean;
}

/** One admitted connection. */
export interface Connection {
  readonly door: DoorListener;
  /** The door's head is done (a request head began, a call was authenticated, a login succeeded). */
  ready(): void;
}

interface Entry extends Connection {
  readonly socket: Duplex & { bytesRead?: number };
  readonly since: number;
  headDone: boolean;
}

export class ConnectionBudget {
  private readonly open = new Set<Entry>();
  private readonly httpServers = new Set<Server>();
  private readonly crowded: number;
  readonly reserve: number;
  /** Connections refused since start, per door (what a flood got). */
  readonly refused = new Map<string, number>();

  constructor(readonly limits: ConnectionLimits) {
    this.crowded = Math.max(1, Math.floor(limits.maxConnections * 0.9));
    this.reserve = Math.min(limits.maxConnections - 1, Math.max(0, limits.ingestReserve ?? Math.floor(limits.maxConnections / 8)));
  }

  /** Open connections, all doors. */
  get size(): number {
    return this.open.size;
  }

  /** Open connections per door. */
  openByDoor(): Map<string, number> {
    const by = new Map<string, number>();
    for (const e of this.open) by.set(e.door.name, (by.get(e.door.name) ?? 0) + 1);
    return by;
  }

  /**
   * Admits a connection a door's listener accepted, or closes it (undefined) when the budget is spent
   * for that door. Its head clock starts now.
   */
  admit(socket: Duplex & { bytesRead?: number }, door: DoorListener): Connection | undefined {
    const room = door.ingest ? this.limits.maxConnections : this.limits.maxConnections - this.reserve;
    if (this.open.size >= this.crowded) this.evict();
    if (this.open.size >= room) {
      this.refused.set(door.name, (this.refused.get(door.name) ?? 0) + 1);
      log.debug('connection refused: P_MAX_CONNECTIONS reached', { door: door.name, open: this.open.size, room });
      socket.destroy();
      return undefined;
    }
    const entry: Entry = {
      door,
      socket,
      since: Date.now(),
      headDone: false,
      ready: () => {
        entry.headDone = true;
        clearTimeout(head);
      },
    };
    this.open.add(entry);
    const head = setTimeout(() => {
      if (!entry.headDone) socket.destroy();
    }, this.limits.headersTimeoutMs);
    head.unref();
    socket.once('close', () => {
      clearTimeout(head);
      this.open.delete(entry);
    });
    return entry;
  }

  /**
   * Serves an HTTP server's connections from the budget. Its head is done at its first byte: from
   * there Node's `headersTimeout` bounds the request head, and keep-alive the idle time after it.
   */
  attachHttp(server: Server, door: DoorListener): void {
    this.httpServers.add(server);
    // Node's own cap never binds before the budget's; the budget refuses first.
    server.maxConnections = this.limits.maxConnections + 1;
    server.headersTimeout = this.limits.headersTimeoutMs;
    server.on('connection', (socket: Socket) => {
      const conn = this.admit(socket, door);
      if (conn) socket.once('data', () => conn.ready());
    });
    server.on('close', () => this.httpServers.delete(server));
  }

  /** /metrics: open and refused connections per door. */
  registerGauges(doors: string[]): void {
    stateGauge('lakehouse_connections_open', 'Open connections per front door, all taken from one budget (P_MAX_CONNECTIONS).', ['door'], () => {
      const by = this.openByDoor();
      return doors.map((door) => ({ labels: { door }, value: by.get(door) ?? 0 }));
    });
    stateGauge('lakehouse_connections_refused', 'Connections closed as they were accepted because the connection budget was spent, per front door, since start.', ['door'], () =>
      doors.map((door) => ({ labels: { door }, value: this.refused.get(door) ?? 0 })),
    );
  }

  /** Makes room: idle keep-alive HTTP connections, and connections of any door silent past the grace. */
  private evict(): void {
    for (const s of this.httpServers) s.closeIdleConnections();
    const now = Date.now();
    for (const e of this.open) {
      if (e.headDone || now - e.since <= HEAD_GRACE_MS) continue;
      // Counted out at once: its 'close' comes later, and the connection being admitted needs the room now.
      this.open.delete(e);
      e.socket.destroy();
    }
  }
}
