import { DomainError } from '../../errors.ts';
import { stripComments } from '../../query/catalog/sqlText.ts';
import { FIXED } from '../../query/catalog/settings.ts';

/**
 * Session and transaction statements, answered as a read-only PostgreSQL server would: BEGIN, COMMIT,
 * ROLLBACK, SAVEPOINT and RELEASE only move the transaction status (there is nothing to commit);
 * SET and RESET keep the value for SHOW; SHOW answers from them or from the server's fixed settings.
 * Statements that would write are refused (by the sandbox, with SQLSTATE 25006).
 */

export type SessionSettings = Map<string, string>;

export interface SessionAnswer {
  tag: string;
  txn: 'I' | 'T' | 'E';
  /** One text row (SHOW). */
  columns?: string[];
  rows?: (string | null)[];
  /** ParameterStatus messages to send (a reported setting changed). */
  report?: [string, string][];
}

/** Settings PostgreSQL reports to the client with ParameterStatus when they change. */
const REPORTED: Record<string, string> = { application_name: 'application_name', datestyle: 'DateStyle', intervalstyle: 'IntervalStyle', timezone: 'TimeZone', extra_float_digits: 'extra_float_digits' };

const KEYWORD = /^\s*(begin|start\s+transaction|commit|end|abort|rollback|savepoint|release|set|reset|show|discard|deallocate|unlisten|listen)\b/i;

function unquote(v: string): string {
  const t = v.trim();
  if (/^'.*'$/s.test(t)) return t.slice(1, -1).replaceAll("''", "'");
  if (/^".*"$/s.test(t)) return t.slice(1, -1);
  return t;
}

type Txn = 'I' | 'T' | 'E';

/** Transaction control: PostgreSQL's tags and the transaction state after each (nothing is written here). */
function transactionCommand(word: string, rest: string, txn: Txn): SessionAnswer | undefined {
  switch (word) {
    case 'begin':
    case 'start transaction':
      return { tag: 'BEGIN', txn: txn === 'I' ? 'T' : txn };
    case 'commit':
    case 'end':
      // COMMIT of a failed transaction is a rollback, as PostgreSQL reports it.
      return { tag: txn === 'E' ? 'ROLLBACK' : 'COMMIT', txn: 'I' };
    case 'abort':
      return { tag: 'ROLLBACK', txn: 'I' };
    case 'rollback':
      if (/^(work\s+|transaction\s+)?to\b/i.test(rest)) return { tag: 'ROLLBACK', txn: txn === 'E' ? 'T' : txn };
      return { tag: 'ROLLBACK', txn: 'I' };
    case 'savepoint':
      return { tag: 'SAVEPOINT', txn };
    case 'release':
      return { tag: 'RELEASE', txn };
    default:
      return undefined;
  }
}

/** SET [SESSION | LOCAL] name {TO | =} value | SET TIME ZONE value | SET TRANSACTION … | SET SESSION CHARACTERISTICS … */
function setCommand(text: string, rest: string, settings: SessionSettings, txn: Txn): SessionAnswer {
  const body = rest.replace(/^(session|local)\s+/i, '');
  if (/^(transaction|characteristics|session\s+characteristics)\b/i.test(body)) {
    if (/read\s+write/i.test(body)) throw new DomainError('invalid', 'cannot set transaction read-write mode: this server is read-only');
    return { tag: 'SET', txn };
  }
  let name: string;
  let value: string;
  const tz = /^time\s+zone\s+(.+)$/i.exec(body);
  if (tz) [name, value] = ['timezone', unquote(tz[1])];
  else {
    const m = /^("[^"]+"|[\w.]+)\s*(?:=|\bto\b)\s*(.*)$/is.exec(body);
    if (!m) throw new DomainError('invalid', `syntax error in SET: ${text.slice(0, 80)}`);
    name = unquote(m[1]).toLowerCase();
    value = m[2]
      .split(/,(?=(?:[^']*'[^']*')*[^']*$)/)
      .map(unquote)
      .join(', ');
  }
  if (/^default$/i.test(value)) settings.delete(name);
  else settings.set(name, value);
  if (name === 'client_encoding' && !/^(utf-?8|unicode)$/i.test(value)) throw new DomainError('unsupported', `client_encoding "${value}" is not supported: this server speaks UTF8 only`);
  const reported = REPORTED[name];
  return { tag: 'SET', txn, report: reported ? [[reported, settings.get(name) ?? FIXED[name] ?? '']] : undefined };
}

function showCommand(rest: string, settings: SessionSettings, txn: Txn): SessionAnswer {
  // PostgreSQL's spelled-out forms of two settings.
  const spelled: Record<string, string> = { 'transaction isolation level': 'transaction_isolation', 'time zone': 'timezone' };
  const asked = unquote(rest).toLowerCase().replace(/\s+/g, ' ');
  const name = spelled[asked] ?? asked;
  if (name === 'all') throw new DomainError('unsupported', 'SHOW ALL is not supported; SHOW a setting by name');
  const value = settings.get(name) ?? FIXED[name];
  if (value === undefined) throw new DomainError('not_found', `unrecognized configuration parameter "${name}"`);
  return { tag: 'SHOW', txn, columns: [spelled[asked] ? asked.replaceAll(' ', '_') : name], rows: [value] };
}

export function sessionCommand(sql: string, settings: SessionSettings, txn: Txn): SessionAnswer {
  const text = stripComments(sql).trim().replace(/;\s*$/, '');
  const word = (KEYWORD.exec(text)?.[1] ?? '').toLowerCase().replace(/\s+/g, ' ');
  const rest = text.slice(KEYWORD.exec(text)?.[0].length ?? 0).trim();
  const transaction = transactionCommand(word, rest, txn);
  if (transaction) return transaction;
  switch (word) {
    case 'discard':
      settings.clear();
      return { tag: `DISCARD ${rest.toUpperCase() || 'ALL'}`, txn };
    case 'deallocate':
      return { tag: 'DEALLOCATE', txn };
    case 'listen':
    case 'unlisten':
      return { tag: word.toUpperCase(), txn };
    case 'reset': {
      const name = rest.toLowerCase();
      if (name === 'all') settings.clear();
      else settings.delete(name);
      return { tag: 'RESET', txn };
    }
    case 'set':
      return setCommand(text, rest, settings, txn);
    case 'show':
      return showCommand(rest, settings, txn);
    default:
      throw new DomainError('invalid', 'not a session statement');
  }
}

/** Is the statement one of the above (by its first keyword)? */
sessionCommand.recognises = (sql: string): boolean => KEYWORD.test(stripComments(sql));
