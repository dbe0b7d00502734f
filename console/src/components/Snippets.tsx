import { ident } from '../lib/sql.ts';

/** How to send data here, with this server's address filled in (the key stays a placeholder). */
export function Snippets({ dataset = 'app' }: { dataset?: string }) {
  const origin = location.origin;
  const curl = `KEY=<your API key>
curl -X POST -H "X-API-Key: $KEY" -H 'X-P-Stream: ${dataset}' \\
  -H 'Content-Type: application/json' ${origin}/api/v1/ingest \\
  -d '[{"level":"info","msg":"hello","service":"web"}]'`;
  // OTLP needs no dataset header: each signal goes to its default dataset (otel_logs, otel_traces,
  // otel_metrics). gRPC is served on 4317 by default, beside the HTTP port (docs/otlp-grpc.md).
  const grpc = `${location.hostname}:4317`;
  const otel = `exporters:
  otlp:                              # gRPC
    endpoint: ${grpc}
    tls: { insecure: true }          # plain gRPC; TLS on a load balancer in front
    headers:
      x-api-key: <your API key>
  # or over HTTP:
  # otlphttp:
  #   endpoint: ${origin}
  #   headers: { x-api-key: <your API key> }
service:
  pipelines:                         # → otel_logs, otel_traces, otel_metrics
    logs:    { receivers: [otlp], exporters: [otlp] }
    traces:  { receivers: [otlp], exporters: [otlp] }
    metrics: { receivers: [otlp], exporters: [otlp] }`;
  const sdk = `OTEL_EXPORTER_OTLP_ENDPOINT=http://${grpc}
OTEL_EXPORTER_OTLP_PROTOCOL=grpc
OTEL_EXPORTER_OTLP_HEADERS=x-api-key=<your API key>
# over HTTP: OTEL_EXPORTER_OTLP_ENDPOINT=${origin} OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf`;
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
      <h3>OpenTelemetry Collector (all signals, no dataset header)</h3>
      <pre tabIndex={0} data-testid="snippet-collector">
        <code>{otel}</code>
      </pre>
      <h3>OpenTelemetry SDKs (environment)</h3>
      <pre tabIndex={0} data-testid="snippet-sdk">
        <code>{sdk}</code>
      </pre>
      <h3>Prometheus remote write</h3>
      <pre tabIndex={0}>
        <code>{prom}</code>
      </pre>
    </div>
  );
}
