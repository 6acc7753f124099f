#!/usr/bin/env bash
# Build writers/jvm/partition-notify-spark.jar (the Spark commit protocol) from
# writers/jvm/src with javac against the jars of the installed pyspark. No
# third-party jars. Idempotent: rebuilds only when a source file changed.
#   PYTHON=.venv/bin/python bash scripts/build_jvm.sh [--force]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
out=writers/jvm/partition-notify-spark.jar
stamp=writers/jvm/.build-stamp
want=$(find writers/jvm/src -name '*.java' -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
if [ "${1:-}" != "--force" ] && [ -f "$out" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
if ! command -v javac >/dev/null 2>&1; then
  echo "build_jvm: installing the Java 17 JDK (javac)" >&2
  (apt-get install -y -qq openjdk-17-jdk-headless >/dev/null 2>&1 ||
    (apt-get update -qq && apt-get install -y -qq openjdk-17-jdk-headless >/dev/null))
fi
jars=$("$PY" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
classes=$(mktemp -d)
trap 'rm -rf "$classes"' EXIT
# --release 17: runs on every JVM Spark 4 supports.
javac -Xlint:all,-path,-serial,-processing -Werror --release 17 -cp "$jars/*" -d "$classes" \
  $(find writers/jvm/src -name '*.java' | sort)
jar --create --file "$out.tmp" -C "$classes" .
mv "$out.tmp" "$out"
echo "$want" > "$stamp"
echo "build_jvm: built $out" >&2
