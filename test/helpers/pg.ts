import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { ANY_PORT, startServer, type TestServer } from './server.ts';

const run = promisify(execFile);

/** Where scripts/test-setup.d/45-postgres-clients.sh puts the PostgreSQL clients. */
export const PG_CLIENTS = path.join(process.env.LAKEHOUSE_TEST_CACHE ?? path.join(os.homedir(), '.cache/lakehouse-test'), 'pg-clients');

export interface PgTestServer extends TestServer {
  pgPort: number;
}

/** The real service with its PostgreSQL door on a free port (which it reports). */
export async function startPgServer(env: Record<string, string> = {}): Promise<PgTestServer> {
  const server = await startServer({ env: { P_PG_ADDR: ANY_PORT, ...env } });
  return { ...server, pgPort: server.pgPort! };
}

/** A client binary the setup script provides; fails loudly (never skips) when it is missing. */
export function requireTool(file: string, what: string): string {
  if (!fs.existsSync(file)) throw new Error(`${what} is missing at ${file}: run scripts/test-setup.d/45-postgres-clients.sh`);
  return file;
}

export function psqlPath(): string {
  for (const p of ['/usr/bin/psql', '/usr/local/bin/psql']) if (fs.existsSync(p)) return p;
  throw new Error('psql is missing: run scripts/test-setup.d/45-postgres-clients.sh (Debian postgresql-client)');
}

/** Runs psql with one command (-c), unaligned output; resolves stdout, rejects with stderr on failure. */
export async function psql(server: PgTestServer, command: string, opts: { password?: string; extra?: string[]; env?: Record<string, string> } = {}): Promise<string> {
  const running = run(psqlPath(), ['-X', '-h', '127.0.0.1', '-p', String(server.pgPort), '-U', 'anyone', '-d', 'anydb', '-v', 'ON_ERROR_STOP=1', ...(opts.extra ?? []), '-c', command], {
    env: { ...process.env, PGPASSWORD: opts.password ?? server.apiKey, PGCONNECT_TIMEOUT: '20', ...opts.env },
    timeout: 60_000,
  });
  // stdin at its end: psql 15.20 reads it after a refused `COPY … FROM STDIN`, and waited forever on an
  // open pipe (15.18 did not).
  running.child.stdin?.end();
  return (await running).stdout;
}
