#!/usr/bin/env bash
# The OpenTelemetry Collector for test/otelcol.test.ts: the OTLP receiver, the OTLP (gRPC) exporter and
# the debug exporter, v0.162.0 (cached under $LAKEHOUSE_TEST_CACHE/otelcol-0.162.0/otelcol).
set -euo pipefail
exec bash "$(dirname "$0")/../build-otelcol.sh" otelcol 0.162.0 1.68.0 'OpenTelemetry Collector for the lakehouse tests' \
  go.opentelemetry.io/collector/exporter/otlpexporter \
  go.opentelemetry.io/collector/exporter/debugexporter
