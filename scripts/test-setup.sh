#!/usr/bin/env bash
# The suite's provisioning, run once by `npm test` before any test: every script in scripts/test-setup.d/
# in name order. Each installs (apt, pip, Maven) or builds (Go) one server or client the tests use and
# caches it under $LAKEHOUSE_TEST_CACHE, so a second run costs seconds. A script that cannot provide what
# it is for exits non-zero, loudly: tests are never silently skipped for a missing tool.
set -euo pipefail
cd "$(dirname "$0")/.."
export LAKEHOUSE_TEST_CACHE=${LAKEHOUSE_TEST_CACHE:-$HOME/.cache/lakehouse-test}
mkdir -p "$LAKEHOUSE_TEST_CACHE"
for step in scripts/test-setup.d/*.sh; do
  [ -e "$step" ] || continue
  echo "test-setup: $step" >&2
  bash "$step"
done
