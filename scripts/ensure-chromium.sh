#!/usr/bin/env bash
# Prints the path of a Chromium binary, installing Debian's `chromium` package when it is missing (the
# web console's end-to-end test drives it headless through playwright-core). Exits non-zero, loudly,
# when it cannot. stdout carries only the path, so callers can read it; everything else goes to stderr.
set -euo pipefail

die() {
  {
    echo
    echo "!!!!! ensure-chromium: $* !!!!!"
    echo
  } >&2
  exit 1
}

find_chromium() {
  local c
  for c in "${CHROMIUM_PATH:-}" /usr/bin/chromium "$(command -v chromium || true)"; do
    if [ -n "$c" ] && [ -x "$c" ]; then
      echo "$c"
      return 0
    fi
  done
  return 1
}

if find_chromium; then exit 0; fi

[ "$(id -u)" = "0" ] || die "chromium is not installed, and installing it needs root (apt-get install chromium)"
command -v apt-get >/dev/null 2>&1 || die "chromium is not installed, and there is no apt-get to install it with"

# Two test runs may both find it missing: one installs, the other waits (apt-get holds the dpkg lock).
if command -v flock >/dev/null 2>&1; then
  exec 9>/tmp/ensure-chromium.lock
  flock -w 900 9 || die "timed out waiting for another ensure-chromium run"
  if find_chromium; then exit 0; fi
fi

candidate=$(apt-cache policy chromium 2>/dev/null || true)
if ! grep -q 'Candidate: [0-9]' <<<"$candidate"; then
  apt-get update -qq >&2 || die "apt-get update failed; see its output above"
fi
# Fonts so that screenshots show text; the package pulls in the rest.
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2 ||
  die "apt-get install chromium failed; see its output above"

find_chromium || die "the chromium package installed, but no chromium binary was found"
