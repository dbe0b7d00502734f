import { expect } from 'vitest';
import { s3Env, startS3Server, type S3TestServer } from './s3server.ts';
import { query, type TestServer } from './server.ts';
import { remoteWriteV1 } from './wire.ts';

/**
 * The rows the lake tests send (test/iceberg*.test.ts), each kind of dataset by its own wire format, and
 * the service's own counts they compare every reader with.
 */

export const HOUR = 3_600_000;
export const MIN = 60_000;
/** One row every 10 minutes over three hours, ending four hours ago (several hour partitions). */
export const base = Math.floor((Date.now() - 4 * HOUR) / HOUR) * HOUR;
export const times = Array.from({ length: 18 }, (_, i) => base + i * 10 * MIN + 7_123);
export const range = { start: base + 35 * MIN, end: base + 95 * MIN };
export const inRange = times.filter((t) => t >= range.start && t < range.end).length;
export const nanos = (ms: number) => String(BigInt(ms) * 1_000_000n + 456_789n);
/** Readers' timestamps are zone-less UTC. */
export const naive = (ms: number) => new Date(ms).toISOString().replace('Z', '');

export const SENDERS: Record<string, { timeColumn: string; send: (s: TestServer, name: string) => Promise<Response> }> = {
  json: {
    timeColumn: 'event_time',
    send: async (s, name) => {
      const created = await s.request(`/api/v1/logstream/${name}`, { method: 'PUT', headers: { 'x-p-time-partition': 'event_time' } });
      expect(created.status, await created.text()).toBe(200);
      const events = times.map((t, i) => ({ event_time: new Date(t).toISOString(), n: i, 'http.route': `/r/${i % 3}` }));
      return s.request('/api/v1/ingest', { method: 'POST', headers: { 'x-p-stream': name }, json: events });
    },
  },
  'otel-logs': {
    timeColumn: 'p_time_us',
    send: (s, name) =>
      otlp(s, '/v1/logs', name, {
        resourceLogs: [{ resource: { attributes: [attr('service.name', 'lake')] }, scopeLogs: [{ logRecords: times.map((t, i) => ({ timeUnixNano: nanos(t), body: { stringValue: `line ${i}` }, attributes: [attr('http.method', 'GET')] })) }] }],
      }),
  },
  'otel-traces': {
    timeColumn: 'p_time_us',
    send: (s, name) =>
      otlp(s, '/v1/traces', name, {
        resourceSpans: [
          {
            resource: { attributes: [attr('service.name', 'lake')] },
            scopeSpans: [{ spans: times.map((t, i) => ({ traceId: 'ab'.repeat(15) + String(i).padStart(2, '0'), spanId: 'cd'.repeat(7) + String(i).padStart(2, '0'), name: 'op', kind: 2, startTimeUnixNano: nanos(t), endTimeUnixNano: nanos(t + 5) })) }],
          },
        ],
      }),
  },
  'otel-metrics': {
    timeColumn: 'p_time_us',
    send: (s, name) =>
      otlp(s, '/v1/metrics', name, {
        resourceMetrics: [{ resource: { attributes: [attr('service.name', 'lake')] }, scopeMetrics: [{ metrics: [{ name: 'queue.depth', gauge: { dataPoints: times.map((t, i) => ({ timeUnixNano: nanos(t), asDouble: i + 0.5 })) } }] }] }],
      }),
  },
  'remote-write': {
    timeColumn: 'p_time_us',
    send: (s, name) =>
      s.request(`/v1/prometheus/write?stream=${name}`, {
        method: 'POST',
        headers: { 'content-encoding': 'snappy', 'content-type': 'application/x-protobuf', 'x-prometheus-remote-write-version': '0.1.0' },
        body: new Uint8Array(remoteWriteV1([{ labels: [['__name__', 'up'], ['job', 'lake']], samples: times.map((t, i) => ({ value: i, timestampMs: t })) }])),
      }),
  },
};

function attr(key: string, value: string) {
  return { key, value: { stringValue: value } };
}

function otlp(s: TestServer, path: string, name: string, body: unknown): Promise<Response> {
  return s.request(path, { method: 'POST', headers: { 'x-p-stream': name }, json: body });
}

/** The service's own count over the whole dataset and over the range. */
export async function serviceCounts(s: TestServer, name: string): Promise<[number, number]> {
  const sql = `SELECT count(*) AS c FROM "${name}"`;
  const all = await query(s, sql);
  const part = await query(s, sql, { startTime: new Date(range.start).toISOString(), endTime: new Date(range.end).toISOString() });
  return [Number(all[0].c), Number(part[0].c)];
}


/** The two stores every lake reader test runs on: local disk, and S3 (moto) with the service's S3 settings. */
export const LAKE_BACKENDS: [string, () => Promise<{ env: Record<string, string>; s3?: S3TestServer }>][] = [
  ['local disk', async () => ({ env: {} })],
  [
    'S3 (moto)',
    async () => {
      const s3 = await startS3Server();
      return { env: s3Env(s3), s3 };
    },
  ],
];
