#!/usr/bin/env bash
# Debian's Chromium for the console's end-to-end test (test/console.e2e.test.ts), with fonts so that
# screenshots show text. Skipped when CHROMIUM_PATH names one already.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ -n "${CHROMIUM_PATH:-}" ] && [ -x "$CHROMIUM_PATH" ]; then exit 0; fi
bash scripts/ensure-deb.sh chromium chromium fonts-dejavu-core >/dev/null
