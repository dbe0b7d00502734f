#!/usr/bin/env bash
# A second OpenTelemetry Collector for test/promqlOtlp.test.ts: the OTLP receiver and the contrib
# `prometheus` exporter, so that the PromQL mapping of OTLP metrics (src/query/promql/otlp.ts) is
# compared with what the exporter itself exposes. v0.165.0: the contrib exporter has no v0.162.0, the
# version of 40-otelcol.sh (cached under $LAKEHOUSE_TEST_CACHE/otelcol-prometheus-0.165.0/otelcol).
set -euo pipefail
exec bash "$(dirname "$0")/../build-otelcol.sh" otelcol-prometheus 0.165.0 1.71.0 'OpenTelemetry Collector with the Prometheus exporter, for the lakehouse tests' \
  github.com/open-telemetry/opentelemetry-collector-contrib/exporter/prometheusexporter
