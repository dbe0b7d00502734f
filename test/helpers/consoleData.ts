import snappy from 'snappy';
import { WriteRequestV1 } from '../../src/ingest/prometheus/decode.ts';
import type { TestServer } from './server.ts';

/** Telemetry for the console's end-to-end test, sent through the public API as any client would. */

const attr = (key: string, v: string | number | boolean) => ({
  key,
  value: typeof v === 'string' ? { stringValue: v } : typeof v === 'boolean' ? { boolValue: v } : Number.isInteger(v) ? { intValue: String(v) } : { doubleValue: v },
});
const ns = (ms: number) => `${BigInt(Math.round(ms)) * 1_000_000n}`;
const hex = (n: number, len: number) => n.toString(16).padStart(len, '0').slice(-len);

async function ok(res: Promise<Response>, what: string): Promise<void> {
  const r = await res;
  if (r.status !== 200 && r.status !== 201) throw new Error(`${what}: ${r.status} ${await r.text()}`);
}

export async function sendJsonEvents(server: TestServer, dataset: string, events: Record<string, unknown>[]): Promise<void> {
  await ok(server.request(`/api/v1/logstream/${dataset}`, { method: 'POST', json: events }), `ingest into ${dataset}`);
}

/** `count` OTLP log records spread over the last `spanMin` minutes, denser in the middle. */
export async function sendOtelLogs(server: TestServer, dataset: string, count: number, spanMin: number): Promise<void> {
  const now = Date.now();
  const levels = ['INFO', 'INFO', 'INFO', 'WARN', 'ERROR'];
  const records = Array.from({ length: count }, (_, i) => {
    const u = (Math.sin(i * 12.9898) * 43758.5453) % 1; // deterministic spread in (-1, 1)
    const pos = 0.5 + 0.45 * Math.sign(u) * Math.abs(u) ** 1.6;
    const sev = levels[i % levels.length];
    return {
      timeUnixNano: ns(now - spanMin * 60_000 * (1 - pos) - 5_000),
      severityText: sev,
      severityNumber: sev === 'ERROR' ? 17 : sev === 'WARN' ? 13 : 9,
      body: { stringValue: `${sev === 'ERROR' ? 'request failed' : 'request served'} GET /api/items/${i % 37} in ${(i * 7) % 480} ms` },
      attributes: [attr('http.route', `/api/items/${i % 37}`), attr('http.status_code', sev === 'ERROR' ? 500 : 200), attr('duration_ms', (i * 7) % 480)],
    };
  });
  const body = {
    resourceLogs: [{ resource: { attributes: [attr('service.name', 'shop-api'), attr('host.name', 'web-1')] }, scopeLogs: [{ scope: { name: 'console-e2e' }, logRecords: records }] }],
  };
  await ok(server.request('/v1/logs', { method: 'POST', headers: { 'X-P-Stream': dataset }, json: body }), 'OTLP logs');
}

