import { readFileSync } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError } from './helpers/assert.ts';
import { ADMIN_KEY, query, startServer, type TestServer } from './helpers/server.ts';
import { waitFor } from './helpers/wait.ts';

/**
 * The endpoints and shapes Parseable's clients rely on (its CLI `pb`, its Grafana data source, its
 * console), as read from Parseable's source. Every shape is pinned here through HTTP.
 */

const READER = 'reader-key-0123456789';
const ALPHA_READER = 'alpha-reader-0123456789';
const WRITER = 'writer-key-0123456789';
const KEYS = `${ADMIN_KEY}:admin,${READER}:reader,${ALPHA_READER}:reader:alpha,${WRITER}:writer`;

// Flushes soon after each request and runs retention often, so stored files (and their stats) appear quickly.
const ENV = { P_API_KEYS: KEYS, P_FLUSH_INTERVAL: '200ms', P_COMPACTION_INTERVAL: '500ms', P_CATALOG_REFRESH: '500ms', P_QUERY_TIMEOUT: '5s' };

const VERSION = (JSON.parse(readFileSync(path.join(import.meta.dirname, '..', 'package.json'), 'utf8')) as { version: string }).version;
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

interface QueriedStats {
  stream: string;
  time: string;
  ingestion: { count: number; size: number; format: string; lifetime_count: number; lifetime_size: number; deleted_count: number; deleted_size: number };
  storage: { size: number; format: string; lifetime_size: number; deleted_size: number; files: number };
  wal: { count: number; size: number; segments: number };
}
interface Filter {
  filter_id: string;
  user_id: string;
  version: string;
  stream_name: string;
  filter_name: string;
  query: { filter_type: string; filter_query?: string | null };
  time_filter?: { from: string; to: string } | null;
}
interface Counts {
  fields: string[];
  records: ({ start_time: string; end_time: string; count: number } & Record<string, unknown>)[];
}

const arrowField = (name: string, data_type: unknown) => ({ name, data_type, nullable: true, dict_id: 0, dict_is_ordered: false, metadata: {} });
const TS_MS = { Timestamp: ['Millisecond', null] };
const TS_NS = { Timestamp: ['Nanosecond', null] };
const listOf = (item: string) => ({ List: arrowField('item', item) });

async function json<T>(res: Response, status = 200): Promise<T> {
  const text = await res.text();
  expect(res.status, text).toBe(status);
  return JSON.parse(text) as T;
}

/** The key in `X-API-Key`, as pb and Grafana send it (Basic auth works the same way). */
const as = (key: string) => ({ headers: { 'X-API-Key': key } });

/** OTLP/JSON logs with records at the given epoch ms. */
const otlpLogs = (times: number[]) => ({
  resourceLogs: [
    {
      resource: { attributes: [{ key: 'service.name', value: { stringValue: 'api' } }] },
      scopeLogs: [{ logRecords: times.map((ms, i) => ({ timeUnixNano: String(BigInt(ms) * 1_000_000n), severityText: 'INFO', body: { stringValue: `record ${i}` } })) }],
    },
  ],
});

