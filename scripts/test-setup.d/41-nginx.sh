#!/usr/bin/env bash
# nginx for test/otelcol.test.ts (grpc_pass in front of two workers): Debian's package, as the docs' nginx
# configuration must run on Debian's nginx (1.22) as well as on current images.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/ensure-deb.sh nginx nginx >/dev/null
