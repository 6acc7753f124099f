#!/usr/bin/env bash
# Create .venv with partition-notify and its extras. Idempotent: reinstalls
# only when pyproject.toml changed or an extra is missing.
# PN_EXTRAS (default spark,dev): the demo asks for spark alone, which skips the
# test tools, the drivers and the browser (scripts/demo.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
EXTRAS=${PN_EXTRAS:-spark,dev}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "bootstrap: Python >= 3.11 is required ($PY is $("$PY" --version 2>&1))" >&2
  exit 1
fi
if ! command -v java >/dev/null 2>&1; then
  echo "bootstrap: installing Java 17 for PySpark" >&2
  (apt-get install -y -qq openjdk-17-jre-headless >/dev/null 2>&1 ||
    (apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless >/dev/null))
fi
# tests/ui drive a real headless Chromium: Debian's browser and its driver.
if [[ ",$EXTRAS," == *,dev,* ]] && { ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; }; then
  echo "bootstrap: installing chromium and chromium-driver for tests/ui" >&2
  (apt-get install -y -qq chromium chromium-driver >/dev/null 2>&1 ||
    (apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null))
fi
# tests/store/test_pgbouncer.py start their own PgBouncer (never the system service).
if [[ ",$EXTRAS," == *,dev,* ]] && [ ! -x /usr/sbin/pgbouncer ] && ! command -v pgbouncer >/dev/null 2>&1; then
  echo "bootstrap: installing pgbouncer for tests/store/test_pgbouncer.py" >&2
  (apt-get install -y -qq pgbouncer >/dev/null 2>&1 ||
    (apt-get update -qq && apt-get install -y -qq pgbouncer >/dev/null))
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.pn-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
install=$("$PY" scripts/install_stamp.py "$stamp" "$want" "$EXTRAS")
if [ -n "$install" ]; then
  echo "bootstrap: installing partition-notify[$install] into .venv (first run takes a few minutes)" >&2
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e ".[$install]"
  echo "$want $install" > "$stamp"
fi
# The Spark commit protocol jar (package data of writers): rebuilt only when its sources change.
PYTHON=.venv/bin/python bash scripts/build_jvm.sh
