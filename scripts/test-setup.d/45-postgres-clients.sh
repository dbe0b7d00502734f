#!/usr/bin/env bash
# The real PostgreSQL clients test/pgwire.test.ts, test/pgclients.test.ts and test/pgsession.test.ts use: psql (Debian's postgresql-client),
# psycopg 3 and SQLAlchemy (PyPI, in a venv), pgjdbc (Maven Central) with a small Java program
# (test/fixtures/pgjdbc/PgClient.java) compiled against it. Everything lands in
# $LAKEHOUSE_TEST_CACHE/pg-clients; a second run only checks what is there.
set -euo pipefail
cd "$(dirname "$0")/../.."
cache=${LAKEHOUSE_TEST_CACHE:-$HOME/.cache/lakehouse-test}/pg-clients
mkdir -p "$cache"

scripts/ensure-deb.sh psql postgresql-client >/dev/null

# psycopg 3 (its binary wheel carries its own libpq: nothing to compile) and SQLAlchemy 2.
venv=$cache/venv
if ! "$venv/bin/python" -c 'import psycopg, sqlalchemy' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q 'psycopg[binary]==3.2.*' 'sqlalchemy==2.0.*'
fi

jdbc_version=42.7.4
jar=$cache/postgresql-$jdbc_version.jar
if [ ! -s "$jar" ]; then
  if command -v mvn >/dev/null 2>&1; then
    mvn -q dependency:copy -Dartifact="org.postgresql:postgresql:$jdbc_version" -DoutputDirectory="$cache" >&2
  else
    curl -fsSL -o "$jar.tmp" "https://repo1.maven.org/maven2/org/postgresql/postgresql/$jdbc_version/postgresql-$jdbc_version.jar"
    mv "$jar.tmp" "$jar"
  fi
fi
[ -s "$jar" ] || { echo "pgjdbc jar missing at $jar" >&2; exit 1; }

src=test/fixtures/pgjdbc/PgClient.java
classes=$cache/pgjdbc-classes
if [ ! -f "$classes/PgClient.class" ] || [ "$src" -nt "$classes/PgClient.class" ]; then
  mkdir -p "$classes"
  javac -d "$classes" -cp "$jar" "$src"
fi
echo "pg clients ready in $cache" >&2
