/**
 * The door contract (docs/security.md "The door contract"): the same hostile cases against every front
 * door, each door a small driver object below. A new door joins with one line in DOORS (a driver that
 * opens its connections and speaks the first bytes of its protocol); a case a door cannot meet yet is a
 * visible `todo` with its reason, never a silent skip; a case that cannot apply to a door (no statements
 * over OTLP/gRPC) is asserted not to apply.
 *
 * Cases: idle connection floods (silent, and heads that never authenticate), unauthenticated huge
 * messages, slow messages, stateful floods (long-lived work per key), deep and expensive statements.
 * One server for the file, every door on a free port of 127.0.0.1, bounded loops only. What must hold
 * throughout: the service keeps taking ingestion (an HTTP ingest probe with a fresh connection).
 */
import * as http2 from 'node:http2';
import * as net from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RawOtlpClient } from './helpers/otlpGrpc.ts';
import { ADMIN_KEY, ANY_PORT, startServer, type TestServer } from './helpers/server.ts';
import { sleep, waitFor } from './helpers/wait.ts';

const WRITER = 'contract-writer-key';
const READER = 'contract-reader-key';
const DATASET = 'door_data';
/** A metrics dataset for PromQL. */
const METRICS = 'door_metrics';
/** The connection budget of the test server, and the head timeout. */
const CAP = 48;
const TAIL_PER_KEY = 2;
const GRPC_MAX_CALLS = 8;
/** Queries (and held PostgreSQL portals) one key may run at once. */
const QUERY_PER_KEY = 2;
const LOGS_EXPORT = '/opentelemetry.proto.collector.logs.v1.LogsService/Export';

let server: TestServer;
const ports = { http: 0, grpc: 0, pg: 0 };
const sockets: net.Socket[] = [];

/** A plain TCP connection to `port`; resolves once connected or closed (a refused connection closes at once). */
function connect(port: number): Promise<net.Socket> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    sockets.push(s);
    s.on('error', () => undefined);
    s.on('data', () => undefined);
    s.once('connect', () => resolve(s));
    s.once('close', () => resolve(s));
  });
}

const metric = async (name: string, door: string) =>
  Number(new RegExp(`^${name}\\{door="${door}"\\} (\\S+)$`, 'm').exec(await (await server.request('/metrics')).text())?.[1]);

/** Query worker processes running a query (or holding a suspended portal's) now. */
const busyWorkers = async () => Number(/^lakehouse_query_workers\{state="busy"\} (\S+)$/m.exec(await (await server.request('/metrics')).text())?.[1] ?? 0);

/** The invariant of every case: an HTTP ingest client with a fresh connection is served. */
async function ingestServed(what: string): Promise<void> {
  await waitFor(`HTTP ingestion during ${what}`, async () => {
    const res = await fetch(`${server.url}/api/v1/ingest`, {
      method: 'POST',
      headers: { 'x-api-key': WRITER, 'x-p-stream': DATASET, 'content-type': 'application/json' },
      body: JSON.stringify([{ probe: what }]),
      // One attempt is bounded, so a frozen event loop fails the wait instead of answering late.
      signal: AbortSignal.timeout(5000),
    }).catch(() => undefined);
    return res?.status === 200;
  });
}

/** PostgreSQL's StartupMessage (protocol 3.0) for `user`. */
function pgStartup(user: string): Buffer {
  const params = Buffer.from(`user\0${user}\0database\0lakehouse\0\0`);
  const head = Buffer.alloc(8);
  head.writeInt32BE(8 + params.length, 0);
  head.writeInt32BE(196608, 4);
  return Buffer.concat([head, params]);
}

/** A typed PostgreSQL message header declaring `length` bytes of body. */
function pgMessageHead(type: string, length: number): Buffer {
  const b = Buffer.alloc(5);
  b.write(type, 0);
  b.writeInt32BE(length + 4, 1);
  return b;
}

/** gRPC's length-prefixed message header: not compressed, `length` bytes follow. */
function grpcPrefix(length: number): Buffer {
  const b = Buffer.alloc(5);
  b.writeUInt32BE(length, 1);
  return b;
}

