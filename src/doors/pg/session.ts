import { randomInt } from 'node:crypto';
import type * as net from 'node:net';
import * as tls from 'node:tls';
import { DomainError, isDomainError } from '../../errors.ts';
import { log } from '../../log.ts';
import type { PgType } from '../../query/results/pg.ts';
import { PG } from '../../query/results/pg.ts';
import type { QueryExecutor } from '../../query/sql/executor.ts';
import type { ApiKeys, Principal } from '../shared/auth.ts';
import { canAccess } from '../shared/auth.ts';
import type { DatasetSchema, Statement } from '../../query/catalog/catalogDb.ts';
import type { CatalogRequest } from '../../query/catalog/client.ts';
import { Framer, msg, parseStartup, ProtocolViolation, Reader, splitRows } from './messages.ts';
import { parameterLiteral } from './params.ts';
import { placeholderCount, replacePlaceholders, splitStatements, stripComments } from '../../query/catalog/sqlText.ts';
import { copyLines, copyOut, headerLine, type CopyOut } from './copy.ts';
import { invalidSqlstate, PgError, SQLSTATE } from './sqlstate.ts';
import { KeyState, SessionState, type SessionStateLimits } from './budget.ts';
import { sessionCommand, type SessionSettings } from './sessionCommands.ts';

/** What a session needs from the service. */
export interface SessionDeps {
  keys: ApiKeys;
  queries: QueryExecutor;
  /** The datasets a key may read, with their columns: all its catalog statements may see. */
  datasets: (principal: Principal) => DatasetSchema[];
  tls?: tls.SecureContext;
  requireTls: boolean;
  maxMessageBytes: number;
  idleTimeoutMs: number;
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

/** Rows of an answer under way: DataRow batches, pulled one at a time (the worker waits meanwhile). */
interface Cursor {
  /** Columns, or undefined for a statement that returns no rows (NoData). */
  fields?: { name: string; type: PgType; format: number }[];
  next: () => Promise<{ data: Buffer; rows: number } | undefined>;
  tag: (rows: number) => string;
  close: () => void;
  /** Stops the statement's work (a CancelRequest); the pending next() then throws. */
  cancel?: (reason: DomainError) => void;
}

interface Prepared {
  sql: string;
  /** What it counts against the session's and key's state bounds. */
  bytes: number;
  paramTypes: number[];
  /** Placeholders in the statement. */
  params: number;
  /** DuckDB types of the placeholders (for unspecified parameter types), learnt once. */
  inferred?: string[];
  /** The statement classified (and rewritten) once, with its placeholders; each Bind fills them in. */
  classified?: Statement;
}

interface Portal {
  statement: Statement;
  bytes: number;
  formats: number[];
  cursor?: Cursor;
  /** Rows fetched but not yet sent (a row limit cut a batch). */
  pending?: Buffer;
  pendingRows: number;
  sent: number;
}

export class QueryCancelled extends DomainError {
  constructor() {
    super('timeout', 'canceling statement due to user request');
  }
}

/**
 * One client connection: the protocol state machine (startup, TLS, password, simple and extended
 * query, session commands), on top of the framing in messages.ts. Messages are handled one at a
 * time; the socket is paused while one is, so a client cannot queue unbounded input, and a batch of
 * rows is pulled from the query worker only once the socket has taken the previous one.
 */
export class Session {
  private socket: net.Socket | tls.TLSSocket;
  private framer: Framer;
  private phase: 'startup' | 'password' | 'ready' | 'closed' = 'startup';
  private params = new Map<string, string>();
  private principal?: Principal;
  private statements = new Map<string, Prepared>();
  private portals = new Map<string, Portal>();
  private settings: SessionSettings;
  /** Prepared statements' and portals' share of the bounds (set at login, when the key is known). */
  private state?: SessionState;
  private txn: 'I' | 'T' | 'E' = 'I';
  /** After an error in the extended protocol, messages are skipped until Sync. */
  private skipping = false;
  private queue: { type: number; payload: Buffer }[] = [];
  private working = false;
  private pid = 0;
  /** The cursor being read, for CancelRequests. */
  private active?: { cancel: (reason: DomainError) => void };
  private cancelled = false;
  private tlsActive = false;

