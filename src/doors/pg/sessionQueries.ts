import type * as net from 'node:net';
import * as tls from 'node:tls';
import { DomainError, isDomainError } from '../../errors.ts';
import { log } from '../../log.ts';
import type { PgType } from '../../query/results/pgTypes.ts';
import { PG } from '../../query/results/pgTypes.ts';
import type { Principal } from '../shared/auth.ts';
import { canAccess } from '../shared/auth.ts';
import type { Statement } from '../../query/catalog/catalogDb.ts';
import type { CatalogRequest } from '../../query/catalog/client.ts';
import { msg, ProtocolViolation, readBind, readParse, Reader, splitRows } from './messages.ts';
import { boundParam, withoutGaps } from './params.ts';
import type { BoundParam } from '../../query/sql/boundParams.ts';
import { splitStatements, stripComments } from '../../query/catalog/sqlText.ts';
import { copyLines, copyOut, headerLine, type CopyOut } from './copy.ts';
import { invalidSqlstate, PgError, SQLSTATE } from './sqlstate.ts';
import { SessionState } from './budget.ts';
import { sessionCommand, type SessionSettings } from './sessionCommands.ts';

import type { SessionDeps } from './session.ts';
import { catalogCursor, rowDescription, withLiterals, type Cursor, type Portal, type Prepared } from './statements.ts';

export class QueryCancelled extends DomainError {
  constructor() {
    super('timeout', 'canceling statement due to user request');
  }
}

/** The query side of a session: statements, portals, simple and extended query, COPY out. */
export abstract class SessionQueries {
  protected principal?: Principal;
  protected statements = new Map<string, Prepared>();
  protected portals = new Map<string, Portal>();
  protected settings: SessionSettings = new Map();
  /** Prepared statements' and portals' share of the bounds (set at login, when the key is known). */
  protected state?: SessionState;
  protected txn: 'I' | 'T' | 'E' = 'I';
  /** After an error in the extended protocol, messages are skipped until Sync. */
  protected skipping = false;
  /** The cursor being read, for CancelRequests. */
  protected active?: { cancel: (reason: DomainError) => void };
  protected cancelled = false;
  protected abstract readonly deps: SessionDeps;
  protected abstract socket: net.Socket | tls.TLSSocket;

  /** Writes to the client; a promise when the socket wants the writer to wait. */
  protected abstract write(buf: Buffer): Promise<void> | undefined;

  protected catalogRequest(signal?: AbortSignal): CatalogRequest {
    return { principalId: this.principal!.id, datasets: this.deps.datasets(this.principal!), signal };
  }

  protected closePortals(): void {
    for (const name of [...this.portals.keys()]) this.dropPortal(name);
  }

  protected dropPortal(name: string): void {
    const p = this.portals.get(name);
    if (!p) return;
    p.cursor?.close();
    this.portals.delete(name);
    this.state?.give(p.bytes);
  }

  /** A parsed statement kept under its name, within the session's and key's bounds. */
  protected keepStatement(name: string, sql: string, paramTypes: number[]): void {
    const size = Buffer.byteLength(sql);
    if (size > this.deps.maxSqlBytes) throw new PgError('too_large', `the statement is ${size} bytes; at most ${this.deps.maxSqlBytes} are accepted (P_QUERY_MAX_SQL_BYTES)`, '54000');
    if (splitStatements(sql).length > 1) throw new DomainError('invalid', 'cannot insert multiple commands into a prepared statement');
    // The unnamed statement is replaced by the next; its share is given back first.
    this.dropStatement(name);
    const bytes = SessionState.cost(sql);
    this.state!.take(bytes, 'prepare another');
    const dense = withoutGaps(sql, paramTypes);
    this.statements.set(name, { sql: dense.sql, bytes, paramTypes, params: Math.max(dense.highest, paramTypes.length), ...(dense.positions ? { positions: dense.positions } : {}) });
  }

