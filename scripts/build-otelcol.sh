#!/usr/bin/env bash
# Builds an OpenTelemetry Collector with the collector builder (ocb) for the tests, cached under
# $LAKEHOUSE_TEST_CACHE/<name>-<version>/otelcol: the OTLP receiver, the given exporters and the env/file/yaml
# confmap providers. The first build takes minutes (run under nice); later runs find the binary and
# return at once. Modules come from the Go module proxy. Used by scripts/test-setup.d/4*-otelcol*.sh.
#
#   build-otelcol.sh NAME VERSION PROVIDERS DESCRIPTION EXPORTER_GOMOD...
#
# PROVIDERS: the confmap providers' version (stable modules, versioned v1.x in step with the
# collector's v0.x). Each EXPORTER_GOMOD is a module path; the collector's VERSION is appended.
set -euo pipefail
[ $# -ge 5 ] || { echo "usage: $0 NAME VERSION PROVIDERS DESCRIPTION EXPORTER_GOMOD..." >&2; exit 2; }
name=$1 VERSION=$2 PROVIDERS=$3 description=$4
shift 4
cache=${LAKEHOUSE_TEST_CACHE:-$HOME/.cache/lakehouse-test}
dir="$cache/$name-$VERSION"
bin="$dir/otelcol"
if [ -x "$bin" ]; then exit 0; fi

go=$(command -v go || echo /usr/local/go/bin/go)
[ -x "$go" ] || { echo "$name: no Go toolchain (go, or /usr/local/go/bin/go) to build the Collector with" >&2; exit 1; }

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock -w 1800 9 || { echo "$name: timed out waiting for another build" >&2; exit 1; }
if [ -x "$bin" ]; then exit 0; fi

export GOBIN="$dir/tools"
nice -n 10 "$go" install "go.opentelemetry.io/collector/cmd/builder@v$VERSION"

work="$dir/build"
rm -rf "$work"
mkdir -p "$work"
{
  cat <<YAML
dist:
  name: otelcol
  description: $description
  version: '$VERSION'
  output_path: $work
receivers:
  - gomod: go.opentelemetry.io/collector/receiver/otlpreceiver v$VERSION
exporters:
YAML
  for exporter in "$@"; do echo "  - gomod: $exporter v$VERSION"; done
  cat <<YAML
providers:
  - gomod: go.opentelemetry.io/collector/confmap/provider/envprovider v$PROVIDERS
  - gomod: go.opentelemetry.io/collector/confmap/provider/fileprovider v$PROVIDERS
  - gomod: go.opentelemetry.io/collector/confmap/provider/yamlprovider v$PROVIDERS
YAML
} >"$dir/manifest.yaml"
GOFLAGS="${GOFLAGS:-} -buildvcs=false" nice -n 10 "$GOBIN/builder" --config="$dir/manifest.yaml" >&2
mv "$work/otelcol" "$bin.tmp"
mv "$bin.tmp" "$bin"
rm -rf "$work"
"$bin" components >/dev/null
