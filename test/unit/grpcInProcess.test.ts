import * as net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { startOtlpGrpc } from '../../src/doors/grpc/otlp.ts';
import { GRPC_STATUS } from '../../src/doors/grpc/errors.ts';
import { ApiKeys } from '../../src/doors/shared/auth.ts';
import { ConnectionBudget } from '../../src/doors/shared/connections.ts';
import { DomainError, type ErrorKind } from '../../src/errors.ts';
import { RecordingIngest } from '../../src/ingest/fake.ts';
import { InflightBudget } from '../../src/ingest/inflight.ts';
import { requestClass, responseClass } from '../../src/ingest/otlp/generated.ts';
import { RawOtlpClient, type Signal } from '../helpers/otlpGrpc.ts';
import { tempDir } from '../helpers/server.ts';
import { sleep, waitFor } from '../helpers/wait.ts';

/**
 * The OTLP/gRPC door in process (test/README.md "Where a test goes"): the real grpc-js server of
 * src/doors/grpc/ bound on port 0 in this process, RecordingIngest (with a real in-flight budget) in
 * place of the ingest service, driven by a grpc-js client. Each case: call in → what the service got
 * (signal, dataset, bytes, rights), and the status per error kind the service throws. The expected
 * codes come from the door's own kind → status map (GRPC_STATUS). What stays a system test
 * (test/otlpGrpc.test.ts): the OpenTelemetry exporters end to end, rows stored and read back, the
 * decoder's partial success, HTTP and gRPC giving the same rows, a full budget held by an HTTP body.
 */
const OK = 0;
const RESOURCE_EXHAUSTED = 8;
const UNAVAILABLE = 14;
const UNAUTHENTICATED = 16;
const LIMIT = 256 * 1024;

function logsRequest(bodies: string[]): Buffer {
  const cls = requestClass.logs;
  const now = (BigInt(Date.now()) * 1_000_000n).toString();
  const records = bodies.map((body) => ({ timeUnixNano: now, body: { stringValue: body } }));
  return Buffer.from(cls.encode(cls.fromObject({ resourceLogs: [{ scopeLogs: [{ logRecords: records }] }] })).finish());
}

/** A small valid request of each signal (the fake does not decode it; the door hands the bytes on). */
const REQUESTS: Record<Signal, Buffer> = {
  logs: logsRequest(['hello']),
  traces: Buffer.from(requestClass.traces.encode(requestClass.traces.fromObject({ resourceSpans: [{ scopeSpans: [{ spans: [{ name: 'op', traceId: Buffer.alloc(16, 1), spanId: Buffer.alloc(8, 2) }] }] }] })).finish()),
  metrics: Buffer.from(requestClass.metrics.encode(requestClass.metrics.fromObject({ resourceMetrics: [{ scopeMetrics: [{ metrics: [{ name: 'm', gauge: { dataPoints: [{ asDouble: 1 }] } }] }] }] })).finish()),
};