/** A gRPC call opened raw over HTTP/2 (node:http2): resolves with grpc-status, or 'reset' if the stream is reset. */
function grpcRawCall(port: number, headers: Record<string, string>, body: Buffer, end: boolean, path = LOGS_EXPORT): { status: Promise<string>; close: () => void } {
  const client = http2.connect(`http://127.0.0.1:${port}`);
  client.on('error', () => undefined);
  const stream = client.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers', ...headers });
  stream.on('error', () => undefined);
  const status = new Promise<string>((resolve) => {
    stream.on('response', (h) => h['grpc-status'] !== undefined && resolve(String(h['grpc-status'])));
    stream.on('trailers', (h) => resolve(String(h['grpc-status'])));
    stream.on('close', () => resolve(`reset ${stream.rstCode}`));
  });
  stream.on('data', () => undefined);
  if (end) stream.end(body);
  else stream.write(body);
  return { status, close: () => client.destroy() };
}

/** Raw bytes to a socket; resolves with the first answer ('data: …') or 'closed', whichever comes first. */
function firstAnswer(s: net.Socket): Promise<string> {
  return new Promise((resolve) => {
    s.once('data', (d: Buffer) => resolve(`data: ${d.subarray(0, 40).toString('latin1')}`));
    s.once('close', () => resolve('closed'));
  });
}

/** What each case needs of a door. `pending`: a case the door does not meet yet, and why (a todo, shown). */
interface DoorDriver {
  name: 'http' | 'grpc' | 'pg';
  port: () => number;
  /** The first bytes of the protocol that start a head but never authenticate. */
  head: Buffer;
  /** Starts an unauthenticated message declaring 8 MiB and sends 1 MiB of it; resolves with what the door answered before the rest. */
  hugeUnauthenticated: () => Promise<string>;
  /** Starts an authenticated message and trickles it; resolves once the door cuts it. */
  slowMessage: (() => Promise<string>) | { pending: string };
  /** Long-lived work of one key far past its bound; resolves with [started, still held] once the door has answered the rest. */
  statefulFlood: (() => Promise<{ started: number; held: number; bound: number }>) | { pending: string };
  /**
   * Deep and expensive statements of a reader key; each resolves with its status once answered. A door
   * that takes no statements says why (`notApplicable`) and proves it (`proof`: throws if one could reach it).
   */
  statements: (() => Promise<{ label: string; status: string }[]>) | { pending: string } | { notApplicable: string; proof: () => Promise<void> };
}

const MiB = 1024 * 1024;

/** A whole PostgreSQL message. */
const pgMessage = (type: string, body: Buffer) => Buffer.concat([pgMessageHead(type, body.length), body]);
const cstr = (text: string) => Buffer.from(`${text}\0`);

/** A raw PostgreSQL session of `password`'s key, logged in; `received()` is everything it was sent. */
async function pgSession(password: string): Promise<{ socket: net.Socket; received: () => string }> {
  const socket = await connect(ports.pg);
  let text = '';
  socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
  socket.write(pgStartup('contract'));
  socket.write(pgMessage('p', cstr(password)));
  await waitFor('the PostgreSQL login', async () => /Z\0\0\0\x05I/.test(text) || socket.destroyed);
  return { socket, received: () => text };
}

/** How a session that asked for a suspended portal ended up: 'suspended', an error's SQLSTATE, or undefined (waiting). */
function portalOutcome(text: string): string | undefined {
  if (/s\0\0\0\x04/.test(text)) return 'suspended';
  return /E\0\0[^]*?C([0-9A-Z]{5})\0/.exec(text.slice(text.indexOf('BEGIN')))?.[1];
}

