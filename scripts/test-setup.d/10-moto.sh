#!/usr/bin/env bash
# moto[server] (PyPI), the suite's S3 server: it honours conditional writes (If-None-Match: *), which
# dataset creation across workers relies on. scripts/ensure-moto.sh finds or installs it in a virtual
# environment; the interpreter's path is kept where test/helpers/s3server.ts looks for it.
set -euo pipefail
cd "$(dirname "$0")/../.."
cache=${LAKEHOUSE_TEST_CACHE:-$HOME/.cache/lakehouse-test}
mkdir -p "$cache"
python=$(bash scripts/ensure-moto.sh)
echo "$python" >"$cache/moto-python"
