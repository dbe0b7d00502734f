import { randomInt } from 'node:crypto';
import type * as net from 'node:net';
import * as tls from 'node:tls';
import { log } from '../../log.ts';
import { DomainError } from '../../errors.ts';
import type { PgQueries } from '../../query/sql/queries.ts';
import type { ApiKeys, Principal } from '../shared/auth.ts';
import type { DatasetSchema } from '../../query/catalog/catalogDb.ts';
import { Framer, msg, parseStartup, ProtocolViolation, Reader } from './messages.ts';
import { KeyState, SessionState, type SessionStateLimits } from './budget.ts';

import { QueryCancelled, SessionQueries } from './sessionQueries.ts';

export { QueryCancelled };

/** What a session needs from the service. */
export interface SessionDeps {
  keys: ApiKeys;
  queries: PgQueries;
  /** The datasets a key may read, with their columns: all its catalog statements may see. */
  datasets: (principal: Principal) => DatasetSchema[];
  tls?: tls.SecureContext;
  requireTls: boolean;
  maxMessageBytes: number;
  idleTimeoutMs: number;
  /** The slow-message bound (the door contract): P_INGEST_BODY_TIMEOUT's grace, then P_INGEST_MIN_BODY_RATE (bytes/s). */
  slowMessage: { bodyTimeoutMs: number; minBodyRate: number };
  /** Longest statement a Parse may carry (P_QUERY_MAX_SQL_BYTES): refused before it is kept. */
  maxSqlBytes: number;
  /** Bounds on prepared statements and portals, per session and (over its sessions) per key. */
  stateLimits: SessionStateLimits;
  keyState: KeyState;
  /** Registers the session for CancelRequests; returns its key data. */
  register: (session: Session) => { pid: number; secret: number };
  unregister: (pid: number) => void;
  cancel: (pid: number, secret: number) => void;
}


/**
 * One client connection: the protocol state machine (startup, TLS, password, simple and extended
 * query, session commands), on top of the framing in messages.ts. Messages are handled one at a
 * time; the socket is paused while one is, so a client cannot queue unbounded input, and a batch of
 * rows is pulled from the query worker only once the socket has taken the previous one.
 */
export class Session extends SessionQueries {
  protected socket: net.Socket | tls.TLSSocket;
  private framer: Framer;
  private phase: 'startup' | 'password' | 'ready' | 'closed' = 'startup';
  private params = new Map<string, string>();
  private queue: { type: number; payload: Buffer }[] = [];
  private working = false;
  private pid = 0;
  private tlsActive = false;

  constructor(
    socket: net.Socket,
    protected readonly deps: SessionDeps,
  ) {
    super();
    this.socket = socket;
    this.framer = new Framer(deps.maxMessageBytes);
    this.attach(socket);
    this.armIdle();
  }

  private idleTimer?: NodeJS.Timeout;

  /**
   * (Re)starts the idle clock: a connection with no statement running for P_PG_IDLE_TIMEOUT is closed.
   * Restarted on every message and when a statement ends; a statement running is never idle.
   */
  private armIdle(): void {
    clearTimeout(this.idleTimer);
    if (this.phase === 'closed') return;
    this.idleTimer = setTimeout(() => {
      if (this.working) this.armIdle();
      else this.fatal('57P05', 'terminating connection due to idle timeout');
    }, this.deps.idleTimeoutMs);
  }

  private attach(socket: net.Socket | tls.TLSSocket): void {
    socket.on('data', (d: Buffer) => this.onData(d));
    socket.on('error', () => this.closeAll());
    socket.on('close', () => this.closeAll());
  }

  private messageStarted = 0;
  private messageTimer?: NodeJS.Timeout;

  /**
   * The slow-message bound (docs/security.md, the door contract): a message begun must arrive within
   * P_INGEST_BODY_TIMEOUT plus its bytes so far at P_INGEST_MIN_BODY_RATE, or the session ends. The idle
   * clock alone restarts on every byte, so a client trickling one byte at a time held its session (and
   * its buffered bytes) forever. Only the client's time counts: no clock while a statement runs (the
   * socket is paused then) or between messages.
   */
  private watchMessage(completed: boolean): void {
    if (completed || this.working || this.phase === 'closed' || this.framer.buffered === 0) {
      clearTimeout(this.messageTimer);
      this.messageTimer = undefined;
      this.messageStarted = 0;
      if (this.working || this.phase === 'closed' || this.framer.buffered === 0) return;
    }
    if (this.messageStarted) return;
    this.messageStarted = Date.now();
    const { bodyTimeoutMs, minBodyRate } = this.deps.slowMessage;
    const check = () => {
      this.messageTimer = undefined;
      if (this.phase === 'closed' || this.working || this.framer.buffered === 0) {
        // Restarted when the statement ends (drain) or the next bytes arrive.
        this.messageStarted = 0;
        return;
      }
      const due = this.messageStarted + bodyTimeoutMs + (this.framer.buffered / minBodyRate) * 1000;
      if (Date.now() < due) {
        this.messageTimer = setTimeout(check, due - Date.now());
        return;
      }
      const spent = Date.now() - this.messageStarted;
      this.fatal('08P01', `the message arrived too slowly (${this.framer.buffered} bytes in ${spent} ms; P_INGEST_MIN_BODY_RATE after P_INGEST_BODY_TIMEOUT)`);
    };
    this.messageTimer = setTimeout(check, bodyTimeoutMs);
  }

