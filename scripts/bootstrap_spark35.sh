#!/usr/bin/env bash
# PySpark 3.5 (Scala 2.12) in its own venv, so the Spark commit-protocol tests
# also run on the Spark line most clusters run today (the core venv has
# PySpark 4, Scala 2.13). Idempotent: reinstalled only when pyproject.toml or
# this script changed. The test command runs it; the demo does not need it.
#   PYTHON=python3 bash scripts/bootstrap_spark35.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
want=$(cat pyproject.toml "$0" | sha256sum | cut -d' ' -f1)
V35=${PN_SPARK35_VENV:-.venv-spark35}
[ -x "$V35/bin/python" ] || "$PY" -m venv "$V35"
if [ "$(cat "$V35/.pn-installed" 2>/dev/null)" != "$want" ]; then
  echo "bootstrap: installing PySpark 3.5 into $V35 (first run takes a few minutes)" >&2
  "$V35/bin/python" -m pip install -q --upgrade pip >/dev/null
  # Not the [spark] extra: it asks for PySpark 4. PySpark 3.5 runs on Java 17.
  "$V35/bin/python" -m pip install -q -e '.[dev]' "pyspark==3.5.*" "pyarrow>=14" "pandas>=2,<3"
  echo "$want" > "$V35/.pn-installed"
fi
# The jar is built against the core venv's PySpark 4; with this venv present its
# sources are also compiled against PySpark 3.5 (a check, rebuilt when stale).
if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python bash scripts/build_jvm.sh; fi
