#!/usr/bin/env bash
# The official Elasticsearch Python client (`elasticsearch` 8.x, PyPI) for test/shippers.test.ts, whose
# bulk helper is run against the service's Elasticsearch door. Installed once in a virtual environment
# under $LAKEHOUSE_TEST_CACHE/python-elasticsearch; its interpreter's path is kept in
# $LAKEHOUSE_TEST_CACHE/python-elasticsearch-python, where the test looks for it.
set -euo pipefail
cache=${LAKEHOUSE_TEST_CACHE:-$HOME/.cache/lakehouse-test}
venv="$cache/python-elasticsearch"
SPEC='elasticsearch>=8.15,<9'
CHECK='import elasticsearch, elasticsearch.helpers; assert elasticsearch.__versionstr__.startswith("8.")'
mkdir -p "$cache"
exec 9>"$cache/python-elasticsearch.lock"
flock -w 600 9 || { echo "python-elasticsearch: timed out waiting for another install" >&2; exit 1; }
if ! { [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$CHECK" >/dev/null 2>&1; }; then
  rm -rf "$venv"
  python3 -m venv "$venv" || { echo "python-elasticsearch: python3 -m venv failed (apt-get install python3-venv)" >&2; exit 1; }
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$SPEC" >&2
  "$venv/bin/python" -c "$CHECK"
fi
echo "$venv/bin/python" >"$cache/python-elasticsearch-python"