  private onData(data: Buffer): void {
    if (this.phase === 'closed') return;
    this.armIdle();
    const queued = this.queue.length;
    try {
      this.framer.push(data);
      for (;;) {
        if (this.phase === 'startup') {
          const packet = this.framer.nextStartup();
          if (!packet) break;
          this.onStartup(parseStartup(packet));
          if (this.phase !== 'startup') continue;
          // An SSLRequest answered with S: the TLS handshake follows, not more plaintext.
          if (this.tlsActive) break;
          continue;
        }
        const m = this.framer.next();
        if (!m) break;
        this.queue.push(m);
      }
    } catch (err) {
      this.protocolError(err);
      return;
    }
    const completed = this.queue.length > queued;
    if (this.queue.length) {
      this.socket.pause();
      void this.drain();
    }
    this.watchMessage(completed);
  }

  private protocolError(err: unknown): void {
    if (err instanceof ProtocolViolation) this.fatal(err.code, err.message);
    else this.fatal('08P01', (err as Error).message);
  }

  private onStartup(p: ReturnType<typeof parseStartup>): void {
    switch (p.kind) {
      case 'ssl':
        if (!this.deps.tls || this.tlsActive) {
          this.socket.write('N');
          return;
        }
        // Bytes after the SSLRequest and before the handshake would be plaintext injected into the
        // encrypted session (CVE-2021-23214): refuse them.
        if (this.framer.buffered > 0) throw new ProtocolViolation('received unencrypted data after SSL request');
        this.socket.write('S');
        this.startTls();
        return;
      case 'gssenc':
        this.socket.write('N');
        return;
      case 'cancel':
        this.deps.cancel(p.pid, p.secret);
        this.phase = 'closed';
        this.socket.end();
        return;
      case 'startup':
        if (this.refuse) {
          this.fatal('53300', this.refuse);
          return;
        }
        this.params = p.params;
        if (!p.params.get('user')) throw new ProtocolViolation('no PostgreSQL user name specified in startup packet', '28000');
        if (this.deps.requireTls && !this.tlsActive) {
          this.fatal('28000', 'passwords are accepted only over TLS on this server (P_PG_REQUIRE_TLS): connect with sslmode=require');
          return;
        }
        for (const [k, v] of p.params) if (k !== 'user' && k !== 'database' && k !== 'options' && k !== 'replication') this.settings.set(k.toLowerCase(), v);
        this.phase = 'password';
        this.socket.write(msg.authCleartext());
    }
  }

  private startTls(): void {
    const plain = this.socket as net.Socket;
    this.tlsActive = true;
    plain.removeAllListeners('data');
    const secure = new tls.TLSSocket(plain, { isServer: true, secureContext: this.deps.tls });
    this.socket = secure;
    this.attach(secure);
  }

  protected write(buf: Buffer): Promise<void> | undefined {
    if (this.phase === 'closed' || this.socket.destroyed) return undefined;
    if (this.socket.write(buf)) return undefined;
    return new Promise<void>((resolve) => {
      const done = () => {
        this.socket.off('drain', done);
        this.socket.off('close', done);
        resolve();
      };
      this.socket.on('drain', done);
      this.socket.on('close', done);
    });
  }

  private fatal(code: string, message: string): void {
    if (this.phase === 'closed') return;
    this.socket.write(msg.error('FATAL', code, message));
    this.phase = 'closed';
    this.socket.end();
    this.closeAll();
  }

  private closeAll(): void {
    this.phase = 'closed';
    clearTimeout(this.idleTimer);
    clearTimeout(this.messageTimer);
    for (const p of this.portals.values()) p.cursor?.close();
    this.portals.clear();
    this.statements.clear();
    this.state?.close();
    if (this.pid) this.deps.unregister(this.pid);
    this.pid = 0;
    if (!this.socket.destroyed) this.socket.destroy();
  }

  /** Called for a CancelRequest naming this session. */
  cancel(): void {
    if (!this.active) return;
    this.cancelled = true;
    this.active.cancel(new QueryCancelled());
  }

