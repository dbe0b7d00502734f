/**
 * The log shippers' doors driven by the real shippers: the official Elasticsearch clients' bulk helpers
 * (npm @elastic/elasticsearch, PyPI elasticsearch), winston-loki and pino-loki (Loki push, protobuf +
 * snappy and JSON), splunk-logging (Splunk HEC); then fuzzed bodies, which get 4xx and store nothing.
 * One server for the file; each case its own dataset.
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { Client } from '@elastic/elasticsearch';
import pino from 'pino';
import pinoLoki from 'pino-loki';
import winston from 'winston';
import LokiTransport from 'winston-loki';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, query, startServer, type TestServer } from './helpers/server.ts';
import { waitFor } from './helpers/wait.ts';

// splunk-logging ships no types: test/helpers/splunk-logging.d.ts declares what this file uses.
import splunk from 'splunk-logging';

const SCOPED_KEY = 'scoped-writer-key';
let server: TestServer;

beforeAll(async () => {
  server = await startServer({ env: { P_API_KEYS: `${ADMIN_KEY}:admin,${SCOPED_KEY}:writer:allowed` } });
});
afterAll(async () => {
  await server?.stop();
});

const nd = (...lines: unknown[]) => lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n') + '\n';
const count = async (dataset: string) => Number((await query(server, `SELECT count(*) AS n FROM "${dataset}"`))[0].n);
const datasets = async () => ((await (await server.request('/api/v1/logstream')).json()) as { name: string }[]).map((d) => d.name);

/** Recent times (the time field's 30-day limit), one per event, whole milliseconds. */
const base = Date.now() - 3_600_000;
const at = (i: number) => new Date(base + i * 1000 + 7).toISOString();

