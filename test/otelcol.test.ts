import * as fs from 'node:fs/promises';
import * as http from 'node:http';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OTLPLogExporter } from '@opentelemetry/exporter-logs-otlp-grpc';
import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-grpc';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchLogRecordProcessor, LoggerProvider } from '@opentelemetry/sdk-logs';
import { MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { waitFor } from './helpers/wait.ts';
import { startCollector, startNginx, type Process } from './helpers/otelcol.ts';
import { s3Env, startS3Server, type S3TestServer } from './helpers/s3server.ts';
import { ADMIN_KEY, ANY_PORT, freePort, query, startServer, tempDir, type TestServer } from './helpers/server.ts';

/**
 * The OpenTelemetry Collector (built by scripts/test-setup.d/40-otelcol.sh) with its default `otlp`
 * exporter, whose only header is the key, sending through nginx (`grpc_pass`) to two workers on one
 * bucket (the gRPC block of minio/nginx.conf as shipped): every signal lands in its default dataset, exactly once, while workers stop and come back and
 * while the in-flight budget is full (the Collector retries UNAVAILABLE, nginx's 502 included).
 */
describe('the OpenTelemetry Collector through nginx to two workers on S3', () => {
  const INFLIGHT = 1024 * 1024;
  let s3: S3TestServer;
  let workerEnv: Record<string, string>[];
  let workers: (TestServer | undefined)[] = [];
  const dataDirs: string[] = [];
  let nginx: Process;
  let collector: Process;
  let receiver: string;

  const startWorker = async (i: number) => {
    workers[i] = await startServer({ dataDir: dataDirs[i], env: workerEnv[i] });
    return workers[i]!;
  };
  const live = () => workers.find((w): w is TestServer => w !== undefined)!;

  beforeAll(async () => {
    s3 = await startS3Server();
    workerEnv = [0, 1].map(() => ({
      ...s3Env(s3),
      // Any free port at first start; a worker started again takes back the port it had (nginx names it).
      P_OTLP_GRPC_ADDR: ANY_PORT,
      P_FLUSH_INTERVAL: '500ms',
      P_CATALOG_REFRESH: '1s',
      P_MAX_INFLIGHT_BYTES: String(INFLIGHT),
      P_INFLIGHT_WAIT: '0',
    }));
    const grpcPorts: number[] = [];
    for (let i = 0; i < 2; i++) {
      dataDirs.push(await tempDir());
      grpcPorts.push((await startWorker(i)).grpcPort!);
      workerEnv[i].P_OTLP_GRPC_ADDR = `127.0.0.1:${grpcPorts[i]}`;
    }

    const dir = await tempDir('lakehouse-otelcol-');
    const nginxPort = await freePort();
    // The gRPC block of the shipped minio/nginx.conf, pointed at this test's workers and port.
    const shipped = await fs.readFile(path.join(import.meta.dirname, '../minio/nginx.conf'), 'utf8');
    // The shipped block resolves the workers' shared name per request; here that name is this test's two
    // workers, as an upstream (one host, two ports, which a DNS name cannot say).
    const block = shipped.slice(shipped.indexOf('# OTLP over gRPC'));
    expect(block).toContain('grpc_pass grpc://$grpc_workers:4317;');
    const grpcBlock = [
      `upstream lakehouse_grpc { server 127.0.0.1:${grpcPorts[0]} max_fails=1 fail_timeout=5s; server 127.0.0.1:${grpcPorts[1]} max_fails=1 fail_timeout=5s; }`,
      block.replace('grpc_pass grpc://$grpc_workers:4317;', 'grpc_pass grpc://lakehouse_grpc;').replace(/listen 4317 http2;/, `listen 127.0.0.1:${nginxPort} http2;`),
    ].join('\n');
    expect(grpcBlock).toContain(`127.0.0.1:${nginxPort}`);
    nginx = await startNginx(
      grpcBlock,
      dir,
      nginxPort,
    );

    const receiverPort = await freePort();
    receiver = `http://127.0.0.1:${receiverPort}`;
    // The Collector as a user writes it: one `otlp` exporter, the key its only header. Retries are
    // quicker than the defaults and never give up, so the test waits seconds, not minutes. The export
    // timeout is longer than the default 5 s: on a machine loaded many times over, an export (a dataset
    // created on the bucket, a WAL fsync) can outlast 5 s, and the Collector then sends again what the
    // worker may already have stored (at-least-once, as OTLP defines it; docs/otlp-grpc.md).
    collector = await startCollector(
      `
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:${receiverPort}
exporters:
  otlp:
    endpoint: 127.0.0.1:${nginxPort}
    tls:
      insecure: true
    headers:
      x-api-key: ${ADMIN_KEY}
    timeout: 60s
    retry_on_failure:
      initial_interval: 200ms
      max_interval: 1s
      max_elapsed_time: 0
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    logs: { receivers: [otlp], exporters: [otlp] }
    traces: { receivers: [otlp], exporters: [otlp] }
    metrics: { receivers: [otlp], exporters: [otlp] }
`,
      dir,
      receiverPort,
    );
  }, 120_000);

  afterAll(async () => {
    await collector?.stop();
    await nginx?.stop();
    for (const w of workers) await w?.kill();
    await s3?.close();
  });

  /** Sends `n` log records (bodies `${tag} ${i}`, `pad` bytes each) to the Collector with the OTel JS gRPC exporter. */
  async function sendLogs(tag: string, n: number, pad = 0): Promise<void> {
    const exporter = new OTLPLogExporter({ url: receiver, timeoutMillis: 60_000 });
    const provider = new LoggerProvider({ resource: resourceFromAttributes({ 'service.name': 'collector-test' }), processors: [new BatchLogRecordProcessor(exporter, { maxExportBatchSize: 100, scheduledDelayMillis: 60_000 })] });
    const logger = provider.getLogger('collector-test');
    for (let i = 0; i < n; i++) logger.emit({ body: `${tag} ${i}`, attributes: pad ? { pad: 'p'.repeat(pad) } : {} });
    await provider.shutdown();
  }

  /** Every worker sees exactly `n` distinct rows of `sql`'s shape `SELECT count(*) AS n, count(DISTINCT …) AS d`. */
  async function exactly(sql: string, n: number): Promise<void> {
    for (const w of workers.filter((x): x is TestServer => x !== undefined)) {
      await waitFor(
        `${w.url}: ${n} rows once each`,
        async () => {
          const [row] = await query(w, sql).catch(() => [{ n: 'no dataset yet', d: undefined }]);
          if (row.n !== n || row.d !== n) {
            // What the Collector said last about failed exports, for the message of a timed-out wait.
            const said = collector.logs().split('\n').filter((l) => /error|retry|fail/i.test(l)).slice(-3).join('\n');
            throw new Error(`${w.url} saw n=${row.n}, d=${row.d}; the Collector's last complaints:\n${said}`);
          }
          return true;
        },
        90_000,
      );
    }
  }

  const LOGS = "SELECT count(*) AS n, count(DISTINCT body) AS d FROM otel_logs WHERE \"service.name\" = 'collector-test'";

  it('logs, spans and metrics reach their default datasets with exact counts', async () => {
    await sendLogs('first', 300);
    const spanExporter = new OTLPTraceExporter({ url: receiver, timeoutMillis: 60_000 });
    const tracers = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(spanExporter, { maxExportBatchSize: 50, scheduledDelayMillis: 60_000 })] });
    for (let i = 0; i < 200; i++) tracers.getTracer('collector-test').startSpan(`span ${i}`).end();
    await tracers.shutdown();
    const meters = new MeterProvider({ readers: [new PeriodicExportingMetricReader({ exporter: new OTLPMetricExporter({ url: receiver, timeoutMillis: 60_000 }), exportIntervalMillis: 60_000 })] });
    const counter = meters.getMeter('collector-test').createCounter('collector_test_requests');
    for (let i = 0; i < 5; i++) counter.add(i + 1, { route: `/r${i}` });
    await meters.shutdown();

    await exactly(LOGS, 300);
    await exactly('SELECT count(*) AS n, count(DISTINCT span_name) AS d FROM otel_traces', 200);
    await exactly("SELECT count(*) AS n, count(DISTINCT \"route\") AS d FROM otel_metrics WHERE metric_name = 'collector_test_requests'", 5);
    const [sum] = await query(live(), "SELECT sum(data_point_value) AS s FROM otel_metrics WHERE metric_name = 'collector_test_requests'");
    expect(sum).toEqual({ s: 15 });
  }, 240_000);

  it('one worker stopped, then both for a while: the Collector retries and nothing is lost or duplicated', async () => {
    await workers[1]!.stop();
    workers[1] = undefined;
    await sendLogs('one down', 300);
    await exactly(LOGS, 600);

    await workers[0]!.stop();
    workers[0] = undefined;
    const retriesBefore = (collector.logs().match(/retry/gi) ?? []).length;
    await sendLogs('all down', 300);
    // With both workers gone nginx answers 502, which gRPC clients read as UNAVAILABLE: the Collector keeps the batches and retries.
    await waitFor('the Collector retries', async () => (collector.logs().match(/retry/gi) ?? []).length > retriesBefore, 60_000);
    await startWorker(0);
    await startWorker(1);
    await exactly(LOGS, 900);
  }, 240_000);

  it('while the in-flight budget of both workers is full: UNAVAILABLE with RetryInfo, retried until stored once', async () => {
    // An HTTP client on each worker holds ~900 KB of its 1 MiB budget while the last bytes of its body are awaited.
    const held = Buffer.from(JSON.stringify(Array.from({ length: 3000 }, (_, i) => ({ i, pad: 'x'.repeat(300) }))));
    expect(held.length).toBeLessThan(INFLIGHT);
    const holds = workers.map((w) => {
      const url = new URL(w!.url);
      const req = http.request({ host: url.hostname, port: url.port, path: '/api/v1/ingest', method: 'POST', headers: { 'x-api-key': ADMIN_KEY, 'x-p-stream': 'budget_holder', 'content-type': 'application/json', 'content-length': held.length } });
      const status = new Promise<number>((resolve, reject) => {
        req.on('response', (res) => (res.resume(), res.on('end', () => resolve(res.statusCode!))));
        req.on('error', reject);
      });
      // A test that fails before the end never awaits it.
      status.catch(() => {});
      req.write(held.subarray(0, held.length - 1000));
      return { req, status };
    });
    const inflight = async (w: TestServer) => Number(/^lakehouse_ingest_inflight_bytes (\S+)$/m.exec(await (await w.request('/metrics')).text())?.[1]);
    for (const w of workers) await waitFor('the held body is admitted', async () => (await inflight(w!)) >= held.length - 1000);

    const refusedBefore = workers.map((w) => (w!.logs().match(/"code":14/g) ?? []).length);
    // Batches of 100 records of ~2 KB: each over the ~90 KB left.
    await sendLogs('budget full', 300, 2000);
    await waitFor('the workers refuse with UNAVAILABLE', async () => workers.some((w, i) => (w!.logs().match(/"code":14/g) ?? []).length > refusedBefore[i]), 60_000);
    for (const h of holds) h.req.end(held.subarray(held.length - 1000));
    for (const h of holds) expect(await h.status).toBe(200);
    await exactly(LOGS, 1200);
  }, 240_000);
});