const httpDoor: DoorDriver = {
  name: 'http',
  port: () => ports.http,
  head: Buffer.from('POST /api/v1/ingest HTTP/1.1\r\nHost: x\r\n'),
  hugeUnauthenticated: async () => {
    const s = await connect(ports.http);
    const answer = firstAnswer(s);
    s.write(`POST /api/v1/ingest HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-P-Stream: ${DATASET}\r\nContent-Length: ${8 * MiB}\r\n\r\n`);
    s.write(Buffer.alloc(MiB, 0x20));
    return answer;
  },
  slowMessage: async () => {
    const s = await connect(ports.http);
    const answer = firstAnswer(s);
    s.write(`POST /api/v1/ingest HTTP/1.1\r\nHost: x\r\nX-API-Key: ${WRITER}\r\nX-P-Stream: ${DATASET}\r\nContent-Type: application/json\r\nContent-Length: 65536\r\n\r\n[`);
    for (let i = 0; i < 200 && !s.destroyed; i++) {
      s.write(' ');
      await sleep(200);
    }
    return answer;
  },
  statefulFlood: async () => {
    // Live tail long polls of one reader key, each waiting for rows that never come.
    const start = await (await fetch(`${server.url}/api/v1/tail`, { method: 'POST', headers: { 'x-api-key': READER, 'content-type': 'application/json' }, body: JSON.stringify({ dataset: DATASET, after: '1h', wait: 0 }) })).json();
    const { cursor } = start as { cursor: string };
    const polls = Array.from({ length: 12 }, () =>
      fetch(`${server.url}/api/v1/tail`, { method: 'POST', headers: { 'x-api-key': READER, 'content-type': 'application/json' }, body: JSON.stringify({ dataset: DATASET, after: '1m', cursor, wait: 20 }) }).then((r) => r.status),
    );
    const answered: number[] = [];
    for (const p of polls) void p.then((status) => answered.push(status));
    await waitFor('the polls past the bound are refused', async () => answered.length >= polls.length - TAIL_PER_KEY);
    expect(answered.every((s) => s === 429)).toBe(true);
    const held = polls.length - answered.length;
    // End the held polls: a row arrives (the cursor moves).
    await ingestServed('long polls');
    await Promise.all(polls);
    return { started: polls.length, held, bound: TAIL_PER_KEY };
  },
  statements: async () => {
    const deep = `SELECT ${'(SELECT '.repeat(40)}1${')'.repeat(40)}`;
    const sql = (label: string, query: string) =>
      fetch(`${server.url}/api/v1/query`, { method: 'POST', headers: { 'x-api-key': READER, 'content-type': 'application/json' }, body: JSON.stringify({ query, startTime: '1h', endTime: 'now' }) }).then((r) => ({ label, status: String(r.status) }));
    const promql = (label: string, q: string) =>
      fetch(`${server.url}/prometheus/${METRICS}/api/v1/query?${new URLSearchParams({ query: q })}`, { headers: { 'x-api-key': READER } }).then((r) => ({ label, status: String(r.status) }));
    // A2: a field-stats body of whitespace that a backtracking regular expression chewed on for a minute.
    const fieldStats = fetch(`${server.url}/api/v1/field-stats`, {
      method: 'POST',
      headers: { 'x-api-key': READER, 'content-type': 'application/json' },
      body: JSON.stringify({ query: `SELECT * FROM ${DATASET}${' '.repeat(300_000)}x`, startTime: '1h', endTime: 'now' }),
    }).then((r) => ({ label: 'field-stats over 300 KB of whitespace', status: String(r.status) }));
    return Promise.all([
      sql('40 nested subqueries', deep),
      sql('count over range(1e11)', 'SELECT count(*) FROM range(100000000000)'),
      sql('a 30 M element string split', "SELECT len(string_split(repeat('a,', 30000000), ','))"),
      promql('PromQL: a one-second subquery over 100 years', 'count_over_time(vector(1)[100y:1s])'),
      fieldStats,
    ]);
  },
};