describe('Elasticsearch door', () => {
  it('answers the official client (product check, info) and its bulk helper stores every document with its time', async () => {
    const client = new Client({ node: `${server.url}/es`, auth: { apiKey: ADMIN_KEY } });
    const info = await client.info();
    expect(info.version.number).toMatch(/^8\./);
    const docs = Array.from({ length: 250 }, (_, i) => ({ '@timestamp': at(i), message: `line ${i}`, service: { name: 'checkout' }, n: i }));
    const result = await client.helpers.bulk({ datasource: docs, onDocument: () => ({ create: { _index: 'applogs-2026.11.28' } }), flushBytes: 8_000 });
    expect({ total: result.total, successful: result.successful, failed: result.failed }).toEqual({ total: 250, successful: 250, failed: 0 });
    const rows = await query(server, 'SELECT "@timestamp" AS t, message, service_name, n FROM applogs ORDER BY n');
    expect(rows).toEqual(docs.map((d) => ({ t: d['@timestamp'], message: d.message, service_name: 'checkout', n: d.n })));
  });

  it('answers the start-up calls through the client: ping, license, templates, pipelines, index exists', async () => {
    const client = new Client({ node: `${server.url}/es/`, auth: { apiKey: ADMIN_KEY } });
    expect(await client.ping()).toBe(true);
    expect((await client.license.get()).license.status).toBe('active');
    expect(await client.indices.existsIndexTemplate({ name: 'logs' })).toBe(false);
    expect((await client.indices.putIndexTemplate({ name: 'logs', index_patterns: ['logs-*'] })).acknowledged).toBe(true);
    expect((await client.ingest.putPipeline({ id: 'p', processors: [] })).acknowledged).toBe(true);
    expect(await client.indices.exists({ index: 'applogs-2026.11.28' })).toBe(true);
    expect(await client.indices.exists({ index: 'never-written' })).toBe(false);
  });

  it('fails a bad item alone: update and delete get 4xx, the others are stored', async () => {
    const client = new Client({ node: `${server.url}/es`, auth: { username: 'elastic', password: ADMIN_KEY } });
    const res = await client.bulk({
      operations: [{ index: { _index: 'mixed' } }, { '@timestamp': at(1), ok: 1 }, { update: { _index: 'mixed', _id: 'u' } }, { doc: { ok: 2 } }, { delete: { _index: 'mixed', _id: 'd' } }, { index: { _index: 'mixed' } }, { '@timestamp': at(2), ok: 3 }],
    });
    expect(res.errors).toBe(true);
    expect(res.items.map((item) => Object.entries(item).map(([action, r]) => `${action} ${r.status}`)[0])).toEqual(['index 201', 'update 400', 'delete 400', 'index 201']);
    expect(await query(server, 'SELECT ok FROM mixed ORDER BY ok')).toEqual([{ ok: 1 }, { ok: 3 }]);
  });

  it('a broken document, or one line holding two, fails alone in a raw bulk body', async () => {
    const body = nd({ index: { _index: 'rawbulk' } }, { '@timestamp': at(1), k: 1 }, { index: { _index: 'rawbulk' } }, '{"k": 2,', { index: { _index: 'rawbulk' } }, '{"k":3},{"k":4}', { index: { _index: 'rawbulk' } }, { k: 5 });
    const res = await server.request('/es/rawbulk/_bulk', { method: 'POST', body, headers: { 'content-type': 'application/x-ndjson' } });
    const out = (await res.json()) as { errors: boolean; items: { index: { status: number } }[] };
    expect(out.items.map((i) => i.index.status)).toEqual([201, 400, 400, 201]);
    expect(await query(server, 'SELECT k FROM rawbulk ORDER BY k')).toEqual([{ k: 1 }, { k: 5 }]);
  });

  it('takes gzip bodies (the client\'s compression option)', async () => {
    const client = new Client({ node: `${server.url}/es`, auth: { bearer: ADMIN_KEY }, compression: true });
    const res = await client.bulk({ operations: Array.from({ length: 50 }, (_, i) => [{ create: { _index: 'gzipped' } }, { '@timestamp': at(i), i }]).flat() });
    expect(res.errors).toBe(false);
    expect(await query(server, 'SELECT count(*) AS n, sum(i) AS s FROM gzipped')).toEqual([{ n: 50, s: (49 * 50) / 2 }]);
  });

  it('applies the key\'s dataset scope to every _index: the other index\'s items get 403', async () => {
    const client = new Client({ node: `${server.url}/es`, auth: { apiKey: Buffer.from(`id:${SCOPED_KEY}`).toString('base64') } });
    const res = await client.bulk({ operations: [{ index: { _index: 'allowed' } }, { '@timestamp': at(1) }, { index: { _index: 'forbidden' } }, { '@timestamp': at(2) }] });
    expect(res.items.map((i) => i.index?.status)).toEqual([201, 403]);
    expect(await count('allowed')).toBe(1);
    expect(await datasets()).not.toContain('forbidden');
  });

  it('the Python client\'s bulk helper (PyPI elasticsearch 8) stores every document', async () => {
    const cache = process.env.LAKEHOUSE_TEST_CACHE ?? path.join(os.homedir(), '.cache/lakehouse-test');
    const pyFile = path.join(cache, 'python-elasticsearch-python');
    if (!fs.existsSync(pyFile)) throw new Error(`no Python elasticsearch client: run scripts/test-setup.d/46-python-elasticsearch.sh (looked for ${pyFile})`);
    const script = [
      'import sys',
      'from elasticsearch import Elasticsearch, helpers',
      'es = Elasticsearch(sys.argv[1], api_key=sys.argv[2])',
      'actions = ({"_index": "pylogs", "_source": {"@timestamp": sys.argv[3 + (i % 2)], "i": i, "host": {"name": "py"}}} for i in range(120))',
      'ok, errors = helpers.bulk(es, actions, chunk_size=50)',
      'print(ok, len(errors))',
    ].join('\n');
    const { stdout } = await promisify(execFile)(fs.readFileSync(pyFile, 'utf8').trim(), ['-c', script, `${server.url}/es`, ADMIN_KEY, at(0), at(1)]);
    expect(stdout.trim()).toBe('120 0');
    expect(await query(server, 'SELECT count(*) AS n, count(DISTINCT i) AS d, min("@timestamp") AS lo, max("@timestamp") AS hi, min(host_name) AS h FROM pylogs')).toEqual([{ n: 120, d: 120, lo: at(0), hi: at(1), h: 'py' }]);
  });
});

