#!/usr/bin/env bash
# Filebeat 7.17.28 for test/shippersFilebeat.test.ts, built from its source module
# (github.com/elastic/beats/v7, from the Go module proxy: v7.17.28 is served, @latest is not) with the
# module's own go.mod and replace directives. The first build takes many minutes (run under nice);
# cached under $LAKEHOUSE_TEST_CACHE/filebeat-7.17.28/filebeat.
set -euo pipefail
VERSION=7.17.28
cache=${LAKEHOUSE_TEST_CACHE:-$HOME/.cache/lakehouse-test}
dir="$cache/filebeat-$VERSION"
bin="$dir/filebeat"
if [ -x "$bin" ]; then exit 0; fi
go=$(command -v go || echo /usr/local/go/bin/go)
[ -x "$go" ] || { echo "filebeat: no Go toolchain (go, or /usr/local/go/bin/go) to build Filebeat with" >&2; exit 1; }
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock -w 3600 9 || { echo "filebeat: timed out waiting for another build" >&2; exit 1; }
if [ -x "$bin" ]; then exit 0; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A throwaway module to download the source module into the module cache.
(cd "$work" && "$go" mod init filebeat-download >/dev/null 2>&1 && "$go" mod download -json "github.com/elastic/beats/v7@v$VERSION" >"$work/module.json")
src=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' "$work/module.json")
[ -d "$src" ] || { echo "filebeat: github.com/elastic/beats/v7@v$VERSION could not be downloaded: $(cat "$work/module.json")" >&2; exit 1; }
cp -r "$src/." "$work/src" && chmod -R u+w "$work/src"
(cd "$work/src" && GOFLAGS="${GOFLAGS:-} -buildvcs=false" nice -n 10 "$go" build -o "$bin.tmp" ./filebeat)
mv "$bin.tmp" "$bin"
"$bin" version
