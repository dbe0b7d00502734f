#!/usr/bin/env bash
# Jaeger v1.76 all-in-one (in-memory storage, OTLP receiver, query API) for test/jaeger.test.ts, which
# sends the same spans to it and to the service and compares the Jaeger API answers call by call; and
# telemetrygen, the OTLP span generator. Both built from the Go module proxy and cached under
# $LAKEHOUSE_TEST_CACHE/jaeger-1.76.0/ (a second run costs nothing).
set -euo pipefail
CACHE=${LAKEHOUSE_TEST_CACHE:-$HOME/.cache/lakehouse-test}
DIR="$CACHE/jaeger-1.76.0"
mkdir -p "$DIR"
export GOBIN="$DIR" GOFLAGS=-mod=mod GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
if [ ! -x "$DIR/all-in-one" ]; then
  # Jaeger's go.mod has replace directives, so `go install pkg@version` refuses it: build inside a copy
  # of the module source fetched from the proxy instead.
  src=$(go mod download -json github.com/jaegertracing/jaeger@v1.76.0 | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
  [ -d "$src" ] || { echo "could not fetch github.com/jaegertracing/jaeger@v1.76.0" >&2; exit 1; }
  work="$DIR/src"
  rm -rf "$work" && cp -r "$src" "$work" && chmod -R u+w "$work"
  (cd "$work" && GOFLAGS= go build -o "$DIR/all-in-one.tmp" ./cmd/all-in-one)
  mv "$DIR/all-in-one.tmp" "$DIR/all-in-one" && rm -rf "$work"
fi
if [ ! -x "$DIR/telemetrygen" ]; then
  go install github.com/open-telemetry/opentelemetry-collector-contrib/cmd/telemetrygen@v0.161.0
fi
"$DIR/all-in-one" version >/dev/null 2>&1 || { echo "jaeger all-in-one at $DIR does not run" >&2; exit 1; }
echo "$DIR/all-in-one"
