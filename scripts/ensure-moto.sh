#!/usr/bin/env bash
# Prints the path of a Python interpreter that can run moto's S3 server (`moto[server]`, from PyPI),
# installing it when missing. The test suite's S3 server is moto because it honours conditional writes
# (PutObject with If-None-Match: *), which the service relies on to create a dataset exactly once when
# several workers race; test/helpers/s3server.ts checks that with a real request at every start.
# stdout carries only the path; everything else goes to stderr. Exits non-zero, loudly, when it cannot.
set -euo pipefail

die() {
  { echo; echo "!!!!! ensure-moto: $* !!!!!"; echo; } >&2
  exit 1
}

# moto 5.1 is the first release line whose S3 backend answers 412 to a second If-None-Match: * put.
MOTO_SPEC='moto[server]>=5.1,<6'
CHECK='import sys, moto, moto.server, flask, flask_cors; v = tuple(int(x) for x in moto.__version__.split(".")[:2]); sys.exit(0 if (5, 1) <= v < (6, 0) else 1)'

usable() { [ -x "$1" ] && "$1" -c "$CHECK" >/dev/null 2>&1; }

# 1. The machine's own python3, if it already has a suitable moto.
system=$(command -v python3 || true)
if [ -n "$system" ] && usable "$system"; then echo "$system"; exit 0; fi

# 2. A virtual environment of our own, installed once from PyPI.
cache="${XDG_CACHE_HOME:-$HOME/.cache}/telemetry-lakehouse"
venv="$cache/moto-venv"
if usable "$venv/bin/python"; then echo "$venv/bin/python"; exit 0; fi

[ -n "$system" ] || die "no python3 to run moto's S3 server with (apt-get install python3 python3-venv)"
mkdir -p "$cache"
# Test files run in parallel and may all find moto missing: one installs, the others wait.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$cache/moto-venv.lock"
  flock -w 600 9 || die "timed out waiting for another ensure-moto run"
  if usable "$venv/bin/python"; then echo "$venv/bin/python"; exit 0; fi
fi
rm -rf "$venv"
"$system" -m venv "$venv" >&2 || die "python3 -m venv failed (apt-get install python3-venv)"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$MOTO_SPEC" >&2 ||
  die "pip install '$MOTO_SPEC' failed; see its output above"
usable "$venv/bin/python" || die "moto installed, but 'import moto.server' still fails"
echo "$venv/bin/python"
