#!/usr/bin/env bash
# Prints the path of a Prometheus server binary, installing Debian's `prometheus` package when it is
# missing (the real-Prometheus remote-write test needs one). Exits non-zero, loudly, when it cannot.
set -euo pipefail
found=$(command -v prometheus || true)
if [ -z "$found" ] && [ -x /usr/bin/prometheus ]; then found=/usr/bin/prometheus; fi
if [ -n "$found" ]; then echo "$found"; exit 0; fi
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-prometheus: prometheus is not installed and cannot be installed here (needs root and apt-get)" >&2
  exit 1
fi
{
  if ! apt-cache policy prometheus 2>/dev/null | grep -q 'Candidate: [0-9]'; then apt-get update -qq; fi
  # The package would start a service on :9090 where an init system runs; policy-rc.d forbids that.
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus
  rm -f /usr/sbin/policy-rc.d
} >&2 || { rm -f /usr/sbin/policy-rc.d; echo "ensure-prometheus: apt-get install prometheus failed" >&2; exit 1; }
pkill -x prometheus >/dev/null 2>&1 || true
command -v prometheus || { echo "ensure-prometheus: installed, but no prometheus binary found" >&2; exit 1; }
