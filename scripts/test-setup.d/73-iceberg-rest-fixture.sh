#!/usr/bin/env bash
# The Iceberg project's own REST catalog server (iceberg-open-api test fixtures, RESTCatalogServer, from
# Maven Central): the external catalog the push tests commit to (P_ICEBERG_PUSH_URI, docs/lake.md). The
# classpath of test/fixtures/iceberg/rest-fixture/pom.xml is kept in $cache/iceberg-rest-fixture-classpath.
set -euo pipefail
cd "$(dirname "$0")/../.."
cache=${LAKEHOUSE_TEST_CACHE:-$HOME/.cache/lakehouse-test}
mkdir -p "$cache"
command -v mvn >/dev/null || { apt-get update -qq && apt-get install -y -qq maven openjdk-17-jdk-headless >/dev/null; }
out="$cache/iceberg-rest-fixture-classpath"
mvn -q -f test/fixtures/iceberg/rest-fixture/pom.xml dependency:build-classpath -Dmdep.outputFile="$out.tmp" >/dev/null
# Fail loudly here: the server class must be on it.
unzip -l "$(tr ':' '\n' <"$out.tmp" | grep 'iceberg-open-api.*test-fixtures')" | grep -q 'org/apache/iceberg/rest/RESTCatalogServer.class' \
  || { echo "RESTCatalogServer missing from the iceberg-open-api test-fixtures jar" >&2; exit 1; }
mv "$out.tmp" "$out"
echo "iceberg REST fixture ready"
