import { ident } from '../lib/sql.ts';

/** How to send data here, with this server's address filled in (the key stays a placeholder). */
export function Snippets({ dataset = 'app' }: { dataset?: string }) {
  const origin = location.origin;
  const curl = `KEY=<your API key>
curl -X POST -H "X-API-Key: $KEY" -H 'X-P-Stream: ${dataset}' \\
  -H 'Content-Type: application/json' ${origin}/api/v1/ingest \\
  -d '[{"level":"info","msg":"hello","service":"web"}]'`;
  const otel = `exporters:
  otlphttp/lakehouse:
    endpoint: ${origin}
    compression: gzip
    headers:
      X-API-Key: <your API key>
      X-P-Stream: otel-traces      # one dataset per signal: otel-logs, otel-metrics …
service:
  pipelines:
    traces: { receivers: [otlp], exporters: [otlphttp/lakehouse] }`;
  const prom = `remote_write:
  - url: ${origin}/v1/prometheus/write?stream=metrics
    authorization:
      credentials: <your API key>`;
  return (
    <div class="snippets">
      <h3>Send JSON events with curl</h3>
      <pre tabIndex={0}>
        <code>{curl}</code>
      </pre>
      <p class="muted small">
        Then query it: <code>SELECT * FROM {ident(dataset)}</code>
      </p>
      <h3>OpenTelemetry Collector (otlphttp exporter)</h3>
      <pre tabIndex={0}>
        <code>{otel}</code>
      </pre>
      <h3>Prometheus remote write</h3>
      <pre tabIndex={0}>
        <code>{prom}</code>
      </pre>
    </div>
  );
}