/** `traces` traces of a checkout flow across three services; the first one has an error. */
export async function sendOtelTraces(server: TestServer, dataset: string, traces: number): Promise<string[]> {
  const now = Date.now();
  const byService = new Map<string, unknown[]>();
  const add = (service: string, span: unknown) => byService.set(service, [...(byService.get(service) ?? []), span]);
  const ids: string[] = [];
  for (let t = 0; t < traces; t++) {
    const traceId = hex(0xabc000 + t, 8).padStart(32, '4');
    ids.push(traceId);
    const start = now - (traces - t) * 60_000;
    const span = (n: number) => hex(0x1000 + t * 16 + n, 16);
    const fail = t === 0;
    add('frontend', {
      traceId, spanId: span(1), name: 'POST /checkout', kind: 2, startTimeUnixNano: ns(start), endTimeUnixNano: ns(start + 420),
      attributes: [attr('http.method', 'POST'), attr('http.route', '/checkout'), attr('http.status_code', fail ? 500 : 200)],
      status: fail ? { code: 2, message: 'payment declined' } : { code: 1 },
    });
    add('checkout', {
      traceId, spanId: span(2), parentSpanId: span(1), name: 'PlaceOrder', kind: 2, startTimeUnixNano: ns(start + 12), endTimeUnixNano: ns(start + 400),
      attributes: [attr('order.items', 3)],
      events: [{ timeUnixNano: ns(start + 30), name: 'cart.loaded', attributes: [attr('items', 3)] }],
      status: fail ? { code: 2, message: 'payment declined' } : { code: 1 },
    });
    add('checkout', {
      traceId, spanId: span(3), parentSpanId: span(2), name: 'SELECT orders', kind: 3, startTimeUnixNano: ns(start + 40), endTimeUnixNano: ns(start + 95),
      attributes: [attr('db.system', 'postgresql'), attr('db.statement', 'SELECT * FROM orders WHERE id = $1')],
    });
    add('payment', {
      traceId, spanId: span(4), parentSpanId: span(2), name: 'Charge', kind: 2, startTimeUnixNano: ns(start + 110), endTimeUnixNano: ns(start + 380),
      attributes: [attr('payment.provider', 'acme'), attr('amount', 42.5)],
      events: fail ? [{ timeUnixNano: ns(start + 370), name: 'exception', attributes: [attr('exception.type', 'CardDeclined'), attr('exception.message', 'insufficient funds')] }] : [],
      links: [{ traceId: '5b8efff798038103d269b633813fc60c', spanId: 'eee19b7ec3c1b174', attributes: [attr('link.kind', 'batch')] }],
      status: fail ? { code: 2, message: 'card declined' } : { code: 1 },
    });
    add('payment', {
      traceId, spanId: span(5), parentSpanId: span(4), name: 'HTTP POST acme/charge', kind: 3, startTimeUnixNano: ns(start + 130), endTimeUnixNano: ns(start + 360),
      attributes: [attr('http.method', 'POST'), attr('server.address', 'acme.example')],
    });
  }
  const body = {
    resourceSpans: [...byService.entries()].map(([service, spans]) => ({
      resource: { attributes: [attr('service.name', service)] },
      scopeSpans: [{ scope: { name: 'console-e2e' }, spans }],
    })),
  };
  await ok(server.request('/v1/traces', { method: 'POST', headers: { 'X-P-Stream': dataset }, json: body }), 'OTLP traces');
  return ids;
}

/** A gauge by host, a cumulative monotonic counter by route, and a cumulative histogram, one point a minute for `minutes`. */
export async function sendOtelMetrics(server: TestServer, dataset: string, minutes: number): Promise<void> {
  const now = Date.now();
  const startNs = ns(now - (minutes + 1) * 60_000);
  const times = Array.from({ length: minutes }, (_, i) => now - (minutes - i) * 60_000);
  const gauge = times.flatMap((t, i) =>
    ['web-1', 'web-2'].map((host, h) => ({ timeUnixNano: ns(t), asDouble: 0.35 + 0.2 * Math.sin(i / 4 + h) + h * 0.1, attributes: [attr('host', host)] })),
  );
  const counter = times.flatMap((t, i) =>
    ['/checkout', '/items'].map((route, r) => ({ startTimeUnixNano: startNs, timeUnixNano: ns(t), asInt: String((i + 1) * (r ? 600 : 120) + i * i), attributes: [attr('route', route)] })),
  );
  const bounds = [5, 10, 25, 50, 100, 250, 500];
  const histogram = times.map((t, i) => {
    // Cumulative: every bucket only grows; the slow buckets grow faster as time goes on.
    const counts = [10, 30, 60, 40, 20, 8, 2, 1].map((c, k) => c * (i + 1) + (k >= 5 ? i * i : 0));
    return { startTimeUnixNano: startNs, timeUnixNano: ns(t), count: String(counts.reduce((a, b) => a + b, 0)), sum: 60 * counts.reduce((a, b) => a + b, 0), bucketCounts: counts.map(String), explicitBounds: bounds, attributes: [attr('route', '/checkout')] };
  });
  const body = {
    resourceMetrics: [
      {
        resource: { attributes: [attr('service.name', 'shop-api')] },
        scopeMetrics: [
          {
            scope: { name: 'console-e2e' },
            metrics: [
              { name: 'system.cpu.utilization', unit: '1', gauge: { dataPoints: gauge } },
              { name: 'http.server.requests', unit: '{request}', sum: { isMonotonic: true, aggregationTemporality: 2, dataPoints: counter } },
              { name: 'http.server.duration', unit: 'ms', histogram: { aggregationTemporality: 2, dataPoints: histogram } },
            ],
          },
        ],
      },
    ],
  };
  await ok(server.request('/v1/metrics', { method: 'POST', headers: { 'X-P-Stream': dataset }, json: body }), 'OTLP metrics');
}

