#!/usr/bin/env bash
# The Iceberg readers the lake tests drive (docs/lake.md): pyiceberg 0.12 (RestCatalog) and DuckDB 1.5.5
# with its iceberg, avro and httpfs extensions from PyPI's duckdb-extension-* wheels (DuckDB cannot
# download extensions here, so they are loaded by file path). One virtual environment under the cache;
# the interpreter's path is kept in $cache/iceberg-python, where test/helpers/iceberg.ts looks for it.
set -euo pipefail
cache=${LAKEHOUSE_TEST_CACHE:-$HOME/.cache/lakehouse-test}
venv="$cache/iceberg-readers"
stamp="$venv/.installed-v1"
if [ ! -f "$stamp" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    'pyiceberg[pyarrow]==0.12.*' 'duckdb==1.5.5' \
    'duckdb-extension-iceberg==1.5.5' 'duckdb-extension-avro==1.5.5' 'duckdb-extension-httpfs==1.5.5'
  touch "$stamp"
fi
# Fail loudly here rather than in a test: every reader must import.
"$venv/bin/python" -c 'import pyiceberg, duckdb, pyarrow; print("pyiceberg", pyiceberg.__version__, "duckdb", duckdb.__version__)'
echo "$venv/bin/python" >"$cache/iceberg-python"
