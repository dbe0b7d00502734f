#!/usr/bin/env bash
# Debian's nginx (1.22 on Debian 12), for test/deploy.test.ts (minio/nginx.conf must pass `nginx -t` on it)
# and test/otelcol.test.ts (grpc_pass in front of two workers).
set -euo pipefail
"$(dirname "$0")/../ensure-deb.sh" nginx nginx >/dev/null
