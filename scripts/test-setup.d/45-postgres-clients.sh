#!/usr/bin/env bash
# The real PostgreSQL clients test/pgwire.test.ts, test/pgclients.test.ts and test/pgsession.test.ts use: psql (Debian's postgresql-client),
# psycopg 3 and SQLAlchemy (PyPI, in a venv; SQLAlchemy 1.4, 2.0 and 2.1 in venvs of their own), pgjdbc (Maven Central) with a small Java program
# (test/fixtures/pgjdbc/*.java: PgClient, MetaWalk) compiled against it. Everything lands in
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

# SQLAlchemy as users install it: the newest of each line clients use (issue 36), each in a venv of its
# own. 1.4 has no psycopg 3 dialect: it runs on psycopg2.
for line in 1.4 2.0 2.1; do
  sa_venv=$cache/venv-sqlalchemy-$line
  if ! "$sa_venv/bin/python" -c "import sqlalchemy, sys; sys.exit(not sqlalchemy.__version__.startswith('$line.'))" 2>/dev/null; then
    rm -rf "$sa_venv"
    python3 -m venv "$sa_venv"
    if [ "$line" = 1.4 ]; then
      "$sa_venv/bin/pip" install -q "sqlalchemy==$line.*" 'psycopg2-binary==2.9.*'
    else
      "$sa_venv/bin/pip" install -q --pre "sqlalchemy==$line.*" 'psycopg[binary]==3.2.*'
    fi
  fi
done

jdbc_version=42.7.14
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

# The test programs, compiled against that jar (again when a source or the jar is newer).
classes=$cache/pgjdbc-classes
for src in test/fixtures/pgjdbc/*.java; do
  class=$classes/$(basename "$src" .java).class
  if [ ! -f "$class" ] || [ "$src" -nt "$class" ] || [ "$jar" -nt "$class" ]; then
    mkdir -p "$classes"
    javac -d "$classes" -cp "$jar" "$src"
  fi
done
echo "pg clients ready in $cache" >&2
