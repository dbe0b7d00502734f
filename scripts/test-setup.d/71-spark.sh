#!/usr/bin/env bash
# Spark 4.0 local (PyPI pyspark) with Iceberg's Spark runtime (Maven Central), the lake reader that
# catches the nanosecond trap (docs/lake.md). Java 17 from Debian. One virtual environment and the jar
# under the cache; the interpreter's path is kept in $cache/spark-python, the jar's in $cache/iceberg-spark-jar.
# For lakes on S3, Iceberg's AWS bundle (the AWS SDK v2 that the runtime's S3FileIO needs), in
# $cache/iceberg-aws-bundle-jar.
set -euo pipefail
cache=${LAKEHOUSE_TEST_CACHE:-$HOME/.cache/lakehouse-test}
venv="$cache/spark"
iceberg=1.10.0
jar="$cache/iceberg-spark-runtime-4.0_2.13-$iceberg.jar"
aws="$cache/iceberg-aws-bundle-$iceberg.jar"
if ! command -v java >/dev/null; then
  apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless >/dev/null
fi
if [ ! -f "$venv/.installed-v1" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check 'pyspark==4.0.*'
  touch "$venv/.installed-v1"
fi
if [ ! -s "$jar" ]; then
  # Maven's own client (Debian's maven when missing), by the artifact's coordinates.
  command -v mvn >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq maven >/dev/null; }
  mvn -q dependency:copy -Dartifact="org.apache.iceberg:iceberg-spark-runtime-4.0_2.13:$iceberg" -DoutputDirectory="$cache" >&2
fi
if [ ! -s "$aws" ]; then
  command -v mvn >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq maven >/dev/null; }
  mvn -q dependency:copy -Dartifact="org.apache.iceberg:iceberg-aws-bundle:$iceberg" -DoutputDirectory="$cache" >&2
fi
[ -s "$jar" ] || { echo "iceberg-spark-runtime jar missing at $jar" >&2; exit 1; }
[ -s "$aws" ] || { echo "iceberg-aws-bundle jar missing at $aws" >&2; exit 1; }
"$venv/bin/python" -c 'import pyspark; print("pyspark", pyspark.__version__)'
echo "$venv/bin/python" >"$cache/spark-python"
echo "$jar" >"$cache/iceberg-spark-jar"
echo "$aws" >"$cache/iceberg-aws-bundle-jar"
