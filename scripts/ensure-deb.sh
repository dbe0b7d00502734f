#!/usr/bin/env bash
# Usage: ensure-deb.sh BINARY PACKAGE [MORE_PACKAGES…]
# Prints the path of BINARY, installing the Debian PACKAGE(s) with apt-get when it is missing (the suite
# needs Debian's `prometheus` for the real remote-write test and `chromium` for the console's end-to-end
# test). Exits non-zero, loudly, when it cannot. stdout carries only the path, so callers can read it;
# everything else goes to stderr.
set -euo pipefail

binary=${1:?usage: ensure-deb.sh BINARY PACKAGE [MORE_PACKAGES…]}
shift
[ "$#" -gt 0 ] || { echo "usage: ensure-deb.sh BINARY PACKAGE [MORE_PACKAGES…]" >&2; exit 2; }
packages=("$@")

die() {
  {
    echo
    echo "!!!!! ensure-deb $binary: $* !!!!!"
    echo
  } >&2
  exit 1
}

find_binary() {
  local c
  for c in "$(command -v "$binary" || true)" "/usr/bin/$binary"; do
    if [ -n "$c" ] && [ -x "$c" ]; then
      echo "$c"
      return 0
    fi
  done
  return 1
}

if find_binary; then exit 0; fi

[ "$(id -u)" = "0" ] || die "$binary is not installed, and installing it needs root (apt-get install ${packages[*]})"
command -v apt-get >/dev/null 2>&1 || die "$binary is not installed, and there is no apt-get to install it with"

# Test files run in parallel and may all find the binary missing: one installs, the others wait and
# then find it (two concurrent apt-gets would fail on the dpkg lock).
if command -v flock >/dev/null 2>&1; then
  exec 9>"/tmp/ensure-deb-$binary.lock"
  flock -w 900 9 || die "timed out waiting for another installation of $binary"
  if find_binary; then exit 0; fi
fi

# Processes of that name that already run are not ours to stop: remember them.
before=" $( (pgrep -x "$binary" || true) | tr '\n' ' ') "

# A package's postinst may start a service (prometheus does, on :9090) where an init system runs. A
# policy-rc.d that exits 101 forbids that; an existing one (Docker images ship one) is left as it is.
policy=/usr/sbin/policy-rc.d
ours_policy=
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && ours_policy=1
fi
cleanup() { if [ -n "$ours_policy" ]; then rm -f "$policy"; fi; }
trap cleanup EXIT

candidate=$(apt-cache policy "${packages[0]}" 2>/dev/null || true)
if ! grep -q 'Candidate: [0-9]' <<<"$candidate"; then
  apt-get update -qq >&2 || die "apt-get update failed; see its output above"
fi
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" >&2 ||
  die "apt-get install ${packages[*]} failed; see its output above"
cleanup
ours_policy=

# Belt and braces: if a service got started anyway, stop it, but only the processes that appeared
# during the install.
started=()
for pid in $(pgrep -x "$binary" || true); do
  case "$before" in *" $pid "*) ;; *) started+=("$pid") ;; esac
done
if [ "${#started[@]}" -gt 0 ]; then
  echo "ensure-deb: the package started $binary (pid ${started[*]}); stopping it" >&2
  if [ -x "/etc/init.d/$binary" ]; then "/etc/init.d/$binary" stop >&2 || true; fi
  for pid in "${started[@]}"; do kill "$pid" 2>/dev/null || true; done
  for _ in $(seq 50); do
    alive=
    for pid in "${started[@]}"; do if kill -0 "$pid" 2>/dev/null; then alive=1; fi; done
    [ -z "$alive" ] && break
    sleep 0.1
  done
  for pid in "${started[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
fi

find_binary || die "the package installed, but no $binary binary was found"