describe('OTLP/gRPC door in process', async () => {
  const dir = await tempDir('grpc-door-');
  const keys = await ApiKeys.load('w:writer,r:reader,only:writer:scoped', dir);
  const config = loadConfig({ P_DATA_DIR: dir, P_MAX_BODY_BYTES: String(LIMIT), P_MAX_INFLIGHT_BYTES: String(LIMIT), P_INFLIGHT_WAIT: '300ms' });
  const inflight = new InflightBudget(config.ingest.maxInflightBytes, config.ingest.inflightWaitMs, config.ingest.keyShare);
  const fake = Object.assign(new RecordingIngest(), { inflight });
  const connections = new ConnectionBudget({ maxConnections: 64, headersTimeoutMs: 10_000 });
  const server = await startOtlpGrpc({ ...config.otlpGrpc, addr: '127.0.0.1:0' }, { keys, ingest: fake, connections, slowBody: config.ingest });
  const client = new RawOtlpClient(`127.0.0.1:${server.port}`);
  afterAll(async () => {
    client.close();
    await server.close();
  });
  const budgetIsFree = () => waitFor('every reservation is given back', async () => inflight.inUse === 0 && inflight.queued === 0, 10_000);

  it.each([
    { signal: 'logs' as const, gzip: false },
    { signal: 'traces' as const, gzip: false },
    { signal: 'metrics' as const, gzip: false },
    { signal: 'logs' as const, gzip: true },
    { signal: 'metrics' as const, gzip: true },
  ])('$signal export (gzip $gzip): the service gets the signal, the dataset, the message bytes and the metadata', async ({ signal, gzip }) => {
    fake.script = {};
    const answer = await client.call(signal, REQUESTS[signal], { 'x-api-key': 'w', 'x-p-stream': `ds_${signal}`, 'x-p-meta-team': 'a' }, 10_000, gzip);
    expect(answer).toMatchObject({ code: OK });
    const got = fake.last();
    expect(got).toMatchObject({ call: 'ingest', dataset: `ds_${signal}`, format: { kind: 'otlp', signal, format: 'protobuf' }, rights: { ingest: true } });
    // gzip is grpc-js's: the service gets the message as the client encoded it.
    expect(got.body.equals(REQUESTS[signal])).toBe(true);
    expect(got.headers.get('x-p-meta-team')).toBe('a');
    // The answer is the signal's Export*ServiceResponse, with no partial success.
    const response = responseClass[signal].toObject(responseClass[signal].decode(answer.response!)) as { partialSuccess?: unknown };
    expect(response.partialSuccess).toBeUndefined();
    await budgetIsFree();
  });

  it.each([
    { name: 'Bearer', headers: { authorization: 'Bearer w' } },
    { name: 'Basic', headers: { authorization: `Basic ${Buffer.from('anyone:w').toString('base64')}` } },
  ])('$name key and no dataset: the service is left to choose the default one', async ({ headers }) => {
    fake.script = {};
    expect(await client.call('traces', REQUESTS.traces, headers)).toMatchObject({ code: OK });
    expect(fake.last()).toMatchObject({ dataset: undefined, format: { signal: 'traces' }, rights: { ingest: true } });
  });

  it.each<{ name: string; headers: Record<string, string>; details: RegExp }>([
    { name: 'no key', headers: {}, details: /missing API key/ },
    { name: 'an unknown key', headers: { 'x-api-key': 'nope' }, details: /invalid API key/ },
    { name: 'a wrong Bearer key', headers: { authorization: 'Bearer nope' }, details: /invalid API key/ },
  ])('$name: UNAUTHENTICATED, the message is never read and the service not called', async ({ headers, details }) => {
    const before = fake.calls.length;
    const answer = await client.call('logs', REQUESTS.logs, { 'x-p-stream': 'x', ...headers });
    expect(answer.code).toBe(UNAUTHENTICATED);
    expect(answer.details).toMatch(details);
    expect(answer.retryDelaySec).toBeUndefined();
    expect(fake.calls.length).toBe(before);
    await budgetIsFree();
  });

  it.each([
    { name: 'a reader key', key: 'r', rights: { ingest: false } },
    { name: 'a writer scoped to one dataset', key: 'only', rights: { ingest: true, datasets: new Set(['scoped']) } },
  ])('$name: the service gets the rights to refuse with', async ({ key, rights }) => {
    fake.script = {};
    expect(await client.call('logs', REQUESTS.logs, { 'x-api-key': key, 'x-p-stream': 'x' })).toMatchObject({ code: OK });
    expect(fake.last().rights).toMatchObject(rights);
  });

  it('partial success: the rejected count and message the service reports are the answer', async () => {
    fake.script = { info: { rejected: 2, rejectionMessage: 'bad trace_id' } };
    const answer = await client.call('logs', REQUESTS.logs, { 'x-api-key': 'w' });
    expect(answer.code).toBe(OK);
    const response = responseClass.logs.toObject(responseClass.logs.decode(answer.response!), { longs: String }) as { partialSuccess?: { rejectedLogRecords?: string; errorMessage?: string } };
    expect(response.partialSuccess).toEqual({ rejectedLogRecords: '2', errorMessage: 'bad trace_id' });
  });

  it.each(Object.keys(GRPC_STATUS) as ErrorKind[])('a %s from the service is its gRPC status, with a RetryInfo only where retrying helps', async (kind) => {
    fake.script = { throws: new DomainError(kind, `the ${kind} message`, 2.5) };
    const answer = await client.call('logs', REQUESTS.logs, { 'x-api-key': 'w' });
    expect(answer.code).toBe(GRPC_STATUS[kind].code);
    expect(answer.details).toBe(`the ${kind} message`);
    expect(answer.retryDelaySec).toBe(GRPC_STATUS[kind].retry ? 3 : undefined);
    await budgetIsFree();
  });

  it('an error that is not a domain error is INTERNAL without its message', async () => {
    fake.script = { throws: new Error('secret detail') as DomainError };
    const answer = await client.call('logs', REQUESTS.logs, { 'x-api-key': 'w' });
    expect(answer).toMatchObject({ code: GRPC_STATUS.internal.code, details: 'internal server error' });
  });

  it('a message over P_MAX_BODY_BYTES is RESOURCE_EXHAUSTED; the service is not called and nothing stays reserved', async () => {
    fake.script = {};
    const before = fake.calls.length;
    const answer = await client.call('logs', logsRequest(['y'.repeat(LIMIT + 10)]), { 'x-api-key': 'w' });
    expect(answer.code).toBe(RESOURCE_EXHAUSTED);
    expect(answer.retryDelaySec).toBeUndefined();
    expect(fake.calls.length).toBe(before);
    await budgetIsFree();
  });

  it('while the in-flight budget is full: UNAVAILABLE with a RetryInfo delay, the message unread; a client that gives up frees its place', async () => {
    fake.script = {};
    const before = fake.calls.length;
    const held = await inflight.acquire(LIMIT, 'someone else');
    try {
      const refused = await client.call('logs', REQUESTS.logs, { 'x-api-key': 'w' });
      expect(refused.code, refused.details).toBe(UNAVAILABLE);
      expect(refused.details).toMatch(/P_MAX_INFLIGHT_BYTES/);
      expect(refused.retryDelaySec).toBeGreaterThan(0);
      // A client whose deadline passes while it waits cancels its call (DEADLINE_EXCEEDED on its side).
      expect((await client.call('logs', REQUESTS.logs, { 'x-api-key': 'w' }, 100)).code).toBe(4);
      expect(fake.calls.length).toBe(before);
    } finally {
      held.release();
    }
    await budgetIsFree();
    // The cancelled call may still be handed on if room is made before the server has read the client's
    // RST_STREAM (here, in one process, right after the client's deadline): then with its abort signal,
    // and the service stores nothing (test/otlpGrpc.test.ts checks that end to end). At most that one.
    const handedOn = fake.calls.length - before;
    expect(handedOn).toBeLessThanOrEqual(1);
    expect(await client.call('logs', REQUESTS.logs, { 'x-api-key': 'w' })).toMatchObject({ code: OK });
    expect(fake.calls.length).toBe(before + handedOn + 1);
  });

  it('grpc.health.v1.Health/Check answers SERVING without a key', async () => {
    const answer = await client.call('health', Buffer.alloc(0));
    expect(answer.code).toBe(OK);
    // HealthCheckResponse { status = SERVING (1) }.
    expect([...answer.response!]).toEqual([0x08, 0x01]);
  });

  it('an old connection is closed (P_OTLP_GRPC_MAX_CONNECTION_AGE) and the client reconnects without a failed call', async () => {
    const aging = await startOtlpGrpc({ ...config.otlpGrpc, maxConnectionAgeMs: 300, maxConnectionAgeGraceMs: 300, addr: '127.0.0.1:0' }, { keys, ingest: fake, connections, slowBody: config.ingest });
    // A TCP relay in front of the server counts the client's connections (as a balancer would spread them).
    let opened = 0;
    const relay = net.createServer((socket) => {
      opened++;
      const upstream = net.connect(aging.port, '127.0.0.1');
      socket.pipe(upstream).pipe(socket);
      socket.on('error', () => upstream.destroy());
      upstream.on('error', () => socket.destroy());
    });
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
    const aged = new RawOtlpClient(`127.0.0.1:${(relay.address() as net.AddressInfo).port}`);
    fake.script = {};
    const before = fake.calls.length;
    let calls = 0;
    try {
      await waitFor('a second connection', async () => {
        const answer = await aged.call('logs', REQUESTS.logs, { 'x-api-key': 'w' });
        expect(answer.code, answer.details).toBe(OK);
        calls++;
        await sleep(50);
        return opened >= 2;
      }, 20_000);
      expect(fake.calls.length - before).toBe(calls);
    } finally {
      aged.close();
      relay.close();
      await aging.close();
    }
  });
});
