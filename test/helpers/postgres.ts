import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Where Debian's postgresql-15 (scripts/test-setup.d/44-postgresql-server.sh) puts the server's programs. */
const PG_BIN = '/usr/lib/postgresql/15/bin';

export interface ReferencePostgres {
  /** The Unix socket directory (libpq's and node-postgres' `host`). */
  socketDir: string;
  /** A TCP port on 127.0.0.1 forwarded to the socket, for clients that speak only TCP (pgjdbc). */
  tcpPort: number;
  /** Runs SQL as the superuser through psql (setup statements), in `database` (default postgres). */
  psql(sql: string, database?: string): Promise<string>;
  stop(): Promise<void>;
}

/** Runs a server program as the `postgres` user (initdb and the server refuse root). */
function asPostgres(program: string, args: string[]): Promise<{ stdout: string }> {
  const argv = process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', path.join(PG_BIN, program), ...args]] as const : [path.join(PG_BIN, program), args] as const;
  return run(argv[0], [...argv[1]], { timeout: 60_000 });
}

/**
 * A real PostgreSQL 15 in a temp dir, listening on a Unix socket only (no TCP port of its own, so
 * nothing to pick or collide with); a forwarder bound to port 0 gives TCP-only clients a way in.
 */
export async function startReferencePostgres(): Promise<ReferencePostgres> {
  if (!fs.existsSync(path.join(PG_BIN, 'postgres'))) throw new Error(`PostgreSQL 15 is missing at ${PG_BIN}: run scripts/test-setup.d/44-postgresql-server.sh`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pg15-'));
  fs.chmodSync(dir, 0o755);
  if (process.getuid?.() === 0) await run('chown', ['postgres', dir]);
  await asPostgres('initdb', ['-D', `${dir}/data`, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8', '--locale=C.UTF-8']);
  await asPostgres('pg_ctl', ['-D', `${dir}/data`, '-w', '-l', `${dir}/log`, '-o', `-k ${dir} -c listen_addresses= -c fsync=off -c TimeZone=UTC`, 'start']);
  const sock = path.join(dir, '.s.PGSQL.5432');
  const forwarder = net.createServer((c) => {
    const u = net.connect(sock);
    c.pipe(u).on('error', () => u.destroy());
    u.pipe(c).on('error', () => c.destroy());
    c.on('error', () => u.destroy());
    u.on('error', () => c.destroy());
  });
  await new Promise<void>((resolve) => forwarder.listen(0, '127.0.0.1', resolve));
  return {
    socketDir: dir,
    tcpPort: (forwarder.address() as net.AddressInfo).port,
    psql: async (sql, database = 'postgres') => (await run('psql', ['-X', '-h', dir, '-U', 'postgres', '-d', database, '-v', 'ON_ERROR_STOP=1', '-A', '-t', '-c', sql], { timeout: 60_000 })).stdout,
    stop: async () => {
      forwarder.close();
      await asPostgres('pg_ctl', ['-D', `${dir}/data`, '-m', 'immediate', 'stop']).catch(() => undefined);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