const grpcDoor: DoorDriver = {
  name: 'grpc',
  port: () => ports.grpc,
  // HTTP/2's connection preface and an empty SETTINGS frame: a head, and no call.
  head: Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0])]),
  hugeUnauthenticated: async () => {
    const call = grpcRawCall(ports.grpc, {}, Buffer.concat([grpcPrefix(8 * MiB), Buffer.alloc(MiB)]), false);
    const status = await call.status;
    call.close();
    return `grpc-status ${status}`;
  },
  slowMessage: async () => {
    const client = http2.connect(`http://127.0.0.1:${ports.grpc}`);
    client.on('error', () => undefined);
    const stream = client.request({ ':method': 'POST', ':path': LOGS_EXPORT, 'content-type': 'application/grpc', te: 'trailers', 'x-api-key': WRITER, 'x-p-stream': DATASET });
    stream.on('error', () => undefined);
    const status = new Promise<string>((resolve) => {
      stream.on('response', (h) => h['grpc-status'] !== undefined && resolve(`grpc-status ${h['grpc-status']}`));
      stream.on('trailers', (h) => resolve(`grpc-status ${h['grpc-status']}`));
      stream.on('close', () => resolve(`reset ${stream.rstCode}`));
    });
    stream.write(grpcPrefix(65536));
    let done = false;
    void status.then(() => (done = true));
    for (let i = 0; i < 200 && !done; i++) {
      stream.write(Buffer.alloc(1));
      await sleep(200);
    }
    client.destroy();
    return status;
  },
  statefulFlood: async () => {
    // Exports of one key whose messages never complete, over three connections.
    const calls = Array.from({ length: 30 }, () => grpcRawCall(ports.grpc, { 'x-api-key': WRITER, 'x-p-stream': DATASET }, Buffer.concat([grpcPrefix(512 * 1024), Buffer.alloc(10_000)]), false));
    const answered: string[] = [];
    for (const c of calls) void c.status.then((s) => answered.push(s));
    const bound = Math.ceil(GRPC_MAX_CALLS / 2);
    await waitFor('the calls past the bound are answered', async () => answered.length >= calls.length - bound);
    await sleep(500); // time for one more answer, if the bound did not hold
    const held = calls.length - answered.length;
    for (const c of calls) c.close();
    return { started: calls.length, held, bound };
  },
  statements: {
    notApplicable: 'the OTLP/gRPC door serves only the OTLP Export methods and gRPC health checks: no method takes a statement',
    proof: async () => {
      // Every method the server registered (its start log lists them, read from the server it runs).
      const line = server.logs().split('\n').find((l) => l.includes('"msg":"OTLP/gRPC listening"'));
      const methods = (JSON.parse(line ?? '{}') as { methods?: string[] }).methods ?? [];
      const exports = ['logs.v1.LogsService', 'trace.v1.TraceService', 'metrics.v1.MetricsService'].map((s) => `/opentelemetry.proto.collector.${s}/Export`);
      expect(methods.filter((m) => !m.startsWith('/grpc.health.v1.Health/')).sort()).toEqual(exports.sort());
      expect(methods.filter((m) => m.startsWith('/grpc.health.v1.Health/')).length).toBeGreaterThan(0);
      // Any other path, with a reader's key and a statement for a body, is UNIMPLEMENTED (12): nothing runs it.
      const sql = Buffer.from(`SELECT version(), count(*) FROM range(100000000000)`);
      const paths = ['/lakehouse.Query/Sql', '/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo', '/opentelemetry.proto.collector.logs.v1.LogsService/Query', '/arrow.flight.protocol.FlightService/DoGet'];
      for (const p of paths) {
        const call = grpcRawCall(ports.grpc, { 'x-api-key': READER }, Buffer.concat([grpcPrefix(sql.length), sql]), true, p);
        expect(await call.status, p).toBe('12');
        call.close();
      }
    },
  },
};