/** OTLP logs that name spans of `traceId` (span ids as sendOtelTraces makes them for trace number `t`). */
export async function sendTraceLogs(server: TestServer, dataset: string, traceId: string, t: number): Promise<void> {
  const now = Date.now();
  const span = (n: number) => hex(0x1000 + t * 16 + n, 16);
  const rec = (n: number, sev: string, body: string) => ({
    timeUnixNano: ns(now - 30_000 + n), severityText: sev, severityNumber: sev === 'ERROR' ? 17 : 9, traceId, spanId: span(n), body: { stringValue: body }, attributes: [attr('step', n)],
  });
  const body = {
    resourceLogs: [{ resource: { attributes: [attr('service.name', 'payment')] }, scopeLogs: [{ scope: { name: 'console-e2e' }, logRecords: [rec(1, 'INFO', 'checkout started'), rec(4, 'ERROR', 'card declined by acme')] }] }],
  };
  await ok(server.request('/v1/logs', { method: 'POST', headers: { 'X-P-Stream': dataset }, json: body }), 'OTLP trace logs');
}

/**
 * Prometheus remote write 1.0 as Prometheus sends it: samples without metadata (it sends metadata in
 * requests of its own), one a minute for `minutes`: a classic histogram (`_bucket` by `le`, `_sum`,
 * `_count`) and a counter by route, 23 temperature gauges by sensor; and one metric, `queue_depth_total`,
 * whose metadata (a gauge, despite its name) comes in the same request.
 */
export async function sendPrometheus(server: TestServer, dataset: string, minutes: number): Promise<void> {
  const now = Date.now();
  const times = Array.from({ length: minutes }, (_, i) => now - (minutes - i) * 60_000);
  const series: { labels: { name: string; value: string }[]; samples: { value: number; timestamp: number }[] }[] = [];
  const add = (labels: Record<string, string>, value: (i: number) => number) =>
    series.push({ labels: Object.entries(labels).map(([name, v]) => ({ name, value: v })), samples: times.map((t, i) => ({ value: value(i), timestamp: t })) });
  const les = ['0.05', '0.1', '0.25', '0.5', '1', '+Inf'];
  for (const [route, share] of [['/fast', [0.6, 0.95, 1, 1, 1, 1]], ['/slow', [0, 0.05, 0.2, 0.7, 0.95, 1]]] as const) {
    les.forEach((le, k) => add({ __name__: 'http_request_duration_seconds_bucket', route, le }, (i) => Math.round(100 * (i + 1) * share[k])));
    add({ __name__: 'http_request_duration_seconds_count', route }, (i) => 100 * (i + 1));
    add({ __name__: 'http_request_duration_seconds_sum', route }, (i) => 100 * (i + 1) * (route === '/fast' ? 0.05 : 0.4));
    add({ __name__: 'http_requests_total', route }, (i) => (route === '/fast' ? 600 : 120) * (i + 1));
  }
  for (let k = 1; k <= 23; k++) add({ __name__: 'room_temperature_celsius', sensor: `s${String(k).padStart(2, '0')}` }, (i) => 15 + k * 0.5 + Math.sin(i / 5 + k));
  add({ __name__: 'queue_depth_total' }, (i) => 10 + (i % 7));
  // A counter its name does not reveal: only the metadata Prometheus sends on its own (below) types it.
  add({ __name__: 'jobs_done' }, (i) => 50 * (i + 1));
  const send = (request: Record<string, unknown>, what: string) =>
    ok(
      server.request(`/v1/prometheus/write?stream=${dataset}`, {
        method: 'POST',
        body: new Uint8Array(snappy.compressSync(Buffer.from(WriteRequestV1.encode(WriteRequestV1.fromObject(request)).finish()))),
        headers: { 'content-encoding': 'snappy', 'content-type': 'application/x-protobuf', 'x-prometheus-remote-write-version': '0.1.0' },
      }),
      what,
    );
  await send({ timeseries: series, metadata: [{ type: 2, metricFamilyName: 'queue_depth_total', help: 'jobs waiting', unit: '' }] }, 'Prometheus remote write');
  await send({ metadata: [{ type: 1, metricFamilyName: 'jobs_done', help: 'Jobs finished.', unit: '' }] }, 'Prometheus remote write metadata');
}