  /** Set for a connection past the connection limit: refused once its startup packet arrives. */
  refuse?: string;

  private async drain(): Promise<void> {
    if (this.working) return;
    this.working = true;
    try {
      while (this.queue.length && this.phase !== 'closed') {
        const m = this.queue.shift()!;
        try {
          await this.handle(m.type, m.payload);
        } catch (err) {
          if (err instanceof ProtocolViolation) {
            this.protocolError(err);
            return;
          }
          log.warn('pg: unexpected error', { error: err as Error });
          this.fatal('XX000', 'internal error');
          return;
        }
      }
    } finally {
      this.working = false;
    }
    this.armIdle();
    if (this.phase !== 'closed') this.socket.resume();
    this.watchMessage(false);
  }

  private async handle(type: number, payload: Buffer): Promise<void> {
    const r = new Reader(payload);
    if (this.phase === 'password') {
      if (type !== 0x70) throw new ProtocolViolation(`expected a password message, got '${String.fromCharCode(type)}'`);
      const password = r.cstring();
      r.end();
      await this.login(password);
      return;
    }
    const c = String.fromCharCode(type);
    if (c === 'X') {
      this.phase = 'closed';
      this.socket.end();
      this.closeAll();
      return;
    }
    // A role change, user deletion or key revocation applies from the session's next statement.
    if ((c === 'Q' || c === 'P' || c === 'B') && !this.skipping && !this.rechecked()) return;
    if (c === 'Q') {
      const sql = r.cstring();
      r.end();
      await this.simpleQuery(sql);
      return;
    }
    if (c === 'S') {
      r.end();
      this.skipping = false;
      // Outside a transaction block, Sync ends the implicit one: its portals go (and their workers).
      if (this.txn === 'I') this.closePortals();
      await this.write(msg.readyForQuery(this.txn));
      return;
    }
    if (c === 'H') {
      r.end();
      return;
    }
    if (!'PBDECd'.includes(c) || c === 'd') {
      throw new ProtocolViolation(`invalid frontend message type '${c}' (${type})`);
    }
    if (this.skipping) return;
    try {
      await this.extended(c, r);
    } catch (err) {
      if (err instanceof ProtocolViolation) throw err;
      this.skipping = true;
      await this.sendError(err);
    }
  }

  /** The principal as the access state now has it; a user deleted (or a key revoked) ends the session. */
  private rechecked(): boolean {
    try {
      this.principal = this.deps.keys.refresh(this.principal!);
      return true;
    } catch (err) {
      this.fatal('28000', (err as Error).message);
      return false;
    }
  }

  private async login(password: string): Promise<void> {
    const user = this.params.get('user');
    let principal;
    try {
      principal = await this.deps.keys.signIn({ user, secret: password }, this.socket.remoteAddress);
    } catch (err) {
      const limited = err instanceof DomainError && err.kind === 'too_many_requests';
      // 53300 too_many_connections is the closest class PostgreSQL clients know for a refusal to retry later.
      this.fatal(limited ? '53300' : '28P01', limited ? err.message : `password authentication failed for user "${user}" (the password is the user's password or an API key)`);
      return;
    }
    if (!principal.user && principal.role === 'writer') {
      this.fatal('28000', 'a writer key may not read: connect with a reader or admin API key');
      return;
    }
    this.principal = principal;
    this.state = new SessionState(this.deps.stateLimits, this.deps.keyState, principal.id);
    const key = this.deps.register(this);
    this.pid = key.pid;
    this.phase = 'ready';
    const out = [msg.authOk()];
    const status: [string, string][] = [
      ['server_version', '15.0'],
      ['server_encoding', 'UTF8'],
      ['client_encoding', 'UTF8'],
      ['DateStyle', 'ISO, MDY'],
      ['IntervalStyle', 'postgres'],
      ['TimeZone', 'UTC'],
      ['integer_datetimes', 'on'],
      ['standard_conforming_strings', 'on'],
      ['is_superuser', 'off'],
      ['default_transaction_read_only', 'on'],
      ['in_hot_standby', 'off'],
      ['session_authorization', this.params.get('user') ?? ''],
      ['application_name', this.params.get('application_name') ?? ''],
    ];
    for (const [k, v] of status) out.push(msg.parameterStatus(k, v));
    out.push(msg.backendKeyData(key.pid, key.secret), msg.readyForQuery('I'));
    await this.write(Buffer.concat(out));
  }

  /** A catalog job of this session's key (run on a query worker: query/catalog/client.ts). */
}

/** Backend key data: a process-unique id and a random secret. */
export function newBackendKey(next: number): { pid: number; secret: number } {
  return { pid: next, secret: randomInt(1, 2 ** 31 - 1) };
}
