#!/usr/bin/env bash
# Airflow and Dagster for the integration tests, in their own venv: Airflow
# pins packages (FastAPI) that the core venv has moved past. Idempotent:
# reinstalled only when pyproject.toml changed. The test command runs it; the
# demo does not need it.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
SCHED=${PN_SCHED_VENV:-.venv-sched}
[ -x "$SCHED/bin/python" ] || "$PY" -m venv "$SCHED"
if [ "$(cat "$SCHED/.pn-installed" 2>/dev/null)" != "$want" ]; then
  echo "bootstrap: installing Airflow and Dagster into $SCHED (first run takes a few minutes)" >&2
  "$SCHED/bin/python" -m pip install -q --upgrade pip >/dev/null
  "$SCHED/bin/python" -m pip install -q -e '.[airflow,dagster,stomp,kafka,postgres]' pytest pytest-timeout
  echo "$want" > "$SCHED/.pn-installed"
fi