describe('Parseable compatibility', () => {
  let server: TestServer;
  const get = (p: string, key = ADMIN_KEY) => server.request(p, as(key));
  const stats = async (name: string) => json<QueriedStats>(await get(`/api/v1/logstream/${name}/stats`));
  const flushed = (name: string) => waitFor(`${name} flushed`, async () => (await stats(name)).wal.count === 0 && (await stats(name)).storage.files > 0, 30_000);

  beforeAll(async () => {
    server = await startServer({ env: ENV });
    // app: JSON events; alpha: JSON, the limited reader's dataset; olog: OTel logs; metrics: OTel metrics; spans: OTel traces.
    for (const name of ['app', 'alpha']) expect((await server.request(`/api/v1/logstream/${name}`, { method: 'PUT' })).status).toBe(200);
    const events = [
      { level: 'info', msg: 'boom', n: 5, ratio: 0.5, ok: true, tags: ['a', 'b'] },
      { level: 'info', msg: 'foo', n: 1 },
      { level: 'error', msg: 'bo_x', n: 7, status: 'bad' },
      { level: 'warn', msg: 'bar', n: 3 },
    ];
    expect((await server.request('/api/v1/logstream/app', { method: 'POST', json: events })).status).toBe(200);
    expect((await server.request('/api/v1/logstream/alpha', { method: 'POST', json: { msg: 'alpha' } })).status).toBe(200);
    await flushed('app');
    await flushed('alpha');
  });
  afterAll(async () => {
    await server?.stop();
  });

  describe('datasets', () => {
    it('PUT answers 200 on create and on an existing dataset, with a JSON body', async () => {
      const created = await json<{ message: string; name: string; kind: string }>(await server.request('/api/v1/logstream/fresh', { method: 'PUT' }));
      expect(created).toMatchObject({ name: 'fresh', kind: 'json' });
      expect(created.message).toMatch(/created/);
      const again = await json<{ message: string }>(await server.request('/api/v1/logstream/fresh', { method: 'PUT' }));
      expect(again.message).toMatch(/already exists/);
      // pb's `dataset add --type traces` sends these headers.
      const spans = await server.request('/api/v1/logstream/spans', { method: 'PUT', headers: { 'X-P-Telemetry-Type': 'traces', 'X-P-Log-Source': 'otel-traces' } });
      expect((await json<{ kind: string }>(spans)).kind).toBe('otel-traces');
    });

    it('schema is Arrow schema JSON with Arrow type names (what Grafana maps to number/string/time)', async () => {
      const schema = await json<Record<string, unknown>>(await get('/api/v1/logstream/app/schema'));
      expect(schema).toEqual({
        fields: [
          arrowField('level', 'Utf8'),
          arrowField('msg', 'Utf8'),
          arrowField('n', 'Int64'),
          arrowField('ratio', 'Float64'),
          arrowField('ok', 'Boolean'),
          arrowField('tags', 'Utf8'), // arrays are kept as JSON text
          arrowField('p_timestamp', TS_MS),
          arrowField('p_src_ip', 'Utf8'),
          arrowField('p_user_agent', 'Utf8'),
          arrowField('status', 'Utf8'),
        ],
        metadata: {},
        name: 'app',
        kind: 'json',
        time_column: 'p_timestamp',
      });
    });

    it('OTel schemas carry nanosecond timestamps and lists', async () => {
      const t = Date.now() * 1_000_000;
      const body = {
        resourceMetrics: [
          {
            scopeMetrics: [
              {
                metrics: [
                  {
                    name: 'latency',
                    histogram: { aggregationTemporality: 2, dataPoints: [{ timeUnixNano: String(t), count: '3', sum: 4.5, bucketCounts: ['1', '2'], explicitBounds: [1.5] }] },
                  },
                ],
              },
            ],
          },
        ],
      };
      const res = await server.request('/v1/metrics', { method: 'POST', json: body, headers: { 'X-P-Stream': 'metrics' } });
      expect(res.status, await res.clone().text()).toBe(200);
      const schema = await json<{ fields: { name: string; data_type: unknown }[]; kind: string; time_column: string }>(await get('/api/v1/logstream/metrics/schema'));
      expect(schema.kind).toBe('otel-metrics');
      expect(schema.time_column).toBe('time_unix_nano');
      const types = Object.fromEntries(schema.fields.map((f) => [f.name, f.data_type]));
      expect(types.time_unix_nano).toEqual(TS_NS);
      expect(types.p_timestamp).toEqual(TS_MS);
      expect(types.metric_name).toBe('Utf8');
      expect(types.data_point_bucket_counts).toEqual(listOf('Int64'));
      expect(types.data_point_explicit_bounds).toEqual(listOf('Float64'));
      for (const f of schema.fields) expect(f).toMatchObject({ nullable: true, dict_id: 0, dict_is_ordered: false, metadata: {} });
    });

    it('stats have Parseable\'s lifetime and deleted counts; ?date= gives one day', async () => {
      const s = await stats('app');
      expect(Object.keys(s).sort()).toEqual(['ingestion', 'quarantined', 'storage', 'stream', 'time', 'wal']);
      expect(s.stream).toBe('app');
      expect(Math.abs(Date.parse(s.time) - Date.now())).toBeLessThan(60_000);
      expect(s.ingestion.count).toBe(4);
      expect(s.ingestion.size).toBeGreaterThan(0);
      expect(s.ingestion).toEqual({ count: 4, size: s.ingestion.size, format: 'json', lifetime_count: 4, lifetime_size: s.ingestion.size, deleted_count: 0, deleted_size: 0 });
      expect(s.storage).toEqual({ size: s.storage.size, format: 'parquet', lifetime_size: s.storage.size, deleted_size: 0, files: s.storage.files });
      expect(s.storage.size).toBeGreaterThan(0);

      // The day is the time column's (UTC) day: read it from the stored rows.
      const [{ ms }] = await query(server, 'SELECT epoch_ms(max(p_timestamp)) AS ms FROM app');
      const day = new Date(Number(ms)).toISOString().slice(0, 10);
      expect(await json(await get(`/api/v1/logstream/app/stats?date=${day}`))).toEqual({ events: 4, ingestion: s.ingestion.size, storage: s.storage.size, stream: 'app', date: day });
      expect(await json(await get('/api/v1/logstream/app/stats?date=2001-02-03'))).toEqual({ events: 0, ingestion: 0, storage: 0, stream: 'app', date: '2001-02-03' });
      for (const bad of ['2026-02-30', '20260101', 'yesterday']) {
        expect(await expectError(await get(`/api/v1/logstream/app/stats?date=${bad}`), 400)).toMatch(/YYYY-MM-DD/);
      }
      await expectError(await get('/api/v1/logstream/nosuch/stats'), 404);
    });

    it('OTel stats name the dataset\'s format; retention moves rows from current to deleted, lifetime stays', async () => {
      const now = Date.now();
      const old = [now - 10 * DAY, now - 10 * DAY + 1000, now - 10 * DAY + 2000];
      const res = await server.request('/v1/logs', { method: 'POST', json: otlpLogs([...old, now]), headers: { 'X-P-Stream': 'olog' } });
      expect(res.status, await res.clone().text()).toBe(200);
      await flushed('olog');
      const before = await stats('olog');
      expect(before.ingestion).toMatchObject({ count: 4, format: 'otel-logs', lifetime_count: 4, deleted_count: 0, deleted_size: 0 });
      const oldDay = new Date(old[0]).toISOString().slice(0, 10);
      expect(await json(await get(`/api/v1/logstream/olog/stats?date=${oldDay}`))).toMatchObject({ events: 3 });
      const infoBefore = await json<{ firstEventAt: string; latestEventAt: string }>(await get('/api/v1/logstream/olog/info'));
      expect(Date.parse(infoBefore.firstEventAt)).toBe(old[0]);
      expect(Date.parse(infoBefore.latestEventAt)).toBe(now);

      const put = await server.request('/api/v1/logstream/olog/retention', { method: 'PUT', json: [{ description: 'two days', action: 'delete', duration: '2d' }] });
      expect(put.status).toBe(200);
      const after = await waitFor('retention applied', async () => {
        const s = await stats('olog');
        return s.ingestion.deleted_count > 0 ? s : undefined;
      });
      expect(after.ingestion.count).toBe(1);
      expect(after.ingestion.deleted_count).toBe(3);
      expect(after.ingestion.lifetime_count).toBe(4);
      expect(after.ingestion.deleted_size).toBeGreaterThan(0);
      expect(after.ingestion.size + after.ingestion.deleted_size).toBe(before.ingestion.size);
      expect(after.ingestion.lifetime_size).toBe(before.ingestion.size);
      expect(after.storage.deleted_size).toBeGreaterThan(0);
      expect(after.storage.lifetime_size).toBe(after.storage.size + after.storage.deleted_size);
      expect(await json(await get(`/api/v1/logstream/olog/stats?date=${oldDay}`))).toMatchObject({ events: 0, storage: 0 });
      const infoAfter = await json<{ firstEventAt: string }>(await get('/api/v1/logstream/olog/info'));
      expect(Date.parse(infoAfter.firstEventAt)).toBe(now);
    });

    it('info: created, first/last event, telemetry type and log source (what pb reads)', async () => {
      const info = await json<Record<string, unknown>>(await get('/api/v1/logstream/app/info'));
      const [{ ms }] = await query(server, 'SELECT epoch_ms(min(p_timestamp)) AS ms FROM app');
      const list = await json<{ name: string; created_at: string }[]>(await get('/api/v1/logstream'));
      expect(info).toEqual({
        createdAt: list.find((d) => d.name === 'app')!.created_at,
        firstEventAt: new Date(Number(ms)).toISOString(),
        latestEventAt: new Date(Number(ms)).toISOString(),
        streamType: 'UserDefined',
        logSource: [{ log_source_format: 'json', fields: [] }],
        telemetryType: 'logs',
        hotTierEnabled: false,
        inferTimestamp: true,
      });
      // Nothing stored yet: no event times; an OTel dataset's time column is its time partition.
      const spans = await json<Record<string, unknown>>(await get('/api/v1/logstream/spans/info'));
      expect(spans).not.toHaveProperty('firstEventAt');
      expect(spans).toMatchObject({ telemetryType: 'traces', timePartition: 'span_start_time_unix_nano', logSource: [{ log_source_format: 'otel-traces', fields: [] }] });
      await expectError(await get('/api/v1/logstream/nosuch/info'), 404);
      await expectError(await get('/api/v1/logstream/app/info', ALPHA_READER), 403);
    });
  });

  describe('about, home, dataset info', () => {
    it('about has Parseable\'s field names; grpcPort is null (no Flight server)', async () => {
      const about = await json<Record<string, unknown>>(await get('/api/v1/about'));
      expect(about).toMatchObject({
        version: `v${VERSION}`,
        mode: 'Standalone',
        grpcPort: null,
        store: { type: 'Local drive', path: path.join(server.dataDir, 'store') },
        staging: path.join(server.dataDir, 'wal'),
        updateAvailable: false,
        oidcActive: false,
        llmActive: false,
        hotTier: 'Disabled',
      });
      for (const k of ['uiVersion', 'commit', 'deploymentId', 'latestVersion', 'llmProvider', 'license', 'analytics']) expect(about).toHaveProperty(k);
      expect(about.deploymentId).toMatch(/^[0-9A-F]{26}$/);
      // Where data lives is for admin keys only.
      const forReader = await json<Record<string, unknown>>(await get('/api/v1/about', READER));
      expect(forReader).toMatchObject({ ...about, store: { type: 'Local drive', path: null }, staging: null });
      expect(JSON.stringify(forReader)).not.toContain(server.dataDir);
      // Any valid key may ask (pb status with a writer key), and sees no paths either.
      const forWriter = await json<Record<string, unknown>>(await get('/api/v1/about', WRITER));
      expect(forWriter).toEqual(forReader);
      await expectError(await server.request('/api/v1/about', { headers: { 'X-API-Key': 'wrong' } }), 401);
    });

    it('prism home lists the datasets a key may read, with type, format and stats (pb dataset list)', async () => {
      const home = await json<{ datasets: Record<string, unknown>[]; checklist: Record<string, boolean>; triggeredAlertsCount: number }>(await get('/api/prism/v1/home'));
      const titles = home.datasets.map((d) => d.title);
      expect(titles).toEqual([...titles].sort());
      expect(titles).toEqual(expect.arrayContaining(['alpha', 'app', 'spans']));
      const app = home.datasets.find((d) => d.title === 'app')!;
      const s = await stats('app');
      expect(app).toEqual({ title: 'app', datasetType: 'logs', datasetFormat: 'json', ingestion: true, stats: { events: 4, ingestion: s.ingestion.size, storage: s.storage.size } });
      expect(home.datasets.find((d) => d.title === 'spans')).toMatchObject({ datasetType: 'traces', datasetFormat: 'otel-traces', timePartition: 'span_start_time_unix_nano', ingestion: false });
      expect(home.checklist).toEqual({ dataIngested: true, keystoneCreated: false, alertCreated: false, userAdded: false });
      expect(home.triggeredAlertsCount).toBe(0);

      const limited = await json<{ datasets: { title: string }[] }>(await get('/api/prism/v1/home', ALPHA_READER));
      expect(limited.datasets.map((d) => d.title)).toEqual(['alpha']);
    });

    it('prism dataset info: info, Arrow schema, stats and retention together', async () => {
      const info = await json<Record<string, unknown>>(await get('/api/prism/v1/logstream/app/info'));
      expect(Object.keys(info).sort()).toEqual(['info', 'retention', 'schema', 'stats']);
      expect(info.info).toEqual(await json(await get('/api/v1/logstream/app/info')));
      expect(info.schema).toEqual(await json(await get('/api/v1/logstream/app/schema')));
      expect((info.stats as QueriedStats).ingestion).toEqual((await stats('app')).ingestion);
      expect(info.retention).toEqual([]);
      const olog = await json<{ retention: unknown }>(await get('/api/prism/v1/logstream/olog/info'));
      expect(olog.retention).toEqual([{ description: 'two days', action: 'delete', duration: '2d' }]);
      await expectError(await get('/api/prism/v1/logstream/app/info', ALPHA_READER), 403);
      await expectError(await get('/api/prism/v1/logstream/nosuch/info'), 404);
    });
  });

  describe('saved queries (filters)', () => {
    /** The body `pb query save` sends. */
    const pbFilter = (name: string, stream = 'app', sql = `select * from ${stream}`) => ({
      stream_name: stream,
      filter_name: name,
      user_id: 'someone',
      query: { filter_type: 'sql', filter_query: sql },
      time_filter: { from: '2026-01-01T00:00:00Z', to: '2026-01-02T00:00:00Z' },
    });
    const post = (body: unknown, key = ADMIN_KEY) => server.request('/api/v1/filters', { method: 'POST', json: body, ...as(key) });

    it('POST stores a filter with an id, owner and version; GET lists and reads it; PUT changes it; DELETE removes it', async () => {
      const saved = await json<Filter & { extra: string }>(await post({ ...pbFilter('errors'), extra: 'kept' }));
      const { user_id: claimed, ...sent } = pbFilter('errors');
      expect(saved).toMatchObject({ ...sent, version: 'v2', extra: 'kept' });
      expect(saved.filter_id).toMatch(/^[0-9a-f-]{36}$/);
      expect(saved.user_id).not.toBe(claimed); // the owner is the key, whatever the client claims
      expect(await json(await get(`/api/v1/filters/${saved.filter_id}`))).toEqual(saved);
      expect((await json<Filter[]>(await get('/api/v1/filters'))).map((f) => f.filter_id)).toContain(saved.filter_id);

      // In the object store, like the rest of the metadata (so every worker sees it).
      const object = path.join(server.dataDir, 'store', '.filters', `${saved.filter_id}.json`);
      expect(JSON.parse(await fs.readFile(object, 'utf8'))).toEqual(saved);

      const changed = await json<Filter>(
        await server.request(`/api/v1/filters/${saved.filter_id}`, { method: 'PUT', json: pbFilter('errors only', 'app', "select * from app where level = 'error'") }),
      );
      expect(changed).toMatchObject({ filter_id: saved.filter_id, user_id: saved.user_id, filter_name: 'errors only', version: 'v2' });
      expect((await json<Filter>(await get(`/api/v1/filters/${saved.filter_id}`))).query.filter_query).toMatch(/level = 'error'/);

      expect(await json(await server.request(`/api/v1/filters/${saved.filter_id}`, { method: 'DELETE' }))).toMatchObject({ message: expect.any(String) });
      await expectError(await get(`/api/v1/filters/${saved.filter_id}`), 404);
      await expect(fs.access(object)).rejects.toThrow();
      await expectError(await server.request(`/api/v1/filters/${saved.filter_id}`, { method: 'DELETE' }), 404);
    });

    it('keys see filters of datasets they may read and change only their own (an admin: any)', async () => {
      const mine = await json<Filter>(await post(pbFilter('reader view'), READER));
      const admins = await json<Filter>(await post(pbFilter('admin view')));
      const alphas = await json<Filter>(await post(pbFilter('alpha view', 'alpha'), ALPHA_READER));
      expect(mine.user_id).not.toBe(admins.user_id);

      const seenByReader = (await json<Filter[]>(await get('/api/v1/filters', READER))).map((f) => f.filter_id);
      expect(seenByReader).toEqual(expect.arrayContaining([mine.filter_id, admins.filter_id, alphas.filter_id]));
      const seenByAlpha = (await json<Filter[]>(await get('/api/v1/filters', ALPHA_READER))).map((f) => f.filter_id);
      expect(seenByAlpha).toContain(alphas.filter_id);
      expect(seenByAlpha).not.toContain(mine.filter_id);

      await expectError(await server.request(`/api/v1/filters/${admins.filter_id}`, { method: 'DELETE', ...as(READER) }), 404);
      await expectError(await server.request(`/api/v1/filters/${admins.filter_id}`, { method: 'PUT', json: pbFilter('mine now'), ...as(READER) }), 404);
      await expectError(await post(pbFilter('not yours', 'app'), ALPHA_READER), 403);
      // A filter names a dataset that exists: 404 for a missing one, for a key that may read that name;
      // permission first, as queries answer, so a scoped key learns nothing of names outside its scope.
      expect(await expectError(await post(pbFilter('ghost', 'nosuch')), 404)).toMatch(/nosuch/);
      expect(await expectError(await post(pbFilter('ghost', 'nosuch'), READER), 404)).toMatch(/nosuch/);
      await expectError(await post(pbFilter('ghost', 'nosuch'), ALPHA_READER), 403);
      await expectError(await server.request(`/api/v1/filters/${mine.filter_id}`, { method: 'PUT', json: pbFilter('moved', 'nosuch'), ...as(READER) }), 404);
      expect((await json<Filter[]>(await get('/api/v1/filters'))).some((f) => f.stream_name === 'nosuch')).toBe(false);
      await expectError(await get('/api/v1/filters', WRITER), 403);
      expect((await server.request(`/api/v1/filters/${mine.filter_id}`, { method: 'DELETE' })).status).toBe(200);
    });

    it('bad bodies are 400; an object in the store that is not a filter is skipped', async () => {
      expect(await expectError(await post({ filter_name: 'x' }), 400)).toMatch(/stream_name/);
      expect(await expectError(await post({ ...pbFilter('x'), query: { filter_type: 'nope' } }), 400)).toMatch(/filter_type/);
      await expectError(await server.request('/api/v1/filters', { method: 'POST', body: '{not json', headers: { 'content-type': 'application/json' } }), 400);
      await fs.writeFile(path.join(server.dataDir, 'store', '.filters', 'broken.json'), '{"not":"a filter"}');
      const list = await json<Filter[]>(await get('/api/v1/filters'));
      expect(list.every((f) => typeof f.filter_id === 'string' && f.filter_id !== 'broken')).toBe(true);
      await expectError(await get('/api/v1/filters/broken'), 404);
      await expectError(await get('/api/v1/filters/..%2F.streams%2Fapp'), 404);
    });
  });

  describe('counts', () => {
    const counts = (body: unknown, key = ADMIN_KEY) => server.request('/api/v1/counts', { method: 'POST', json: body, ...as(key) });
    let eventMs: number;
    let start: number;
    beforeAll(async () => {
      const [{ ms }] = await query(server, 'SELECT epoch_ms(min(p_timestamp)) AS ms FROM app');
      eventMs = Number(ms);
      start = Math.floor(eventMs / 60_000) * 60_000 - 5 * 60_000;
    });

    it('numBins bins of [startTime, endTime) with every bin listed, times in RFC 3339 (+00:00)', async () => {
      const res = await json<Counts>(await counts({ stream: 'app', startTime: new Date(start).toISOString(), endTime: new Date(start + 11 * 60_000).toISOString(), numBins: 11 }));
      expect(res.fields).toEqual(['start_time', 'end_time', 'count']);
      expect(res.records).toHaveLength(11);
      res.records.forEach((r, i) => {
        expect(Object.keys(r).sort()).toEqual(['count', 'end_time', 'start_time']);
        expect(r.start_time).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?\+00:00$/);
        expect(Date.parse(r.start_time)).toBe(start + i * 60_000);
        expect(Date.parse(r.end_time)).toBe(start + (i + 1) * 60_000);
      });
      const bin = Math.floor((eventMs - start) / 60_000);
      expect(res.records.map((r) => r.count)).toEqual(res.records.map((_, i) => (i === bin ? 4 : 0)));
    });

    it('without numBins, Parseable\'s default bins (1 minute up to 5 hours, 1 hour beyond a day)', async () => {
      const hour = await json<Counts>(await counts({ stream: 'app', startTime: new Date(start).toISOString(), endTime: new Date(start + HOUR).toISOString() }));
      expect(hour.records).toHaveLength(60);
      expect(hour.records.reduce((s, r) => s + r.count, 0)).toBe(4);
      const week = await json<Counts>(await counts({ stream: 'app', startTime: new Date(start - 6 * DAY).toISOString(), endTime: new Date(start + DAY).toISOString() }));
      expect(week.records).toHaveLength(7 * 24);
      expect(Date.parse(week.records[1].start_time) - Date.parse(week.records[0].start_time)).toBe(HOUR);
      expect(week.records.reduce((s, r) => s + r.count, 0)).toBe(4);
    });

    it('conditions filter and groupBy splits, keeping the top K groups', async () => {
      const range = { stream: 'app', startTime: new Date(start).toISOString(), endTime: new Date(start + 11 * 60_000).toISOString(), numBins: 1 };
      const contains = { operator: 'and', conditionConfig: [{ column: 'msg', operator: 'contains', value: 'o' }] };
      const grouped = await json<Counts>(await counts({ ...range, conditions: { conditions: contains, groupBy: ['level'] } }));
      expect(grouped.fields).toEqual(['start_time', 'end_time', 'count', 'level']);
      expect(grouped.records.map((r) => [r.level, r.count])).toEqual([
        ['error', 1],
        ['info', 2],
      ]);
      const top = await json<Counts>(await counts({ ...range, conditions: { conditions: contains, groupBy: ['level'], topK: 1 } }));
      expect(top.records.map((r) => [r.level, r.count])).toEqual([['info', 2]]);

      const one = async (conditions: unknown) => (await json<Counts>(await counts({ ...range, conditions: { conditions } }))).records[0].count;
      // LIKE wildcards in a value are literal, as in Parseable.
      expect(await one({ conditionConfig: [{ column: 'msg', operator: 'contains', value: '_' }] })).toBe(1);
      expect(await one({ conditionConfig: [{ column: 'n', operator: '>', value: '3' }] })).toBe(2);
      expect(await one({ conditionConfig: [{ column: 'status', operator: 'is not null' }] })).toBe(1);
      expect(await one({ conditionConfig: [{ column: 'level', operator: 'begins with', value: 'in' }] })).toBe(2);
      expect(await one({ operator: 'or', conditionConfig: [{ column: 'level', operator: '=', value: 'warn' }, { column: 'level', operator: '=', value: 'error' }] })).toBe(2);
      expect(
        await one({ operator: 'and', conditionConfig: [{ column: 'n', operator: '>=', value: '1' }], groups: [{ operator: 'or', conditionConfig: [{ column: 'msg', operator: 'ends with', value: 'r' }, { column: 'ok', operator: '=', value: 'true', type: 'boolean' }] }] }),
      ).toBe(2);
    });

    it('errors: unknown dataset 404, a dataset the key may not read 403, bad requests 400', async () => {
      const range = { startTime: new Date(start).toISOString(), endTime: new Date(start + 60_000).toISOString() };
      await expectError(await counts({ stream: 'nosuch', ...range }), 404);
      await expectError(await counts({ stream: 'app', ...range }, ALPHA_READER), 403);
      await expectError(await counts({ stream: 'app', startTime: range.endTime, endTime: range.startTime }), 400);
      // An empty range is an empty answer, as for queries.
      expect((await json<Counts>(await counts({ stream: 'app', startTime: range.startTime, endTime: range.startTime }))).records).toEqual([]);
      await expectError(await counts({ stream: 'app', ...range, numBins: 0 }), 400);
      await expectError(await counts({ stream: 'app', ...range, conditions: { conditions: { conditionConfig: [{ column: 'nocolumn', operator: '=', value: '1' }] } } }), 400);
      await expectError(await counts({ stream: 'app', ...range, conditions: { conditions: { conditionConfig: [{ column: 'n', operator: 'like-ish', value: '1' }] } } }), 400);
      await expectError(await counts({ stream: 'app' }), 400);
    });
  });

  it("query answers as Parseable's clients read them: zone-less UTC times, count(*), sendNull, p-time-elapsed, array lines", async () => {
    const ask = (body: Record<string, unknown>, qs = '') =>
      server.request(`/api/v1/query${qs}`, { method: 'POST', json: { startTime: '2000-01-01T00:00:00Z', endTime: 'now', ...body } });
    // Default timestamps are Parseable's zone-less layout (UTC), which its Go clients parse.
    const plain = await ask({ query: "SELECT p_timestamp, count(*) FROM app WHERE msg = 'boom' GROUP BY 1" });
    expect(Number(plain.headers.get('p-time-elapsed'))).toBeGreaterThanOrEqual(0);
    const [row] = await json<Record<string, unknown>[]>(plain);
    expect(String(row.p_timestamp)).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}$/);
    expect(row['count(*)']).toBe(1);
    // …and ISO with Z on request, the same instant.
    const [iso] = await json<Record<string, unknown>[]>(await ask({ query: "SELECT p_timestamp FROM app WHERE msg = 'boom'", timeFormat: 'iso' }));
    expect(iso.p_timestamp).toBe(`${String(row.p_timestamp)}Z`);
    // sendNull (Parseable's camelCase) in the body and in the query string.
    const nullSql = "SELECT msg, status FROM app WHERE msg = 'foo'";
    expect(await json(await ask({ query: nullSql }))).toEqual([{ msg: 'foo' }]);
    expect(await json(await ask({ query: nullSql, sendNull: true }))).toEqual([{ msg: 'foo', status: null }]);
    expect(await json(await ask({ query: nullSql }, '?sendNull=true'))).toEqual([{ msg: 'foo', status: null }]);
    // Streaming: one JSON array of rows per line.
    const streamed = await ask({ query: 'SELECT msg FROM app ORDER BY msg', streaming: true });
    expect(streamed.headers.get('content-type')).toContain('application/x-ndjson');
    const lines = (await streamed.text()).trim().split('\n').map((l) => JSON.parse(l) as unknown);
    expect(lines).toEqual([[{ msg: 'bar' }, { msg: 'bo_x' }, { msg: 'boom' }, { msg: 'foo' }]]);
  });

  it('dashboards\' DataFusion functions run in queries', async () => {
    const rows = await query(
      server,
      `SELECT date_bin('1 minute', p_timestamp, to_timestamp('1970-01-01T00:00:00Z')) = date_trunc('minute', p_timestamp) AS binned,
              approx_distinct(level) AS levels, approx_percentile_cont(n, 0.5) BETWEEN 1 AND 7 AS p50,
              count(*) FILTER (WHERE regexp_like(msg, '^b')) AS b, arrow_typeof(msg) AS t
       FROM app WHERE p_timestamp > to_timestamp('2000-01-01T02:00:00+02:00') GROUP BY ALL`,
    );
    expect(rows).toEqual([{ binned: true, levels: 3, p50: true, b: 3, t: 'Utf8' }]);
  });
});