const pgDoor: DoorDriver = {
  name: 'pg',
  port: () => ports.pg,
  head: pgStartup('contract'),
  hugeUnauthenticated: async () => {
    const s = await connect(ports.pg);
    const answer = new Promise<string>((resolve) => {
      let seen = '';
      s.on('data', (d: Buffer) => {
        seen += d.toString('latin1');
        // 'R' asks for the password; the answer to the huge one is what counts: an ErrorResponse or a close.
        if (seen.includes('E')) resolve(`data: ${seen.slice(seen.indexOf('E'), seen.indexOf('E') + 40)}`);
      });
      s.once('close', () => resolve('closed'));
    });
    s.write(pgStartup('contract'));
    s.write(pgMessageHead('p', 8 * MiB));
    s.write(Buffer.alloc(MiB, 0x61));
    return answer;
  },
  slowMessage: async () => {
    // A logged-in reader's Query message declaring 64 KiB, trickled a byte at a time.
    const { socket, received } = await pgSession(READER);
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.write(pgMessageHead('Q', 65536));
    for (let i = 0; i < 200 && !socket.destroyed; i++) {
      socket.write(' ');
      await sleep(200);
    }
    await closed;
    // The door says why before it closes: FATAL 08P01, the message arrived too slowly.
    return `closed ${/C08P01\0M[^\0]*too slowly/.test(received()) ? '(08P01: too slowly)' : 'without the reason'}`;
  },
  // A7: suspended portals of one reader key, each holding a query slot (A4's per-session and per-key
  // statement bounds: test/pgGuards.test.ts). Held at once: the busy query workers, sampled throughout.
  statefulFlood: async () => {
    const sessions = await Promise.all(Array.from({ length: 6 }, () => pgSession(READER)));
    for (const { socket } of sessions) {
      socket.write(pgMessage('Q', cstr('BEGIN')));
      socket.write(pgMessage('P', Buffer.concat([cstr(''), cstr('SELECT x FROM range(100000000) AS t(x)'), Buffer.alloc(2)])));
      socket.write(pgMessage('B', Buffer.concat([cstr('held'), cstr(''), Buffer.alloc(6)])));
      socket.write(pgMessage('E', Buffer.concat([cstr('held'), Buffer.from([0, 0, 0, 1])])));
      socket.write(pgMessage('S', Buffer.alloc(0)));
    }
    let held = 0;
    await waitFor('every portal suspended or refused', async () => {
      held = Math.max(held, await busyWorkers());
      return sessions.every(({ received }) => portalOutcome(received()) !== undefined);
    });
    held = Math.max(held, await busyWorkers());
    const outcomes = sessions.map(({ received }) => portalOutcome(received()));
    // Past twice the key's bound: refused at once (53300); between: waited, then a slot, the time limit
    // (57014) or no slot within the wait (57P03). Never an internal error.
    expect(outcomes.filter((o) => o !== 'suspended').every((o) => ['53300', '57014', '57P03'].includes(o!)), outcomes.join()).toBe(true);
    for (const { socket } of sessions) socket.destroy();
    return { started: sessions.length, held, bound: QUERY_PER_KEY };
  },
  statements: async () => {
    // A1: catalog statements run in the query workers, under the sandbox, the key's slots and the time limit.
    const run = async (label: string, sql: string) => {
      const client = new pg.Client({ host: '127.0.0.1', port: ports.pg, user: 'reader', password: READER, database: 'lakehouse' });
      client.on('error', () => undefined);
      await client.connect();
      try {
        await client.query(sql);
        return { label, status: 'ok' };
      } catch (err) {
        return { label, status: String((err as { code?: string }).code) };
      } finally {
        await client.end().catch(() => undefined);
      }
    };
    return Promise.all([
      run('version() with 40 nested subqueries', `SELECT version(), ${'(SELECT '.repeat(40)}1${')'.repeat(40)}`),
      run('version() over range(1e11)', 'SELECT version(), count(*) FROM range(100000000000)'),
      run('version() with a 30 M element string split', "SELECT version(), len(string_split(repeat('a,', 30000000), ','))"),
    ]);
  },
};

/** Every door under the contract. A new door is one more driver here. */
const DOORS: DoorDriver[] = [httpDoor, grpcDoor, pgDoor];

beforeAll(async () => {
  server = await startServer({
    env: {
      P_API_KEYS: `${ADMIN_KEY}:admin,${WRITER}:writer,${READER}:reader:${DATASET}|${METRICS}`,
      P_OTLP_GRPC_ADDR: ANY_PORT,
      P_PG_ADDR: ANY_PORT,
      P_MAX_CONNECTIONS: String(CAP),
      P_HEADERS_TIMEOUT: '1s',
      P_INGEST_BODY_TIMEOUT: '1s',
      P_INGEST_MIN_BODY_RATE: '64KiB',
      P_TAIL_PER_KEY: String(TAIL_PER_KEY),
      P_OTLP_GRPC_MAX_CALLS: String(GRPC_MAX_CALLS),
      P_OTLP_GRPC_MAX_STREAMS: '16',
      P_QUERY_TIMEOUT: '3s',
      P_QUERY_CONCURRENCY: '4',
      P_QUERY_CONCURRENCY_PER_KEY: String(QUERY_PER_KEY),
    },
  });
  ports.http = Number(new URL(server.url).port);
  ports.grpc = server.grpcPort!;
  ports.pg = server.pgPort!;
  await ingestServed('start-up');
  expect((await server.request(`/api/v1/logstream/${METRICS}`, { method: 'PUT', headers: { 'x-p-log-source': 'otel-metrics' } })).status).toBe(200);
});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  await server?.stop();
});