  protected dropStatement(name: string): void {
    const p = this.statements.get(name);
    if (!p) return;
    this.statements.delete(name);
    this.state?.give(p.bytes);
  }

  protected async sendError(err: unknown): Promise<void> {
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

  protected async simpleQuery(sql: string): Promise<void> {
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
  protected async copyOutQuery(copy: CopyOut): Promise<void> {
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

  protected async extended(c: string, r: Reader): Promise<void> {
    if (c === 'P') return this.parse(readParse(r));
    if (c === 'B') return this.bind(readBind(r));
    if (c === 'D') return this.describe(String.fromCharCode(r.byte()), r.cstring(), r);
    if (c === 'E') return this.execute(r.cstring(), r.int32(), r);
    if (c === 'C') return this.close(String.fromCharCode(r.byte()), r.cstring(), r);
  }

  private async parse({ name, sql, paramTypes }: ReturnType<typeof readParse>): Promise<void> {
    if (name && this.statements.has(name)) throw new PgError('conflict', `prepared statement "${name}" already exists`, '42P05');
    this.keepStatement(name, sql, paramTypes);
    await this.write(msg.parseComplete());
  }

  private async bind({ portal, name, formats, values, resultFormats }: ReturnType<typeof readBind>): Promise<void> {
    const prepared = this.statements.get(name);
    if (!prepared) throw new PgError('not_found', `prepared statement "${name}" does not exist`, '26000');
    if (values.length !== prepared.params) {
      throw new PgError('invalid', `bind message supplies ${values.length} parameters, but prepared statement "${name}" requires ${prepared.params}`, '08P01');
    }
    const nFormats = formats.length;
    if (nFormats > 1 && nFormats !== values.length) throw new PgError('invalid', `bind message has ${nFormats} parameter formats but ${values.length} parameters`, '08P01');
    const format = (i: number) => (nFormats === 0 ? 0 : nFormats === 1 ? formats[0] : formats[i]);
    prepared.classified ??= await this.prepareStatement(prepared.sql);
    const template = prepared.classified;
    // A data or catalog statement runs as the template classified (and, for data, checked by the
    // sandbox) once, its values bound by DuckDB (issue 35: one parse, and a value never reaches a parser
    // as SQL). A session command, which the door reads itself (no parser), gets literals.
    const positions = prepared.positions ?? values.map((_, i) => i + 1);
    const params = template.kind !== 'session' && values.length ? positions.map((n, k) => boundParam(values[n - 1], format(n - 1), prepared.paramTypes[n - 1] ?? 0, template.utcParams?.includes(k + 1))) : undefined;
    const sql = params || !values.length ? template.sql : withLiterals(prepared, values, format);
    this.dropPortal(portal);
    const bytes = SessionState.cost(sql) + (params ?? []).reduce((n, p) => n + 2 * (p?.text.length ?? 0) + 16, 0);
    this.state!.take(bytes, 'bind another portal');
    this.portals.set(portal, { statement: { kind: template.kind, sql }, ...(params ? { params } : {}), bytes, formats: resultFormats, pendingRows: 0, sent: 0 });
    await this.write(msg.bindComplete());
  }

  private async describe(kind: string, name: string, r: Reader): Promise<void> {
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
    portal.cursor ??= await this.open(portal.statement, portal.formats, portal.params);
    await this.write(portal.cursor.fields ? rowDescription(portal.cursor.fields) : msg.noData());
  }

  private async execute(name: string, maxRows: number, r: Reader): Promise<void> {
    r.end();
    const portal = this.portals.get(name);
    if (!portal) throw new PgError('not_found', `portal "${name}" does not exist`, '34000');
    portal.cursor ??= await this.open(portal.statement, portal.formats, portal.params);
    await this.executePortal(portal, maxRows > 0 ? maxRows : 0);
  }

  private async close(kind: string, name: string, r: Reader): Promise<void> {
    r.end();
    if (kind === 'S') this.dropStatement(name);
    else if (kind === 'P') this.dropPortal(name);
    else throw new ProtocolViolation(`invalid CLOSE message subtype '${kind}'`);
    await this.write(msg.closeComplete());
  }

  protected async describeStatement(prepared: Prepared): Promise<{ params: number[]; fields?: { name: string; type: PgType; format: number }[] }> {
    const statement = await this.prepareStatement(prepared.sql);
    if (statement.kind === 'session') {
      const cmd = sessionCommand(statement.sql, this.settings, this.txn);
      return { params: [], fields: cmd.columns?.map((name) => ({ name, type: PG.text, format: 0 })) };
    }
    // The sandbox checks the template from its kept tree (placeholders and all): no parse of a new text.
    if (statement.kind === 'data') await this.deps.queries.plan(statement.sql);
    const d = await this.deps.queries.catalog.describe(this.catalogRequest(), statement.sql);
    // A renumbered statement's placeholder k is parameter positions[k] (an undeclared skipped one was refused at Parse).
    const described = (i: number) => d.paramTypes[prepared.positions ? prepared.positions.indexOf(i + 1) : i];
    const params = Array.from({ length: prepared.params }, (_, i) => (prepared.paramTypes[i] > 0 ? prepared.paramTypes[i] : (described(i) ?? PG.text).oid));
    return { params, fields: d.columns.length ? d.columns.map((c) => ({ name: c.name, type: c.type, format: 0 })) : undefined };
  }

  protected async executePortal(portal: Portal, maxRows: number): Promise<void> {
    const cursor = portal.cursor!;
    await this.sendRows(cursor, maxRows, portal);
  }

  /**
   * Sends a cursor's rows (all, or up to `maxRows` for a portal, keeping the rest for the next
   * Execute), then CommandComplete or PortalSuspended.
   */
  protected async sendRows(cursor: Cursor, maxRows: number, portal?: Portal): Promise<void> {
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
  protected async prepareStatement(sql: string): Promise<Statement> {
    // At debug level every statement a client sends is logged: the way to capture a new client's
    // catalog queries for the replay test (test/unit/pgCatalog.test.ts).
    log.debug('pg: statement', { application: this.settings.get('application_name'), sql });
    if (sessionCommand.recognises(sql)) return { kind: 'session', sql };
    return this.deps.queries.catalog.classify(this.catalogRequest(), sql);
  }

  /** Runs a catalog statement on a query worker; a CancelRequest or the client leaving stops it. */
  protected async openCatalog(sql: string, formats: number[], params?: BoundParam[]): Promise<Cursor> {
    const abort = new AbortController();
    const onClose = () => abort.abort();
    this.socket.once('close', onClose);
    this.active = { cancel: () => abort.abort() };
    try {
      return await catalogCursor(() => this.deps.queries.catalog.run(this.catalogRequest(abort.signal), sql, formats, params));
    } catch (err) {
      throw this.cancelled ? new QueryCancelled() : err;
    } finally {
      this.socket.off('close', onClose);
      this.active = undefined;
      this.cancelled = false;
    }
  }

  /** Starts a statement: its columns are known once this resolves. */
  protected async open(statement: Statement, formats: number[], params?: BoundParam[]): Promise<Cursor> {
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
    if (statement.kind === 'catalog') return this.openCatalog(statement.sql, formats, params);
    const principal = this.principal!;
    const range = await this.deps.queries.timeRange(statement.sql, params);
    // Cancellable from the start (a CancelRequest, or the client leaving, while the worker still plans
    // or computes its first batch); the query's worker is stopped either way.
    const abort = new AbortController();
    const onClose = () => abort.abort();
    this.socket.once('close', onClose);
    this.active = { cancel: () => abort.abort() };
    let answer;
    try {
      answer = await this.deps.queries.executePg(
        { sql: statement.sql, startMs: range.startMs, endMs: range.endMs, principalId: principal.id, canRead: (name) => canAccess(principal, name), signal: abort.signal, ...(params ? { params } : {}) },
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
