#!/usr/bin/env bash
# Build writers/jvm/partition-notify-spark.jar (the Spark commit protocol) from
# writers/jvm/src with javac against the jars of the installed pyspark. No
# third-party jars. One jar for Spark 3.5 (Scala 2.12) and 4.x (Scala 2.13):
# the sources use no API whose compiled signature differs between the two
# (SparkCompat.java), and are also compiled, as a check, against the PySpark
# of every venv in PN_SPARK_CHECK_VENVS (default: .venv-spark35 if present).
# Idempotent: rebuilds only when a source file or a checked PySpark changed.
#   PYTHON=.venv/bin/python bash scripts/build_jvm.sh [--force]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
out=writers/jvm/partition-notify-spark.jar
stamp=writers/jvm/.build-stamp
jars_of() { "$1" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))'; }
checks=()
for v in ${PN_SPARK_CHECK_VENVS-.venv-spark35}; do
  [ -x "$v/bin/python" ] && "$v/bin/python" -c 'import pyspark' 2>/dev/null && checks+=("$(jars_of "$v/bin/python")")
done
jars=$(jars_of "$PY")
want=$( (find writers/jvm/src -name '*.java' -print0 | sort -z | xargs -0 sha256sum
         for j in "$jars" ${checks[@]+"${checks[@]}"}; do ls "$j" | grep -E '^spark-(core|sql)_'; done) |
       sha256sum | cut -d' ' -f1)
if [ "${1:-}" != "--force" ] && [ -f "$out" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
if ! command -v javac >/dev/null 2>&1; then
  echo "build_jvm: installing the Java 17 JDK (javac)" >&2
  (apt-get install -y -qq openjdk-17-jdk-headless >/dev/null 2>&1 ||
    (apt-get update -qq && apt-get install -y -qq openjdk-17-jdk-headless >/dev/null))
fi
classes=$(mktemp -d)
trap 'rm -rf "$classes"' EXIT
sources=$(find writers/jvm/src -name '*.java' | sort)
# --release 17: Spark 4 needs Java 17; Spark 3.5 runs on it.
build() { javac -Xlint:all,-path,-serial,-processing -Werror --release 17 -cp "$1/*" -d "$2" $sources; }
for j in ${checks[@]+"${checks[@]}"}; do
  mkdir -p "$classes/check" && build "$j" "$classes/check" && rm -rf "$classes/check"
  echo "build_jvm: the sources also compile against $j" >&2
done
mkdir -p "$classes/jar" && build "$jars" "$classes/jar"
jar --create --file "$out.tmp" -C "$classes/jar" .
mv "$out.tmp" "$out"
echo "$want" > "$stamp"
echo "build_jvm: built $out" >&2