describe.each(DOORS)('the door contract: $name', (door) => {
  it('an idle connection flood (silent, and heads that never authenticate) is refused past the shared budget and closed after P_HEADERS_TIMEOUT; ingestion goes on', async () => {
    const flood = await Promise.all(Array.from({ length: 2 * CAP }, () => connect(door.port())));
    for (const [i, s] of flood.entries()) if (i % 2 === 0 && !s.destroyed) s.write(door.head);
    await ingestServed(`an idle flood on ${door.name}`);
    await waitFor(`every idle ${door.name} connection closed`, async () => flood.every((s) => s.destroyed));
    // Twice the budget on one door: the budget refused some as they were accepted.
    expect(await metric('lakehouse_connections_refused', door.name)).toBeGreaterThan(0);
    // (HTTP: the test's own requests hold a few.)
    await waitFor('the budget empty again', async () => (await metric('lakehouse_connections_open', door.name)) <= (door.name === 'http' ? 4 : 0));
  });

  it('an unauthenticated huge message is answered before it is read', async () => {
    const answer = await door.hugeUnauthenticated();
    // HTTP: 401; gRPC: UNAUTHENTICATED (16); PostgreSQL: an ErrorResponse or the connection closed.
    expect(answer).toMatch(/^(data: HTTP\/1\.1 401|grpc-status 16|data: E|closed)/);
    await ingestServed(`an unauthenticated huge message on ${door.name}`);
  });

  const slow = door.slowMessage;
  if (typeof slow === 'function') {
    it('a message trickled slower than P_INGEST_MIN_BODY_RATE is cut', async () => {
      const how = await slow();
      // HTTP closes the connection; gRPC ends the call DEADLINE_EXCEEDED (4); PostgreSQL closes it after FATAL 08P01.
      expect(how).toMatch(door.name === 'pg' ? /^closed \(08P01/ : /^(closed|grpc-status 4)/);
    });
  } else it.todo(`a slow message: ${slow.pending}`);

  const flood = door.statefulFlood;
  if (typeof flood === 'function') {
    it('long-lived work of one key is bounded per key, and ingestion goes on', async () => {
      const { started, held, bound } = await flood();
      expect(started).toBeGreaterThan(bound);
      expect(held).toBeLessThanOrEqual(bound);
      await ingestServed(`a stateful flood on ${door.name}`);
    });
  } else it.todo(`a stateful flood: ${flood.pending}`);

  const statements = door.statements;
  if ('notApplicable' in statements) {
    it(`statements do not apply: ${statements.notApplicable}`, async () => {
      await statements.proof();
      await ingestServed(`calls for statements on ${door.name}`);
    });
  } else if (typeof statements === 'function') {
    it('deep and expensive statements of a reader are refused or cut at the time limit, and ingestion goes on', async () => {
      const running = statements();
      await ingestServed(`expensive statements on ${door.name}`);
      for (const { label, status } of await running) {
        // HTTP: 400 (checked), 408 (time limit), 413 (too large), 422 (PromQL's refusal), 503 (memory limit).
        // PostgreSQL: 42601 (checked), 57014 (time limit), 53300 (the key's slots), 54000/53200 (memory),
        // 57P03 (no slot free within the wait: HTTP's 503). Never a 500 or XX000, never a hang.
        expect(['400', '408', '413', '422', '503', '42601', '57014', '53300', '54000', '53200', '57P03'], `${label}: ${status}`).toContain(status);
      }
    });
  } else it.todo(`deep and expensive statements: ${statements.pending}`);
});

describe('the door contract keeps serving real clients', () => {
  it('after every case: node-postgres queries, grpc-js exports and HTTP ingests', async () => {
    // Polled: on a loaded machine one count may meet the 3 s time limit set above for the hostile cases;
    // starvation would fail every attempt until the poll's timeout.
    await expect.poll(async () => {
      const client = new pg.Client({ host: '127.0.0.1', port: ports.pg, user: 'reader', password: READER, database: 'lakehouse' });
      await client.connect();
      try {
        const { rows } = await client.query(`SELECT count(*) AS n FROM ${DATASET}`);
        return Number(rows[0].n);
      } catch (err) {
        return (err as { code?: string }).code ?? String(err);
      } finally {
        await client.end();
      }
    }, { timeout: 30_000 }).toBeGreaterThan(0);
    const raw = new RawOtlpClient(`127.0.0.1:${ports.grpc}`);
    expect((await raw.call('logs', Buffer.alloc(0), { 'x-api-key': WRITER, 'x-p-stream': 'door_grpc' })).code).toBe(0);
    raw.close();
    await ingestServed('the end');
  });
});