  constructor(
    socket: net.Socket,
    private readonly deps: SessionDeps,
  ) {
    this.socket = socket;
    this.framer = new Framer(deps.maxMessageBytes);
    this.settings = new Map();
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

  private onData(data: Buffer): void {
    if (this.phase === 'closed') return;
    this.armIdle();
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
    if (this.queue.length) {
      this.socket.pause();
      void this.drain();
    }
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

  private write(buf: Buffer): Promise<void> | undefined {
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

  private async login(password: string): Promise<void> {
    const principal = this.deps.keys.resolve(password);
    if (!principal) {
      this.fatal('28P01', `password authentication failed for user "${this.params.get('user')}" (the password is an API key)`);
      return;
    }
    if (principal.role === 'writer') {
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
  private catalogRequest(signal?: AbortSignal): CatalogRequest {
    return { principalId: this.principal!.id, datasets: this.deps.datasets(this.principal!), signal };
  }

  private closePortals(): void {
    for (const name of [...this.portals.keys()]) this.dropPortal(name);
  }

  private dropPortal(name: string): void {
    const p = this.portals.get(name);
    if (!p) return;
    p.cursor?.close();
    this.portals.delete(name);
    this.state?.give(p.bytes);
  }

  /** A parsed statement kept under its name, within the session's and key's bounds. */
  private keepStatement(name: string, sql: string, paramTypes: number[]): void {
    const size = Buffer.byteLength(sql);
    if (size > this.deps.maxSqlBytes) throw new PgError('too_large', `the statement is ${size} bytes; at most ${this.deps.maxSqlBytes} are accepted (P_QUERY_MAX_SQL_BYTES)`, '54000');
    if (splitStatements(sql).length > 1) throw new DomainError('invalid', 'cannot insert multiple commands into a prepared statement');
    // The unnamed statement is replaced by the next; its share is given back first.
    this.dropStatement(name);
    const bytes = SessionState.cost(sql);
    this.state!.take(bytes, 'prepare another');
    this.statements.set(name, { sql, bytes, paramTypes, params: Math.max(placeholderCount(sql), paramTypes.length) });
  }

  private dropStatement(name: string): void {
    const p = this.statements.get(name);
    if (!p) return;
    this.statements.delete(name);
    this.state?.give(p.bytes);
  }

  private async sendError(err: unknown): Promise<void> {
    if (this.txn === 'T') this.txn = 'E';
    let code = 'XX000';
    let text = 'internal error';
    if (err instanceof QueryCancelled) {
      code = '57014';
      text = err.message;
    } else if (isDomainError(err)) {
      code = err instanceof PgError ? err.sqlstate : /read-only/i.test(err.message) ? '25006' : err.kind === 'invalid' ? invalidSqlstate(err.message) : SQLSTATE[err.kind];
      text = err.message;
    } else {
      log.warn('pg: statement failed', { error: err as Error });
    }
    await this.write(msg.error('ERROR', code, text));
  }

  // ---- simple query ----

  private async simpleQuery(sql: string): Promise<void> {
    const statements = splitStatements(sql);
    if (!statements.length) await this.write(msg.emptyQuery());
    for (const text of statements) {
      try {
        const copy = copyOut(stripComments(text));
        if (copy) {
          await this.copyOutQuery(copy);
          continue;
        }
        const statement = await this.prepareStatement(text);
        const cursor = await this.open(statement, []);
        if (cursor.fields) await this.write(rowDescription(cursor.fields));
        await this.sendRows(cursor, 0);
      } catch (err) {
        await this.sendError(err);
        break;
      }
    }
    // A failed statement in an implicit transaction leaves the session idle.
    await this.write(msg.readyForQuery(this.txn));
  }

  /** `COPY (query) TO STDOUT`: the query's rows as COPY data (copy.ts). */
  private async copyOutQuery(copy: CopyOut): Promise<void> {
    const statement = await this.prepareStatement(copy.query);
    if (statement.kind === 'session') throw new DomainError('invalid', 'COPY needs a query');
    const cursor = await this.open(statement, []);
    const names = (cursor.fields ?? []).map((f) => f.name);
    await this.write(msg.copyOutResponse(names.length));
    if (copy.header) await this.write(msg.copyData(copy.csv ? headerLine(names) : `${names.join('\t')}\n`));
    let rows = 0;
    try {
      for (let batch = await cursor.next(); batch; batch = await cursor.next()) {
        rows += batch.rows;
        const wait = this.write(Buffer.concat(copyLines(batch.data, copy.csv).map((line) => msg.copyData(line))));
        if (wait) await wait;
      }
    } finally {
      cursor.close();
    }
    await this.write(Buffer.concat([msg.copyDone(), msg.commandComplete(`COPY ${rows}`)]));
  }

  // ---- extended query ----

  private async extended(c: string, r: Reader): Promise<void> {
    switch (c) {
      case 'P': {
        const name = r.cstring();
        const sql = r.cstring();
        const n = r.int16();
        if (n < 0) throw new ProtocolViolation('negative parameter type count');
        const paramTypes: number[] = [];
        for (let i = 0; i < n; i++) paramTypes.push(r.int32());
        r.end();
        if (name && this.statements.has(name)) throw new PgError('conflict', `prepared statement "${name}" already exists`, '42P05');
        this.keepStatement(name, sql, paramTypes);
        await this.write(msg.parseComplete());
        return;
      }
      case 'B': {
        const portal = r.cstring();
        const name = r.cstring();
        const nFormats = r.int16();
        if (nFormats < 0) throw new ProtocolViolation('negative format count');
        const formats: number[] = [];
        for (let i = 0; i < nFormats; i++) formats.push(r.int16());
        const nValues = r.int16();
        if (nValues < 0) throw new ProtocolViolation('negative parameter count');
        const values: (Buffer | null)[] = [];
        for (let i = 0; i < nValues; i++) {
          const len = r.int32();
          values.push(len === -1 ? null : r.bytes(len));
        }
        const nResult = r.int16();
        if (nResult < 0) throw new ProtocolViolation('negative result format count');
        const resultFormats: number[] = [];
        for (let i = 0; i < nResult; i++) resultFormats.push(r.int16());
        r.end();
        for (const f of [...formats, ...resultFormats]) if (f !== 0 && f !== 1) throw new ProtocolViolation(`invalid format code ${f}`);
        const prepared = this.statements.get(name);
        if (!prepared) throw new PgError('not_found', `prepared statement "${name}" does not exist`, '26000');
        if (values.length !== prepared.params) {
          throw new PgError('invalid', `bind message supplies ${values.length} parameters, but prepared statement "${name}" requires ${prepared.params}`, '08P01');
        }
        if (nFormats > 1 && nFormats !== values.length) throw new PgError('invalid', `bind message has ${nFormats} parameter formats but ${values.length} parameters`, '08P01');
        const needsInference = values.some((v, i) => v !== null && !(prepared.paramTypes[i] > 0));
        if (needsInference && !prepared.inferred) prepared.inferred = await this.deps.queries.catalog.describe(this.catalogRequest(), prepared.sql).then((d) => d.params, () => []);
        prepared.classified ??= await this.prepareStatement(prepared.sql);
        const template = prepared.classified;
        const sql = values.length
          ? replacePlaceholders(template.sql, (n) => {
              const i = n - 1;
              if (i < 0 || i >= values.length) throw new DomainError('invalid', `there is no parameter $${n}`);
              const format = nFormats === 0 ? 0 : nFormats === 1 ? formats[0] : formats[i];
              return boundLiteral(prepared, template, n, values[i], format);
            })
          : template.sql;
        this.dropPortal(portal);
        const bytes = SessionState.cost(sql);
        this.state!.take(bytes, 'bind another portal');
        this.portals.set(portal, { statement: { kind: template.kind, sql }, bytes, formats: resultFormats, pendingRows: 0, sent: 0 });
        await this.write(msg.bindComplete());
        return;
      }
      case 'D': {
        const kind = String.fromCharCode(r.byte());
        const name = r.cstring();
        r.end();
        if (kind === 'S') {
          const prepared = this.statements.get(name);
          if (!prepared) throw new PgError('not_found', `prepared statement "${name}" does not exist`, '26000');
          const described = await this.describeStatement(prepared);
          await this.write(Buffer.concat([msg.parameterDescription(described.params), described.fields ? rowDescription(described.fields) : msg.noData()]));
          return;
        }
        if (kind !== 'P') throw new ProtocolViolation(`invalid DESCRIBE message subtype '${kind}'`);
        const portal = this.portals.get(name);
        if (!portal) throw new PgError('not_found', `portal "${name}" does not exist`, '34000');
        portal.cursor ??= await this.open(portal.statement, portal.formats);
        await this.write(portal.cursor.fields ? rowDescription(portal.cursor.fields) : msg.noData());
        return;
      }
      case 'E': {
        const name = r.cstring();
        const maxRows = r.int32();
        r.end();
        const portal = this.portals.get(name);
        if (!portal) throw new PgError('not_found', `portal "${name}" does not exist`, '34000');
        portal.cursor ??= await this.open(portal.statement, portal.formats);
        await this.executePortal(portal, maxRows > 0 ? maxRows : 0);
        return;
      }
      case 'C': {
        const kind = String.fromCharCode(r.byte());
        const name = r.cstring();
        r.end();
        if (kind === 'S') this.dropStatement(name);
        else if (kind === 'P') this.dropPortal(name);
        else throw new ProtocolViolation(`invalid CLOSE message subtype '${kind}'`);
        await this.write(msg.closeComplete());
        return;
      }
    }
  }

  private async describeStatement(prepared: Prepared): Promise<{ params: number[]; fields?: { name: string; type: PgType; format: number }[] }> {
    const statement = await this.prepareStatement(prepared.sql);
    if (statement.kind === 'session') {
      const cmd = sessionCommand(statement.sql, this.settings, this.txn);
      return { params: [], fields: cmd.columns?.map((name) => ({ name, type: PG.text, format: 0 })) };
    }
    if (statement.kind === 'data') await this.deps.queries.plan(replacePlaceholders(statement.sql, () => 'NULL'));
    const d = await this.deps.queries.catalog.describe(this.catalogRequest(), statement.sql);
    prepared.inferred ??= d.params;
    const params = Array.from({ length: prepared.params }, (_, i) => (prepared.paramTypes[i] > 0 ? prepared.paramTypes[i] : (d.paramTypes[i] ?? PG.text).oid));
    return { params, fields: d.columns.length ? d.columns.map((c) => ({ name: c.name, type: c.type, format: 0 })) : undefined };
  }

  private async executePortal(portal: Portal, maxRows: number): Promise<void> {
    const cursor = portal.cursor!;
    await this.sendRows(cursor, maxRows, portal);
  }

  /**
   * Sends a cursor's rows (all, or up to `maxRows` for a portal, keeping the rest for the next
   * Execute), then CommandComplete or PortalSuspended.
   */
  private async sendRows(cursor: Cursor, maxRows: number, portal?: Portal): Promise<void> {
    let sent = 0;
    let total = portal?.sent ?? 0;
    try {
      for (;;) {
        let batch: { data: Buffer; rows: number } | undefined;
        if (portal?.pending) {
          batch = { data: portal.pending, rows: portal.pendingRows };
          portal.pending = undefined;
          portal.pendingRows = 0;
        } else {
          if (maxRows > 0 && sent >= maxRows) break;
          this.active = cursor.cancel ? { cancel: cursor.cancel } : undefined;
          batch = await cursor.next();
          this.active = undefined;
          if (this.cancelled) {
            this.cancelled = false;
            throw new QueryCancelled();
          }
        }
        if (!batch) {
          if (portal) portal.sent = total;
          await this.write(msg.commandComplete(cursor.tag(total)));
          return;
        }
        let { data, rows } = batch;
        if (maxRows > 0 && sent + rows > maxRows) {
          const [now, later] = splitRows(data, maxRows - sent);
          portal!.pending = later;
          portal!.pendingRows = rows - (maxRows - sent);
          data = now;
          rows = maxRows - sent;
        }
        sent += rows;
        total += rows;
        const wait = this.write(data);
        if (wait) await wait;
        if (maxRows > 0 && sent >= maxRows && portal) {
          // More may follow: the next Execute continues (a batch is never cut silently).
          portal.sent = total;
          await this.write(msg.portalSuspended());
          return;
        }
      }
      if (portal) portal.sent = total;
      await this.write(msg.portalSuspended());
    } catch (err) {
      this.active = undefined;
      this.cancelled = false;
      cursor.close();
      if (portal) for (const [k, p] of this.portals) if (p === portal) this.dropPortal(k);
      throw err;
    }
  }

  /** Classifies a statement: a session command, a catalog question, or a user statement on datasets. */
  private async prepareStatement(sql: string): Promise<Statement> {
    // At debug level every statement a client sends is logged: the way to capture a new client's
    // catalog queries for the replay test (test/unit/pgCatalog.test.ts).
    log.debug('pg: statement', { application: this.settings.get('application_name'), sql });
    if (sessionCommand.recognises(sql)) return { kind: 'session', sql };
    return this.deps.queries.catalog.classify(this.catalogRequest(), sql);
  }

  /** Runs a catalog statement on a query worker; a CancelRequest or the client leaving stops it. */
  private async openCatalog(sql: string, formats: number[]): Promise<Cursor> {
    const abort = new AbortController();
    const onClose = () => abort.abort();
    this.socket.once('close', onClose);
    this.active = { cancel: () => abort.abort() };
    try {
      return await catalogCursor(() => this.deps.queries.catalog.run(this.catalogRequest(abort.signal), sql, formats));
    } catch (err) {
      throw this.cancelled ? new QueryCancelled() : err;
    } finally {
      this.socket.off('close', onClose);
      this.active = undefined;
      this.cancelled = false;
    }
  }

  /** Starts a statement: its columns are known once this resolves. */
  private async open(statement: Statement, formats: number[]): Promise<Cursor> {
    if (this.txn === 'E' && !(statement.kind === 'session' && /^\s*(rollback|commit|end|abort)\b/i.test(statement.sql))) {
      throw new PgError('invalid', 'current transaction is aborted, commands ignored until end of transaction block', '25P02');
    }
    if (statement.kind === 'session') {
      const cmd = sessionCommand(statement.sql, this.settings, this.txn);
      this.txn = cmd.txn;
      for (const [k, v] of cmd.report ?? []) await this.write(msg.parameterStatus(k, v));
      let rows = cmd.rows ? [msg.dataRowText(cmd.rows)] : [];
      return {
        fields: cmd.columns?.map((name) => ({ name, type: PG.text, format: 0 })),
        next: async () => {
          const out = rows.length ? { data: Buffer.concat(rows), rows: rows.length } : undefined;
          rows = [];
          return out;
        },
        tag: () => cmd.tag,
        close: () => undefined,
      };
    }
    if (statement.kind === 'catalog') return this.openCatalog(statement.sql, formats);
    const principal = this.principal!;
    const range = await this.deps.queries.timeRange(statement.sql);
    // Cancellable from the start (a CancelRequest, or the client leaving, while the worker still plans
    // or computes its first batch); the query's worker is stopped either way.
    const abort = new AbortController();
    const onClose = () => abort.abort();
    this.socket.once('close', onClose);
    this.active = { cancel: () => abort.abort() };
    let answer;
    try {
      answer = await this.deps.queries.executePg(
        { sql: statement.sql, startMs: range.startMs, endMs: range.endMs, principalId: principal.id, canRead: (name) => canAccess(principal, name), signal: abort.signal },
        formats,
      );
    } catch (err) {
      this.socket.off('close', onClose);
      throw this.cancelled ? new QueryCancelled() : err;
    } finally {
      this.active = undefined;
      this.cancelled = false;
    }
    const iterator = answer.batches[Symbol.asyncIterator]();
    const format = (i: number) => (formats.length === 0 ? 0 : formats.length === 1 ? formats[0] : (formats[i] ?? 0));
    return {
      fields: answer.fields.map((name, i) => ({ name: name === 'count_star()' ? 'count' : name, type: answer.types[i], format: format(i) })),
      next: async () => {
        const n = await iterator.next();
        if (n.done) this.socket.off('close', onClose);
        return n.done ? undefined : n.value;
      },
      tag: (n) => `SELECT ${n}`,
      close: () => {
        this.socket.off('close', onClose);
        answer.cancel(new DomainError('invalid', 'the portal was closed'));
        void iterator.return?.();
      },
      cancel: (reason) => answer.cancel(reason),
    };
  }
}

/** A cursor over a catalog statement's answer, run whole on a query worker (cancellable meanwhile). */
async function catalogCursor(run: () => Promise<{ fields: Cursor['fields']; data: Buffer; rows: number }>): Promise<Cursor> {
  const answer = await run();
  let rest: { data: Buffer; rows: number } | undefined = answer.rows ? { data: answer.data, rows: answer.rows } : undefined;
  return {
    fields: answer.fields,
    next: async () => {
      const out = rest;
      rest = undefined;
      return out;
    },
    tag: (n) => `SELECT ${n}`,
    close: () => undefined,
  };
}

/** Parameter `$n` of a Bind as the literal that replaces it. */
function boundLiteral(prepared: Prepared, template: Statement, n: number, value: Buffer | null, format: number): string {
  const i = n - 1;
  const literal = parameterLiteral(value, format, prepared.paramTypes[i] ?? 0, prepared.inferred?.[i]);
  // A timestamptz compared with a nanosecond time column: its UTC wall-clock time (catalogRewrite.ts).
  const utc = value !== null && prepared.paramTypes[i] === PG.timestamptz.oid && template.utcParams?.includes(n);
  return utc ? `timezone('UTC', ${literal})` : literal;
}

function rowDescription(fields: { name: string; type: PgType; format: number }[]): Buffer {
  return msg.rowDescription(fields.map((f) => ({ name: f.name, oid: f.type.oid, size: f.type.size, format: f.format })));
}

/** Backend key data: a process-unique id and a random secret. */
export function newBackendKey(next: number): { pid: number; secret: number } {
  return { pid: next, secret: randomInt(1, 2 ** 31 - 1) };
}