describe('Loki door', () => {
  it('winston-loki (protobuf + snappy): every line with its labels and time', async () => {
    const transport = new LokiTransport({ host: server.url, basicAuth: `user:${ADMIN_KEY}`, labels: { app: 'winston' }, headers: { 'X-P-Stream': 'winstonlogs' }, batching: false, json: false, onConnectionError: (e: unknown) => console.error(e) });
    const logger = winston.createLogger({ transports: [transport] });
    const before = Date.now();
    for (let i = 0; i < 20; i++) logger.info(`winston ${i}`, { labels: { job: 'test' } });
    await waitFor('20 winston-loki lines', async () => (await count('winstonlogs').catch(() => 0)) === 20);
    const rows = await query(server, 'SELECT app, job, level, line FROM winstonlogs');
    expect(rows.map(({ line: _, ...labels }) => labels)).toEqual(rows.map(() => ({ app: 'winston', job: 'test', level: 'info' })));
    // winston-loki's line is the message and then the remaining metadata as JSON.
    expect(rows.map((r) => Number(/^winston (\d+) /.exec(String(r.line))?.[1])).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    const [t] = await query(server, 'SELECT min(timestamp) AS lo, max(timestamp) AS hi FROM winstonlogs');
    // Each line's time is when winston logged it (winston-loki sends Date.now() at that moment).
    expect(Date.parse(String(t.lo))).toBeGreaterThanOrEqual(before);
    expect(Date.parse(String(t.hi))).toBeLessThanOrEqual(Date.now());
    logger.close();
  });

  it('pino-loki (JSON): every line with its labels and exact time', async () => {
    const stream = pinoLoki({ host: server.url, basicAuth: { username: 'u', password: ADMIN_KEY }, labels: { app: 'pino' }, headers: { 'X-P-Stream': 'pinologs' }, batching: false });
    const logger = pino({ base: undefined }, stream);
    for (let i = 0; i < 15; i++) logger.warn({ i }, `pino ${i}`);
    await waitFor('15 pino-loki lines', async () => (await count('pinologs').catch(() => 0)) === 15);
    const rows = await query(server, 'SELECT app, level, line, timestamp AS t FROM pinologs');
    expect(rows).toHaveLength(15);
    for (const r of rows) {
      const line = JSON.parse(String(r.line)) as { msg: string; time: number };
      expect({ app: r.app, level: r.level, t: r.t }).toEqual({ app: 'pino', level: 'warning', t: new Date(line.time).toISOString() });
    }
    expect(new Set(rows.map((r) => (JSON.parse(String(r.line)) as { msg: string }).msg)).size).toBe(15);
  });

  it('a push with one bad stream stores nothing (whole or not at all), in Loki\'s error shape', async () => {
    const body = { streams: [{ stream: { a: 'b' }, values: [[`${BigInt(base) * 1_000_000n}`, 'good']] }, { stream: { a: 'c' }, values: [['not-ns', 'bad']] }] };
    const res = await server.request('/loki/api/v1/push?stream=lokibad', { method: 'POST', json: body });
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/text\/plain/);
    expect(await datasets()).not.toContain('lokibad');
  });
});

describe('Splunk HEC door', () => {
  it('splunk-logging: every event with its time, host, source, sourcetype and index', async () => {
    const logger = new splunk.Logger({ token: ADMIN_KEY, url: server.url, maxBatchCount: 1 });
    const send = (i: number) =>
      new Promise<unknown>((resolve, reject) =>
        logger.send({ message: { i, text: `hec ${i}` }, metadata: { time: (base + i * 1000 + 250) / 1000, host: 'h1', source: 'app', sourcetype: '_json', index: 'heclogs' } }, (err: unknown, _resp: unknown, body: unknown) => (err ? reject(err as Error) : resolve(body))),
      );
    const answers = [];
    for (let i = 0; i < 10; i++) answers.push(await send(i));
    expect(answers.every((a) => JSON.stringify(a) === JSON.stringify({ text: 'Success', code: 0 }))).toBe(true);
    const rows = await query(server, 'SELECT event_message_i AS i, event_message_text AS text, time AS t, host, source, sourcetype FROM heclogs ORDER BY i');
    expect(rows).toEqual(Array.from({ length: 10 }, (_, i) => ({ i, text: `hec ${i}`, t: new Date(base + i * 1000 + 250).toISOString(), host: 'h1', source: 'app', sourcetype: '_json' })));
  });

  it('health without a key, raw lines, acks, and Splunk\'s errors that store nothing', async () => {
    const health = await fetch(`${server.url}/services/collector/health`);
    expect(await health.json()).toEqual({ text: 'HEC is healthy', code: 17 });
    const auth = { authorization: `Splunk ${ADMIN_KEY}`, 'x-splunk-request-channel': '11111111-2222-3333-4444-555555555555' };
    const raw = await fetch(`${server.url}/services/collector/raw?index=hecraw&sourcetype=syslog`, { method: 'POST', headers: auth, body: 'one\ntwo\nthree\n' });
    expect(await raw.json()).toEqual({ text: 'Success', code: 0, ackId: 0 });
    expect(await query(server, 'SELECT event, sourcetype FROM hecraw ORDER BY event')).toEqual(['one', 'three', 'two'].map((event) => ({ event, sourcetype: 'syslog' })));
    const ack = await fetch(`${server.url}/services/collector/ack`, { method: 'POST', headers: auth, body: JSON.stringify({ acks: [0] }) });
    expect(await ack.json()).toEqual({ acks: { '0': true } });
    const bad = await fetch(`${server.url}/services/collector/event`, { method: 'POST', headers: auth, body: '{"event":"ok","index":"hecbad"}{"time":1}' });
    expect({ status: bad.status, body: await bad.json() }).toEqual({ status: 400, body: { text: 'Event field is required', code: 12, 'invalid-event-number': 1 } });
    expect(await datasets()).not.toContain('hecbad');
  });
});

