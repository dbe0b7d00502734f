#!/usr/bin/env bash
# Debian's Prometheus, the real remote-write client of test/prometheus.test.ts.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/ensure-deb.sh prometheus prometheus >/dev/null
