import * as fs from 'node:fs';
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { log } from '../../log.ts';

/**
 * Bounds on TCP connections, which anyone who can reach the port can open without a key
 * (docs/security.md "Connections"):
 *
 * - at most `maxConnections` at once (Node drops any beyond), a number that leaves the process's other
 *   file descriptors to the WAL, flushes, query workers and S3;
 * - a connection that has sent no byte within `headersTimeoutMs` is closed. Node's own `headersTimeout`
 *   (set too) only covers a request head that has begun: a connection that never sends a byte would
 *   otherwise stay open until the client leaves;
 * - when nine tenths of the cap are in use, idle keep-alive connections are closed, and so are
 *   connections silent for over a second, so connections that sent one request (a 401 needs no key)
 *   and then wait, or that never speak, cannot hold the room either.
 */
export interface ConnectionLimits {
  maxConnections: number;
  headersTimeoutMs: number;
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

/** A connection may be accepted and not have written yet: silent this long, it is fair game when crowded. */
const SILENT_GRACE_MS = 1000;

export function limitConnections(server: Server, limits: ConnectionLimits): void {
  server.maxConnections = limits.maxConnections;
  // Node's checks of headersTimeout/requestTimeout run every connectionsCheckingInterval (a server
  // option set where the server is created); the head's own limit is the same short one.
  server.headersTimeout = limits.headersTimeoutMs;
  /** Open connections and when each was accepted. */
  const open = new Map<Socket, number>();
  const crowded = Math.max(1, Math.floor(limits.maxConnections * 0.9));
  server.on('connection', (socket: Socket) => {
    const now = Date.now();
    open.set(socket, now);
    const silent = setTimeout(() => {
      if (socket.bytesRead === 0) socket.destroy();
    }, limits.headersTimeoutMs);
    silent.unref();
    socket.once('close', () => {
      clearTimeout(silent);
      open.delete(socket);
    });
    if (open.size >= crowded) {
      server.closeIdleConnections();
      for (const [s, since] of open) if (s.bytesRead === 0 && now - since > SILENT_GRACE_MS) s.destroy();
    }
  });
  server.on('drop', () => log.debug('connection dropped: P_MAX_CONNECTIONS reached', { cap: limits.maxConnections }));
}