describe('fuzzed bodies get 4xx and store nothing of the bad items', () => {
  const esPost = (body: Buffer | string, headers: Record<string, string> = {}) =>
    server.request('/es/_bulk', { method: 'POST', body: typeof body === 'string' ? body : new Uint8Array(body), headers: { 'content-type': 'application/x-ndjson', ...headers } });

  it.each<[string, string | Buffer, number, Record<string, string>?]>([
    ['a wrong action line', '{"index":{"_index":"fuzz1"}}\n{"@timestamp":"2026-11-28T00:00:00Z"}\n{"frobnicate":{}}\n{}\n', 400],
    ['an action line cut in half', '{"index":{"_index":"fuzz1"', 400],
    ['a body of NULs', '\u0000\u0000\u0000', 400],
    ['gzip that is not gzip', Buffer.from([0x1f, 0x8b, 1, 2, 3]), 400, { 'content-encoding': 'gzip' }],
    ['a gzip bomb (100 MB of spaces)', gzipSync(Buffer.alloc(100 * 1024 * 1024, 0x20)), 413, { 'content-encoding': 'gzip' }],
    ['a 10 MB line', `{"index":{"_index":"fuzz1"}}\n{"m":"${'x'.repeat(10 * 1024 * 1024)}"}\n`, 413],
  ])('%s', async (_name, body, status, headers = {}) => {
    const res = await esPost(body, headers);
    expect(res.status).toBe(status);
    expect(res.headers.get('x-elastic-product')).toBe('Elasticsearch');
    expect(await datasets()).not.toContain('fuzz1');
  });

  it('random byte flips of a valid bulk body: never a 5xx, and every item answered 201 is stored', async () => {
    const valid = Array.from({ length: 20 }, (_, i) => `{"index":{"_index":"fuzzflip"}}\n{"@timestamp":"${at(i)}","i":${i}}\n`).join('');
    let stored = 0;
    let seed = 42;
    const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let round = 0; round < 30; round++) {
      const bytes = Buffer.from(valid);
      for (let k = 0; k < 3; k++) bytes[Math.floor(rand() * bytes.length)] = Math.floor(rand() * 256);
      const res = await esPost(bytes);
      expect(res.status).toBeLessThan(500);
      if (res.status === 200) {
        const out = (await res.json()) as { items: Record<string, { status: number; _index: string }>[] };
        stored += out.items.filter((item) => Object.values(item)[0].status === 201 && Object.values(item)[0]._index === 'fuzzflip').length;
      } else {
        expect(res.status).toBeGreaterThanOrEqual(400);
      }
    }
    const n = (await datasets()).includes('fuzzflip') ? await count('fuzzflip') : 0;
    expect(n).toBe(stored);
  });

  it('a Loki snappy bomb and a truncated protobuf are 4xx; nothing is stored', async () => {
    for (const body of [Buffer.from([0xff, 0xff, 0xff, 0xff, 0x0f, 0x00]), Buffer.from([0x0a, 0x05, 0x0a])]) {
      const res = await server.request('/loki/api/v1/push?stream=lokifuzz', { method: 'POST', body: new Uint8Array(body), headers: { 'content-type': 'application/x-protobuf' } });
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(res.status).toBeLessThan(500);
    }
    expect(await datasets()).not.toContain('lokifuzz');
  });
});
