#!/usr/bin/env bash
# Builds the PromQL conformance harness (test/promql-conformance: Prometheus' own promqltest files run
# against the service over HTTP) into the test cache. Rebuilt only when its sources are newer than the
# binary; Go's module and build caches make a rebuild quick (the first build compiles Prometheus' TSDB).
set -euo pipefail
cd "$(dirname "$0")/../.."
cache=${LAKEHOUSE_TEST_CACHE:-$HOME/.cache/lakehouse-test}
out="$cache/promql-conformance.test"
src=test/promql-conformance
go=$(command -v go || echo /usr/local/go/bin/go)
[ -x "$go" ] || { echo "Go is needed to build $src (install Go 1.26)" >&2; exit 1; }
if [ -x "$out" ] && [ -z "$(find "$src" -type f \( -name '*.go' -o -name 'go.mod' -o -name 'go.sum' \) -newer "$out")" ]; then
  exit 0
fi
mkdir -p "$cache"
(cd "$src" && nice -n 10 "$go" test -c -o "$out.tmp.$$" .)
mv "$out.tmp.$$" "$out"
echo "built $out" >&2
