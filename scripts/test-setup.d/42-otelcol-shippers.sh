#!/usr/bin/env bash
# A third OpenTelemetry Collector for test/shippersOtelcol.test.ts: the OTLP receiver and the contrib
# `elasticsearch` and `splunk_hec` exporters, which send to the service's Elasticsearch bulk and Splunk
# HEC doors. v0.165.0 as 41-otelcol-prometheus.sh (the contrib exporters have no v0.162.0); cached under
# $LAKEHOUSE_TEST_CACHE/otelcol-shippers-0.165.0/otelcol.
set -euo pipefail
exec bash "$(dirname "$0")/../build-otelcol.sh" otelcol-shippers 0.165.0 1.71.0 'OpenTelemetry Collector with the Elasticsearch and Splunk HEC exporters, for the lakehouse tests' \
  github.com/open-telemetry/opentelemetry-collector-contrib/exporter/elasticsearchexporter \
  github.com/open-telemetry/opentelemetry-collector-contrib/exporter/splunkhecexporter
