#!/usr/bin/env bash
# The OpenTelemetry Collector for test/otlpGrpc.collector.test.ts: built with the collector builder (ocb)
# v0.162.0 from the OTLP receiver, the OTLP (gRPC) exporter and the debug exporter, cached under
# $LAKEHOUSE_TEST_CACHE/otelcol-0.162.0/otelcol. The first build takes minutes (run under nice); later runs
# find the binary and return at once. Modules come from the Go module proxy.
set -euo pipefail
VERSION=0.162.0
# The confmap providers are stable modules, versioned v1.x in step with the collector's v0.x.
PROVIDERS=1.68.0
cache=${LAKEHOUSE_TEST_CACHE:-$HOME/.cache/lakehouse-test}
dir="$cache/otelcol-$VERSION"
bin="$dir/otelcol"
if [ -x "$bin" ]; then exit 0; fi

go=$(command -v go || echo /usr/local/go/bin/go)
[ -x "$go" ] || { echo "40-otelcol: no Go toolchain (go, or /usr/local/go/bin/go) to build the Collector with" >&2; exit 1; }

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock -w 1800 9 || { echo "40-otelcol: timed out waiting for another build" >&2; exit 1; }
if [ -x "$bin" ]; then exit 0; fi

export GOBIN="$dir/tools"
nice -n 10 "$go" install "go.opentelemetry.io/collector/cmd/builder@v$VERSION"

work="$dir/build"
rm -rf "$work"
mkdir -p "$work"
cat >"$dir/manifest.yaml" <<YAML
dist:
  name: otelcol
  description: OpenTelemetry Collector for the lakehouse tests
  version: '$VERSION'
  output_path: $work
receivers:
  - gomod: go.opentelemetry.io/collector/receiver/otlpreceiver v$VERSION
exporters:
  - gomod: go.opentelemetry.io/collector/exporter/otlpexporter v$VERSION
  - gomod: go.opentelemetry.io/collector/exporter/debugexporter v$VERSION
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
