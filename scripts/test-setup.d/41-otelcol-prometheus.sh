#!/usr/bin/env bash
# A second OpenTelemetry Collector for test/promqlOtlp.test.ts: the OTLP receiver and the contrib
# `prometheus` exporter, so that the PromQL mapping of OTLP metrics (src/query/promqlOtlp.ts) is
# compared with what the exporter itself exposes. Built with the collector builder (ocb) v0.165.0 (the
# contrib exporter has no v0.162.0, the version of 40-otelcol.sh) and cached under
# $LAKEHOUSE_TEST_CACHE/otelcol-prometheus-0.165.0/otelcol.
# The first build takes minutes (run under nice); later runs find the binary and return at once.
set -euo pipefail
VERSION=0.165.0
PROVIDERS=1.71.0
cache=${LAKEHOUSE_TEST_CACHE:-$HOME/.cache/lakehouse-test}
dir="$cache/otelcol-prometheus-$VERSION"
bin="$dir/otelcol"
if [ -x "$bin" ]; then exit 0; fi

go=$(command -v go || echo /usr/local/go/bin/go)
[ -x "$go" ] || { echo "41-otelcol-prometheus: no Go toolchain (go, or /usr/local/go/bin/go) to build the Collector with" >&2; exit 1; }

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock -w 1800 9 || { echo "41-otelcol-prometheus: timed out waiting for another build" >&2; exit 1; }
if [ -x "$bin" ]; then exit 0; fi

export GOBIN="$dir/tools"
nice -n 10 "$go" install "go.opentelemetry.io/collector/cmd/builder@v$VERSION"

work="$dir/build"
rm -rf "$work"
mkdir -p "$work"
cat >"$dir/manifest.yaml" <<YAML
dist:
  name: otelcol
  description: OpenTelemetry Collector with the Prometheus exporter, for the lakehouse tests
  version: '$VERSION'
  output_path: $work
receivers:
  - gomod: go.opentelemetry.io/collector/receiver/otlpreceiver v$VERSION
exporters:
  - gomod: github.com/open-telemetry/opentelemetry-collector-contrib/exporter/prometheusexporter v$VERSION
providers:
  - gomod: go.opentelemetry.io/collector/confmap/provider/envprovider v$PROVIDERS
  - gomod: go.opentelemetry.io/collector/confmap/provider/fileprovider v$PROVIDERS
  - gomod: go.opentelemetry.io/collector/confmap/provider/yamlprovider v$PROVIDERS
YAML
GOFLAGS="${GOFLAGS:-} -buildvcs=false" nice -n 10 "$GOBIN/builder" --config="$dir/manifest.yaml" >&2
mv "$work/otelcol" "$bin.tmp"
mv "$bin.tmp" "$bin"
rm -rf "$work"
"$bin" components >/dev/null
