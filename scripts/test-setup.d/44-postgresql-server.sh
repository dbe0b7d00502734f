#!/usr/bin/env bash
# A real PostgreSQL 15 server (Debian's postgresql-15) for test/pgCatalogReference.test.ts, which runs the
# catalog statements clients send against it and against the service and compares the answers. The test
# starts its own cluster (initdb in a temp dir, Unix socket only); this only installs the programs.
set -euo pipefail
bin=/usr/lib/postgresql/15/bin
if [ ! -x "$bin/postgres" ] || [ ! -x "$bin/initdb" ]; then
  apt-get update -qq && apt-get install -y -qq --no-install-recommends postgresql-15 >/dev/null
  # Debian's package starts a cluster of its own; the tests never use it.
  command -v pg_ctlcluster >/dev/null && pg_ctlcluster 15 main stop 2>/dev/null || true
fi
"$bin/postgres" --version | grep -q ' 15\.' || { echo "postgresql-15 missing at $bin" >&2; exit 1; }
id postgres >/dev/null || { echo "the postgres user (created by the postgresql-15 package) is missing" >&2; exit 1; }
echo "postgresql 15 ready: $("$bin/postgres" --version)" >&2
