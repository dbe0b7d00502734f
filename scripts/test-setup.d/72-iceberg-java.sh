#!/usr/bin/env bash
# Java iceberg-core 1.12 (RESTCatalog + IcebergGenerics) from Maven Central for the lake tests: the
# classpath of test/fixtures/iceberg/java/pom.xml, kept in $cache/iceberg-java-classpath; the reader
# (Reader.java) runs as a single-file source program on Java 17.
set -euo pipefail
cd "$(dirname "$0")/../.."
cache=${LAKEHOUSE_TEST_CACHE:-$HOME/.cache/lakehouse-test}
mkdir -p "$cache"
command -v mvn >/dev/null || { apt-get update -qq && apt-get install -y -qq maven openjdk-17-jdk-headless >/dev/null; }
out="$cache/iceberg-java-classpath"
mvn -q -f test/fixtures/iceberg/java/pom.xml dependency:build-classpath -Dmdep.outputFile="$out.tmp" >/dev/null
mv "$out.tmp" "$out"
# Fail loudly here: the reader must compile against it (run without arguments, it stops at the first one).
probe=$(java -cp "$(cat "$out")" test/fixtures/iceberg/java/Reader.java 2>&1 || true)
grep -q 'ArrayIndexOutOfBounds' <<<"$probe" || { echo "$probe" >&2; exit 1; }
echo "iceberg-java reader ready"
