#!/usr/bin/env bash
# Prints the path of a Prometheus server binary, installing Debian's `prometheus` package when it is
# missing (the real-Prometheus remote-write test needs one). Exits non-zero, loudly, when it cannot.
# stdout carries only the path, so callers can read it; everything else goes to stderr.
set -euo pipefail

die() {
  {
    echo
    echo "!!!!! ensure-prometheus: $* !!!!!"
    echo
  } >&2
  exit 1
}

find_prometheus() {
  local found
  found=$(command -v prometheus || true)
  if [ -z "$found" ] && [ -x /usr/bin/prometheus ]; then found=/usr/bin/prometheus; fi
  [ -n "$found" ] && echo "$found"
}

if find_prometheus; then exit 0; fi

[ "$(id -u)" = "0" ] || die "prometheus is not installed, and installing it needs root (apt-get install prometheus)"
command -v apt-get >/dev/null 2>&1 || die "prometheus is not installed, and there is no apt-get to install it with"

# Test files run in parallel and may all find the binary missing: one installs, the others wait and
# then find it (two concurrent apt-gets would fail on the dpkg lock).
if command -v flock >/dev/null 2>&1; then
  exec 9>/tmp/ensure-prometheus.lock
  flock -w 600 9 || die "timed out waiting for another ensure-prometheus run"
  if find_prometheus; then exit 0; fi
fi

# Processes that already run are not ours to stop: remember them.
before=" $( (pgrep -x prometheus || true) | tr '\n' ' ') "

# The package's postinst starts a service on :9090 where an init system runs. A policy-rc.d that
# exits 101 forbids that; an existing one (Docker images ship one) is left as it is.
policy=/usr/sbin/policy-rc.d
ours_policy=
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && ours_policy=1
fi
cleanup() { if [ -n "$ours_policy" ]; then rm -f "$policy"; fi; }
trap cleanup EXIT

candidate=$(apt-cache policy prometheus 2>/dev/null || true)
if ! grep -q 'Candidate: [0-9]' <<<"$candidate"; then
  apt-get update -qq >&2 || die "apt-get update failed; see its output above"
fi
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >&2 ||
  die "apt-get install prometheus failed; see its output above"
cleanup
ours_policy=

# Belt and braces: if a service got started anyway, stop it, but only the processes that appeared
# during the install.
started=()
for pid in $(pgrep -x prometheus || true); do
  case "$before" in *" $pid "*) ;; *) started+=("$pid") ;; esac
done
if [ "${#started[@]}" -gt 0 ]; then
  echo "ensure-prometheus: the package started prometheus (pid ${started[*]}); stopping it" >&2
  if [ -x /etc/init.d/prometheus ]; then /etc/init.d/prometheus stop >&2 || true; fi
  for pid in "${started[@]}"; do kill "$pid" 2>/dev/null || true; done
  for _ in $(seq 50); do
    alive=
    for pid in "${started[@]}"; do if kill -0 "$pid" 2>/dev/null; then alive=1; fi; done
    [ -z "$alive" ] && break
    sleep 0.1
  done
  for pid in "${started[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
fi

find_prometheus || die "the prometheus package installed, but no prometheus binary was found"
